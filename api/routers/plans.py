"""/v1/plans: the history (newest first), one plan in full, diffs and exports."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from api.convert import page_out, plan_out, plan_summaries_out
from api.deps import IsoTime, Paging, Reader, RowId, SessionDep
from api.responses import NOT_FOUND, STANDARD
from api.schemas import PageOut, PlanDiffOut, PlanOut, PlanSummaryOut
from optimizer.calibration.next_measurement import DEFAULT_STEPS, NextMeasurement
from optimizer.errors import DomainError
from optimizer.exports.launch import Export
from optimizer.spec.names import SCHEDULERS, ExportName
from service.next_measurement import plan_next_measurement
from service.plans import inventory_change, plan_change, plan_pair, planned, stored_exports
from store.models import MAX_ID
from store.repositories.plans import PlanFilter, PlanRepository

router = APIRouter(prefix="/v1/plans", tags=["plans"], responses=STANDARD)
Trigger = Literal["user", "nightly", "inventory_change"]
ModelId = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=500,
        description="Serving exports: the Hugging Face id or checkpoint directory the engine loads (default: the "
        "preset's Hugging Face id; without one the export says MODEL and a note says so).",
    ),
]
AgainstPlan = Annotated[int | None, Query(ge=1, le=MAX_ID, description="Plan to compare with; default the previous.")]


@router.get("", response_model=PageOut[PlanSummaryOut])
def history(
    s: SessionDep,
    _: Reader,
    page: Paging,
    cluster_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    model_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    watch_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    trigger: Trigger | None = None,
    since: Annotated[IsoTime | None, Query(description="Created at or after (ISO 8601 with zone).")] = None,
    until: Annotated[IsoTime | None, Query(description="Created before.")] = None,
) -> PageOut[PlanSummaryOut]:
    for field, t in (("since", since), ("until", until)):
        if t is not None and t.tzinfo is None:
            raise DomainError(field, "needs a time zone (e.g. 2026-11-21T00:00:00Z)")
    f = PlanFilter(
        cluster_id=cluster_id, model_id=model_id, watch_id=watch_id, trigger=trigger, since=since, until=until
    )
    p = PlanRepository(s).history(f, page)
    return page_out(p, plan_summaries_out(s, p.items))


@router.get("/{plan_id}", response_model=PlanOut, responses=NOT_FOUND)
def get(plan_id: RowId, s: SessionDep, _: Reader) -> PlanOut:
    return plan_out(s, PlanRepository(s).get(plan_id))


@router.get("/{plan_id}/diff", response_model=PlanDiffOut, responses=NOT_FOUND)
def diff(plan_id: RowId, s: SessionDep, _: Reader, against: AgainstPlan = None) -> PlanDiffOut:
    before, after = plan_pair(s, plan_id, against)
    d = plan_change(before, after)
    return PlanDiffOut(
        plan_id=plan_id, against=before.id, diff=d, summary=d.summary(), inventory=inventory_change(s, before, after)
    )


@router.get("/{plan_id}/next-measurement", response_model=NextMeasurement, responses=NOT_FOUND)
def next_measurement(
    plan_id: RowId,
    s: SessionDep,
    _: Reader,
    steps: Annotated[int, Query(ge=1, le=10_000, description="Steps a short run logs after warm-up.")] = DEFAULT_STEPS,
    top: Annotated[int, Query(ge=1, le=100, description="Candidates returned, best first.")] = 10,
) -> NextMeasurement:
    """Which short run or acceptance test would narrow this training plan's predicted step time the most per
    GPU-hour, with the cluster's current calibration (serving plans: 422)."""
    return plan_next_measurement(s, plan_id, steps, top)


@router.get("/{plan_id}/export/{tool}", response_model=Export, responses=NOT_FOUND)
def export_plan(
    plan_id: RowId,
    tool: ExportName,
    s: SessionDep,
    _: Reader,
    model_id: ModelId = None,
) -> Export:
    """A launch for a framework or engine; for a training plan also `slurm` (an sbatch script) or `k8s` (a JobSet
    for Kueue) on the plan's placement."""
    p = PlanRepository(s).get(plan_id)
    if p.result.get("fleet") and tool not in SCHEDULERS and planned(p) is not None:
        raise DomainError(
            "plan", f"plan {plan_id} is an SLA fleet: it exports one launch per replica group at /fleet-export/{tool}"
        )
    return stored_exports(s, p, tool, model_id)[0]


@router.get("/{plan_id}/fleet-export/{tool}", response_model=list[Export], responses=NOT_FOUND)
def export_fleet_plan(
    plan_id: RowId, tool: Literal["vllm", "sglang", "trtllm"], s: SessionDep, _: Reader, model_id: ModelId = None
) -> list[Export]:
    """An SLA fleet's launches: one per replica group, plus the front end of a disaggregated fleet."""
    p = PlanRepository(s).get(plan_id)
    if not p.result.get("fleet"):
        raise DomainError("plan", f"plan {plan_id} is not an SLA fleet: export it at /export/{tool}")
    return stored_exports(s, p, tool, model_id)
