"""Watches: what to re-plan every night."""

from __future__ import annotations

from sqlalchemy import select

from store.models import Watch
from store.repositories.base import Repository, insert_unique
from store.repositories.paging import Page, PageRequest


class WatchRepository(Repository[Watch]):
    row_type, kind = Watch, "watch"

    def create(self, watch: Watch) -> Watch:
        return insert_unique(self.s, watch, "name", f"a watch named {watch.name!r} exists")

    def page(self, page: PageRequest, cluster_id: int | None = None) -> Page[Watch]:
        return self.newest(page, cluster_id=cluster_id)

    def all(self, cluster_id: int | None = None) -> list[Watch]:
        q = select(Watch).order_by(Watch.id)
        if cluster_id is not None:
            q = q.where(Watch.cluster_id == cluster_id)
        return list(self.s.scalars(q))
