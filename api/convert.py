"""Rows to response bodies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from api import schemas as S
from optimizer.search.result import PlanResult
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import InventoryDiff
from service.calibration import Comparison
from service.job_requests import SearchOptions
from store.models import Calibration, Cluster, ClusterRevision, Job, Model, ModelVersion, Plan, Watch
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.models import ModelRepository
from store.repositories.paging import Page
from store.repositories.plans import PlanRepository
from store.repositories.workloads import WorkloadRepository, workload_spec

T = TypeVar("T")


def page_out(p: Page[Any], items: list[T]) -> S.PageOut[T]:
    """One page of rows as a response body: `items` are its rows converted."""
    return S.PageOut(items=items, total=p.total, offset=p.offset, limit=p.limit)


def revision_out(rev: ClusterRevision) -> S.RevisionOut:
    return S.RevisionOut(
        number=rev.number,
        content_hash=rev.content_hash,
        recorded_at=rev.recorded_at,
        cause=rev.cause,
        healthy_gpus=rev.healthy_gpus,
        total_gpus=rev.total_gpus,
        diff=InventoryDiff.model_validate(rev.diff) if rev.diff else None,
        inventory=rev.spec,
    )


def pools_summary(spec: ClusterSpec) -> list[S.PoolSummary]:
    out = []
    for p in spec.pools:
        states = p.state_counts()
        out.append(
            S.PoolSummary(
                name=p.name,
                gpu=p.gpu,
                nodes=p.node_count,
                gpus_per_node=p.gpus_per_node,
                healthy_gpus=p.healthy_gpus,
                nodes_by_state=dict(states),
            )
        )
    return out


def cluster_out(s: Session, c: Cluster) -> S.ClusterOut:
    head = ClusterRepository(s).head(c)
    assert head is not None
    return S.ClusterOut(
        id=c.id,
        name=c.name,
        created_at=c.created_at,
        revision=head.number,
        healthy_gpus=head.healthy_gpus,
        total_gpus=head.total_gpus,
        pools=pools_summary(revision_spec(c, head)),
        inventory=head.spec,
    )


def version_out(v: ModelVersion) -> S.VersionOut:
    return S.VersionOut(
        number=v.number,
        created_at=v.created_at,
        parameters=v.parameters,
        num_layers=v.num_layers,
        is_moe=v.is_moe,
        spec=v.spec,
    )


def model_out(s: Session, m: Model) -> S.ModelOut:
    head = ModelRepository(s).head(m)
    assert head is not None
    return S.ModelOut(
        id=m.id,
        name=m.name,
        created_at=m.created_at,
        version=head.number,
        parameters=head.parameters,
        num_layers=head.num_layers,
        is_moe=head.is_moe,
        spec=head.spec,
    )


def job_out(s: Session, j: Job) -> S.JobOut:
    return jobs_out(s, [j])[0]


def jobs_out(s: Session, jobs: list[Job]) -> list[S.JobOut]:
    """Many jobs with their revision and version numbers and plan ids in at most three queries (a queued job has
    no plan yet: a plan is stored with its job's end)."""
    revs, versions = input_numbers(s, jobs)
    ended = {j.id for j in jobs if j.status != "queued"}
    plan_ids = PlanRepository(s).ids_by_job(ended) if ended else {}
    return [_job_out(s, j, revs, versions, plan_ids.get(j.id)) for j in jobs]


def _job_out(s: Session, j: Job, revs: dict[int, int], versions: dict[int, int], plan_id: int | None) -> S.JobOut:
    return S.JobOut(
        id=j.id,
        status=j.status,
        cluster_id=j.cluster_id,
        cluster_revision=revs[j.cluster_revision_id],
        model_id=j.model_id,
        model_version=versions[j.model_version_id],
        workload=workload_spec(WorkloadRepository(s).get(j.workload_id)),
        search=SearchOptions.model_validate(j.search),
        objective=j.objective,
        time_limit_s=j.time_limit_s,
        top_k=j.top_k,
        progress=S.JobProgress(
            best_objective=j.best_objective,
            bound=j.bound,
            elapsed_s=j.elapsed_s,
            candidates_solved=j.candidates_solved,
            updated_at=j.progress_at,
        ),
        error=j.error,
        trigger=j.trigger,
        watch_id=j.watch_id,
        attempts=j.attempts,
        cancel_requested=j.cancel_requested,
        plan_id=plan_id,
        created_at=j.created_at,
        started_at=j.started_at,
        finished_at=j.finished_at,
    )


def _summary_fields(
    s: Session, p: Plan, numbers: tuple[dict[int, int], dict[int, int]] | None = None
) -> dict[str, object]:
    revs, versions = numbers or input_numbers(s, [p])
    return dict(
        id=p.id,
        job_id=p.job_id,
        created_at=p.created_at,
        trigger=p.trigger,
        cluster_id=p.cluster_id,
        cluster_revision=revs[p.cluster_revision_id],
        model_id=p.model_id,
        model_version=versions[p.model_version_id],
        watch_id=p.watch_id,
        previous_plan_id=p.previous_plan_id,
        solver_status=p.solver_status,
        objective=p.objective,
        objective_value=p.objective_value,
        step_time_s=p.step_time_s,
        gap=p.gap,
        gpus=p.gpus,
        mfu=p.mfu,
        peak_memory_gb=p.peak_memory_gb,
        summary=p.summary,
        change=str(p.diff.get("summary")) if p.diff else None,
        calibration_id=p.calibration_id,
    )


def input_numbers(s: Session, rows: Sequence[Job | Plan]) -> tuple[dict[int, int], dict[int, int]]:
    """Revision and version numbers of many jobs or plans in two queries."""
    return (
        ClusterRepository(s).numbers({r.cluster_revision_id for r in rows}),
        ModelRepository(s).numbers({r.model_version_id for r in rows}),
    )


def plan_summaries_out(s: Session, plans: list[Plan]) -> list[S.PlanSummaryOut]:
    numbers = input_numbers(s, plans)
    return [S.PlanSummaryOut.model_validate(_summary_fields(s, p, numbers)) for p in plans]


def plan_out(s: Session, p: Plan) -> S.PlanOut:
    return S.PlanOut.model_validate(
        {
            **_summary_fields(s, p),
            "workload": workload_spec(WorkloadRepository(s).get(p.workload_id)),
            "result": PlanResult.model_validate(p.result),
            "diff": p.diff,
            "decision": p.result.get("decision"),
        }
    )


def watch_out(s: Session, w: Watch) -> S.WatchOut:
    return S.WatchOut(
        id=w.id,
        name=w.name,
        cluster_id=w.cluster_id,
        model_id=w.model_id,
        workload=workload_spec(WorkloadRepository(s).get(w.workload_id)),
        search=SearchOptions.model_validate(w.search),
        time_limit_s=w.time_limit_s,
        last_plan_id=w.last_plan_id,
        last_checked_at=w.last_checked_at,
        last_check=w.last_check,
        created_at=w.created_at,
        switch_threshold_pct=w.switch_threshold_pct,
    )


def measurement_out(c: Comparison) -> S.MeasurementOut:
    return S.MeasurementOut(
        id=c.row.id,
        plan_id=c.row.plan_id,
        created_at=c.row.created_at,
        source=c.row.source,
        measurement=c.measurement,
        measured_step_s=c.measured_step_s,
        planned_step_s=c.planned_step_s,
        uncalibrated_step_s=c.uncalibrated_step_s,
        calibrated_step_s=c.calibrated_step_s,
        error=c.error,
        flagged=c.flagged,
        predicted_memory_gb=c.row.predicted_memory_gb,
    )


def calibration_out(row: Calibration) -> S.CalibrationOut:
    return S.CalibrationOut(
        id=row.id,
        cluster_id=row.cluster_id,
        number=row.number,
        created_at=row.created_at,
        measurements=row.measurements,
        change=row.change,
        constants=ClusterCalibration.model_validate(row.constants),
        report=row.report,
    )
