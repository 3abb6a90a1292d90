"""Helpers shared by the repositories."""

from __future__ import annotations

from typing import TypeVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from store.errors import ConflictError
from store.models import Base

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
