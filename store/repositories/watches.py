"""Watches: what to re-plan every night."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.errors import NotFoundError
from store.models import Watch
from store.repositories.base import insert_unique
from store.repositories.paging import Page, PageRequest, paginate


class WatchRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def create(self, watch: Watch) -> Watch:
        return insert_unique(self.s, watch, "name", f"a watch named {watch.name!r} exists")

    def get(self, watch_id: int) -> Watch:
        row = self.s.get(Watch, watch_id)
        if row is None:
            raise NotFoundError("watch", watch_id)
        return row

    def page(self, page: PageRequest, cluster_id: int | None = None) -> Page[Watch]:
        q = select(Watch)
        if cluster_id is not None:
            q = q.where(Watch.cluster_id == cluster_id)
        return paginate(self.s, q.order_by(Watch.created_at.desc(), Watch.id.desc()), page)

    def all(self, cluster_id: int | None = None) -> list[Watch]:
        q = select(Watch).order_by(Watch.id)
        if cluster_id is not None:
            q = q.where(Watch.cluster_id == cluster_id)
        return list(self.s.scalars(q))

    def delete(self, watch_id: int) -> None:
        self.s.delete(self.get(watch_id))
        self.s.flush()
