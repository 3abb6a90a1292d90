"""What the repositories share: a row by id or NotFoundError, a newest-first page narrowed by equal columns,
add and delete (`Repository`), unique inserts and number lookups."""

from __future__ import annotations

from collections.abc import Set
from typing import Generic, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from store.errors import ConflictError, NotFoundError
from store.models import Base, ClusterRevision, ModelVersion
from store.repositories.paging import Page, PageRequest, paginate

M = TypeVar("M", bound=Base)


def get_row(session: Session, row_type: type[M], row_id: int, kind: str, *, for_update: bool = False) -> M:
    """The row of `row_type` with this id (from the session when it holds it), or NotFoundError naming `kind` (the
    API answers 404). `for_update` always reads it and locks it for the transaction (PostgreSQL row lock; SQLite
    writers queue at BEGIN)."""
    row = session.get(row_type, row_id, with_for_update=True if for_update else None)
    if row is None:
        raise NotFoundError(kind, row_id)
    return row


class Repository(Generic[M]):
    """The queries of one table that every repository has; a subclass names its `row_type` and the `kind` its
    NotFoundError names, and adds its own."""

    row_type: type[M]
    kind: str

    def __init__(self, session: Session) -> None:
        self.s = session

    def get(self, row_id: int, *, for_update: bool = False) -> M:
        return get_row(self.s, self.row_type, row_id, self.kind, for_update=for_update)

    def find(self, row_id: int) -> M | None:
        return self.s.get(self.row_type, row_id)

    def add(self, row: M) -> M:
        self.s.add(row)
        self.s.flush()
        return row

    def delete(self, row_id: int) -> None:
        self.s.delete(self.get(row_id))
        self.s.flush()

    def page(self, page: PageRequest) -> Page[M]:
        """Newest first (ties: the higher id first)."""
        return self.newest(page)

    def newest(self, page: PageRequest, **equal: object) -> Page[M]:
        """Newest first (ties: the higher id first); a column named in `equal` must equal its value unless that is
        None."""
        table = self.row_type.__table__
        q = select(self.row_type)
        for column, value in equal.items():
            if value is not None:
                q = q.where(table.c[column] == value)
        return paginate(self.s, q.order_by(table.c.created_at.desc(), table.c.id.desc()), page)


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
