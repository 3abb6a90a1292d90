"""Ordered, paginated lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from optimizer.errors import DomainError

T = TypeVar("T")
MAX_LIMIT = 500


@dataclass(frozen=True)
class PageRequest:
    """`limit` rows after skipping `offset`."""

    offset: int = 0
    limit: int = 50

    def __post_init__(self) -> None:
        if self.offset < 0:
            raise DomainError("offset", f"must be >= 0 (got {self.offset})")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise DomainError("limit", f"must be between 1 and {MAX_LIMIT} (got {self.limit})")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of an ordered list and the total number of rows."""

    items: list[T]
    total: int
    offset: int
    limit: int


def paginate(session: Session, query: Select[T], page: PageRequest) -> Page[T]:
    """Run an ordered query for one page; the total counts every row the query matches."""
    count_q: Select[Any] = select(func.count()).select_from(query.order_by(None).subquery())
    total = session.scalar(count_q) or 0
    items = list(session.scalars(query.offset(page.offset).limit(page.limit)))
    return Page(items=items, total=total, offset=page.offset, limit=page.limit)
