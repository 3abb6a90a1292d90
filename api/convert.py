"""Rows to response bodies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.orm import Session

from api import schemas as S
from optimizer.search.result import PlanResult
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import InventoryDiff
from service.acceptance import AcceptanceView
from service.calibration import Comparison
from service.job_requests import SearchOptions
from store.models import Calibration, Cluster, ClusterRevision, Job, Model, ModelVersion, Plan, Watch
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.models import ModelRepository
from store.repositories.paging import Page
from store.repositories.plans import PlanRepository
from store.repositories.workloads import WorkloadRepository, workload_spec

T = TypeVar("T")
Out = TypeVar("Out", bound=BaseModel)


def row_fields(out: type[BaseModel], row: object, **given: object) -> dict[str, object]:
    """The fields of `out`: those `given`, the others read from `row`'s attributes of the same names."""
    return {**{name: getattr(row, name) for name in out.model_fields if name not in given}, **given}


def from_row(out: type[Out], row: object, **given: object) -> Out:
    """An `out` body of `row` (see row_fields)."""
    return out.model_validate(row_fields(out, row, **given))


def page_out(p: Page[Any], items: list[T]) -> S.PageOut[T]:
    """One page of rows as a response body: `items` are its rows converted."""
    return S.PageOut(items=items, total=p.total, offset=p.offset, limit=p.limit)


def revision_out(rev: ClusterRevision) -> S.RevisionOut:
    diff = InventoryDiff.model_validate(rev.diff) if rev.diff else None
    return from_row(S.RevisionOut, rev, diff=diff, inventory=rev.spec)


def pools_summary(spec: ClusterSpec) -> list[S.PoolSummary]:
    return [
        from_row(
            S.PoolSummary,
            p,
            nodes=p.node_count,
            nodes_by_state=dict(p.state_counts()),
            reliability=p.reliability_or_default,
            reliability_sourced=p.reliability is None,
        )
        for p in spec.pools
    ]


def identity(row: Cluster | Model) -> dict[str, object]:
    """What a cluster's or model's body shows of the row itself; the rest is its head revision's or version's."""
    return {"id": row.id, "name": row.name, "created_at": row.created_at}


def cluster_out(s: Session, c: Cluster) -> S.ClusterOut:
    head = ClusterRepository(s).head(c)
    assert head is not None
    pools = pools_summary(revision_spec(c, head))
    return from_row(
        S.ClusterOut,
        head,
        **identity(c),
        revision=head.number,
        pools=pools,
        inventory=head.spec,
        sync_source=c.sync_source,
        last_sync=c.last_sync or "",
        last_synced_at=c.last_synced_at,
    )


def version_out(v: ModelVersion) -> S.VersionOut:
    return from_row(S.VersionOut, v)


def model_out(s: Session, m: Model) -> S.ModelOut:
    head = ModelRepository(s).head(m)
    assert head is not None
    return from_row(S.ModelOut, head, **identity(m), version=head.number)


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
    return from_row(
        S.JobOut,
        j,
        cluster_revision=revs[j.cluster_revision_id],
        model_version=versions[j.model_version_id],
        workload=workload_spec(WorkloadRepository(s).get(j.workload_id)),
        search=SearchOptions.model_validate(j.search),
        progress=from_row(S.JobProgress, j, updated_at=j.progress_at),
        plan_id=plan_id,
    )


def _summary_fields(
    s: Session, p: Plan, numbers: tuple[dict[int, int], dict[int, int]] | None = None
) -> dict[str, object]:
    revs, versions = numbers or input_numbers(s, [p])
    return row_fields(
        S.PlanSummaryOut,
        p,
        cluster_revision=revs[p.cluster_revision_id],
        model_version=versions[p.model_version_id],
        change=str(p.diff.get("summary")) if p.diff else None,
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
    workload = workload_spec(WorkloadRepository(s).get(w.workload_id))
    return from_row(S.WatchOut, w, workload=workload, search=SearchOptions.model_validate(w.search))


def measurement_out(c: Comparison) -> S.MeasurementOut:
    r = c.row
    return from_row(
        S.MeasurementOut,
        c,
        id=r.id,
        plan_id=r.plan_id,
        created_at=r.created_at,
        source=r.source,
        predicted_memory_gb=r.predicted_memory_gb,
    )


def calibration_out(row: Calibration) -> S.CalibrationOut:
    return from_row(S.CalibrationOut, row, constants=ClusterCalibration.model_validate(row.constants))


def acceptance_out(v: AcceptanceView) -> S.AcceptanceTestOut:
    return S.AcceptanceTestOut(
        id=v.id,
        cluster_id=v.cluster_id,
        pool=v.pool,
        kind=v.kind,
        subject=v.subject,
        note=v.note,
        created_at=v.created_at,
        figures=v.run.model_dump(mode="json"),
        comparison=v.figures,
        sets_priors=v.sets_priors,
        error=v.error,
    )
