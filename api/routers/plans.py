"""/v1/plans: the history (newest first), one plan in full, diffs and exports."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api.convert import plan_out, plan_summaries_out
from api.deps import MAX_ID, Paging, Reader, RowId, SessionDep
from api.responses import NOT_FOUND, STANDARD
from api.schemas import PageOut, PlanDiffOut, PlanOut, PlanSummaryOut
from optimizer.errors import DomainError
from optimizer.exports import Export, export
from optimizer.inventory import diff_inventories
from optimizer.plan_diff import diff_plans
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.models import ModelRepository, version_spec
from store.repositories.plans import PlanFilter, PlanRepository
from store.repositories.workloads import WorkloadRepository, workload_spec
from store.services.jobs import planned

router = APIRouter(prefix="/v1/plans", tags=["plans"], responses=STANDARD)
Trigger = Literal["user", "nightly", "inventory_change"]


@router.get("", response_model=PageOut[PlanSummaryOut])
def history(
    s: SessionDep,
    _: Reader,
    page: Paging,
    cluster_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    model_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    watch_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    trigger: Trigger | None = None,
    since: Annotated[datetime | None, Query(description="Created at or after (ISO 8601 with zone).")] = None,
    until: Annotated[datetime | None, Query(description="Created before.")] = None,
) -> PageOut[PlanSummaryOut]:
    for field, t in (("since", since), ("until", until)):
        if t is not None and t.tzinfo is None:
            raise DomainError(field, "needs a time zone (e.g. 2026-11-21T00:00:00Z)")
    f = PlanFilter(
        cluster_id=cluster_id, model_id=model_id, watch_id=watch_id, trigger=trigger, since=since, until=until
    )
    p = PlanRepository(s).history(f, page)
    return PageOut(items=plan_summaries_out(s, p.items), total=p.total, offset=p.offset, limit=p.limit)


@router.get("/{plan_id}", response_model=PlanOut, responses=NOT_FOUND)
def get(plan_id: RowId, s: SessionDep, _: Reader) -> PlanOut:
    return plan_out(s, PlanRepository(s).get(plan_id))


@router.get("/{plan_id}/diff", response_model=PlanDiffOut, responses=NOT_FOUND)
def diff(
    plan_id: RowId,
    s: SessionDep,
    _: Reader,
    against: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="Plan to compare with; default the previous.")
    ] = None,
) -> PlanDiffOut:
    repo = PlanRepository(s)
    after = repo.get(plan_id)
    base_id = against if against is not None else after.previous_plan_id
    if base_id is None:
        raise DomainError("against", f"plan {plan_id} has no previous plan; name one with ?against=ID")
    before = repo.get(base_id)
    d = diff_plans(planned(before), planned(after))
    inventory = None
    if before.cluster_id == after.cluster_id and before.cluster_revision_id != after.cluster_revision_id:
        clusters = ClusterRepository(s)
        cluster = clusters.get(after.cluster_id)
        inventory = diff_inventories(
            revision_spec(cluster, clusters.revision_by_id(before.cluster_revision_id)),
            revision_spec(cluster, clusters.revision_by_id(after.cluster_revision_id)),
        )
    return PlanDiffOut(plan_id=plan_id, against=before.id, diff=d, summary=d.summary(), inventory=inventory)


@router.get("/{plan_id}/export/{tool}", response_model=Export, responses=NOT_FOUND)
def export_plan(
    plan_id: RowId, tool: Literal["megatron", "deepspeed", "torchtitan", "vllm", "sglang"], s: SessionDep, _: Reader
) -> Export:
    p = PlanRepository(s).get(plan_id)
    best = planned(p)
    if best is None:
        raise DomainError("plan", f"plan {plan_id} is {p.solver_status}: there is no configuration to export")
    models = ModelRepository(s)
    model = version_spec(models.get(p.model_id), models.version_by_id(p.model_version_id))
    return export(tool, model, workload_spec(WorkloadRepository(s).get(p.workload_id)), best.config, model.name)
