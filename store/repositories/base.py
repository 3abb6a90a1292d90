"""Helpers shared by the repositories."""

from __future__ import annotations

from collections.abc import Set
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from store.errors import ConflictError
from store.models import Base, ClusterRevision, ModelVersion

M = TypeVar("M", bound=Base)


def insert_unique(session: Session, row: M, field: str, rule: str) -> M:
    """Insert `row` inside a savepoint; a unique-key clash becomes a ConflictError naming `field`."""
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError as exc:
        raise ConflictError(field, rule) from exc
    return row


def numbers_by_id(session: Session, row_type: type[ClusterRevision | ModelVersion], ids: Set[int]) -> dict[int, int]:
    """The `number` of revision or version rows by id: rows this session already holds are read from it (a job
    just submitted names the revision and version it looked up), the others in one query."""
    found: dict[int, int] = {}
    for i in ids:
        row = session.identity_map.get(identity_key(row_type, i))
        if isinstance(row, row_type):
            found[i] = row.number
    missing = set(ids) - found.keys()
    if missing:
        q = select(row_type.id, row_type.number).where(row_type.id.in_(missing))
        found.update({i: n for i, n in session.execute(q)})
    return found
