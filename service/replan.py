"""Nightly re-planning: a watch is planned again only when its inputs changed since its last plan."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.job_requests import JobRequest, SearchOptions
from service.jobs import submit
from store.models import Watch, now
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from store.repositories.measurements import CalibrationRepository
from store.repositories.models import ModelRepository
from store.repositories.plans import PlanRepository
from store.repositories.watches import WatchRepository
from store.repositories.workloads import WorkloadRepository, workload_spec
from store.settings import Settings, settings

NIGHTLY_CLIENT = "meshplan-replan"


@dataclass(frozen=True)
class WatchCheck:
    """What a re-plan check found for one watch."""

    watch_id: int
    changed: list[str]
    job_id: int | None  # the job submitted (None: nothing changed, or the same job is already queued)


def check_watch(s: Session, watch: Watch, trigger: str, cfg: Settings | None = None, force: bool = False) -> WatchCheck:
    """Compare the watch's current inputs with its last plan's; submit a warm-started job when they differ."""
    clusters, models = ClusterRepository(s), ModelRepository(s)
    cluster, model = clusters.get(watch.cluster_id), models.get(watch.model_id)
    rev, version = clusters.head(cluster), models.head(model)
    if rev is None or version is None:
        watch.last_checked_at, watch.last_check = now(), "no inventory or model version yet"
        return WatchCheck(watch.id, [], None)
    last = PlanRepository(s).get(watch.last_plan_id) if watch.last_plan_id else None
    changed: list[str] = []
    if last is None:
        changed.append("no plan yet")
    else:
        if last.cluster_revision_id != rev.id:
            changed.append(
                f"inventory revision {clusters.revision_by_id(last.cluster_revision_id).number}→{rev.number}"
            )
        if last.model_version_id != version.id:
            changed.append(f"model version {models.version_by_id(last.model_version_id).number}→{version.number}")
        if last.workload_id != watch.workload_id:
            changed.append("workload")
        moved = calibration_moved(s, last.calibration_id, watch.cluster_id, cfg)
        if moved:
            changed.append(moved)
    if not changed and not force:
        watch.last_checked_at, watch.last_check = now(), "unchanged"
        return WatchCheck(watch.id, [], None)
    req = JobRequest(
        cluster_id=cluster.id,
        model_id=model.id,
        workload=workload_spec(WorkloadRepository(s).get(watch.workload_id)),
        search=SearchOptions.model_validate(watch.search),
        time_limit_s=watch.time_limit_s,
    )
    # One job per (watch, inputs): a second check before the job ran finds the same job through the key. A job
    # of those inputs that failed or was cancelled does not block the next checks: they key a new attempt.
    cal = CalibrationRepository(s).current(cluster.id)
    key = None if force else f"watch-{watch.id}-rev-{rev.id}-mv-{version.id}-w-{watch.workload_id}"
    if key is not None and cal is not None:
        key += f"-cal-{cal.id}"
    jobs = JobRepository(s)
    base = key
    while key is not None and (prior := jobs.by_key(NIGHTLY_CLIENT, key)) is not None:
        if prior.status not in ("failed", "cancelled"):
            break
        key = f"{base}-after-{prior.id}"
    job, _created = submit(
        s,
        req,
        client=NIGHTLY_CLIENT,
        idempotency_key=key,
        trigger=trigger,
        watch_id=watch.id,
        warm_start_plan_id=last.id if last else None,
        cfg=cfg,
    )
    watch.last_checked_at = now()
    watch.last_check = ("re-planned: " + ", ".join(changed or ["on request"]))[:256]
    return WatchCheck(watch.id, changed, job.id)


def calibration_moved(s: Session, used_id: int | None, cluster_id: int, cfg: Settings | None) -> str | None:
    """Why the cluster's current calibration is a reason to re-plan (a constant moved beyond the threshold since
    the calibration the last plan used), or None."""
    cals = CalibrationRepository(s)
    current = cals.current(cluster_id)
    if current is None or current.id == used_id:
        return None
    threshold = (cfg or settings()).replan_calibration_change
    used = cals.find(used_id)
    change = cals.change(used_id, current.id)
    if change < threshold:
        return None
    return f"calibration {used.number if used else 'none'}→{current.number} ({change:.0%} on a constant)"


def check_watches(
    s: Session, trigger: str, cluster_id: int | None = None, cfg: Settings | None = None
) -> list[WatchCheck]:
    """Check every watch (or a cluster's). A watch whose job cannot be submitted records why and the rest go on."""
    out = []
    for watch in WatchRepository(s).all(cluster_id):
        try:
            with s.begin_nested():
                out.append(check_watch(s, watch, trigger, cfg))
        except Exception as exc:
            watch.last_checked_at, watch.last_check = now(), f"error: {exc}"[:256]
            out.append(WatchCheck(watch.id, [], None))
    return out
