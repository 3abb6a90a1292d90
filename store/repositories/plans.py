"""The history of plans: newest first, filtered by cluster, model, watch, trigger and time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from store.models import Plan
from store.repositories.base import Repository
from store.repositories.paging import Page, PageRequest, paginate


@dataclass(frozen=True)
class PlanFilter:
    cluster_id: int | None = None
    model_id: int | None = None
    watch_id: int | None = None
    trigger: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class PlanRepository(Repository[Plan]):
    row_type, kind = Plan, "plan"

    def by_job(self, job_id: int) -> Plan | None:
        return self.s.scalar(select(Plan).where(Plan.job_id == job_id))

    def ids_by_job(self, job_ids: set[int]) -> dict[int, int]:
        """Plan id by job id, for the jobs that have a plan."""
        q = select(Plan.job_id, Plan.id).where(Plan.job_id.in_(job_ids))
        return {job_id: plan_id for job_id, plan_id in self.s.execute(q)}

    def history(self, f: PlanFilter, page: PageRequest, *, with_result: bool = False) -> Page[Plan]:
        """Newest first. The full planner result (large JSON) is loaded only when asked for."""
        q = select(Plan).options(selectinload(Plan.document)) if with_result else select(Plan)
        if f.cluster_id is not None:
            q = q.where(Plan.cluster_id == f.cluster_id)
        if f.model_id is not None:
            q = q.where(Plan.model_id == f.model_id)
        if f.watch_id is not None:
            q = q.where(Plan.watch_id == f.watch_id)
        if f.trigger is not None:
            q = q.where(Plan.trigger == f.trigger)
        if f.since is not None:
            q = q.where(Plan.created_at >= f.since)
        if f.until is not None:
            q = q.where(Plan.created_at < f.until)
        return paginate(self.s, q.order_by(Plan.created_at.desc(), Plan.id.desc()), page)

    def latest(self, f: PlanFilter) -> Plan | None:
        page = self.history(f, PageRequest(limit=1), with_result=True)
        return page.items[0] if page.items else None
