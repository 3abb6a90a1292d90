"""Planning jobs: submission (checked by job_requests, idempotent) and execution (claim, solve, store once)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.exports.plan_diff import diff_fleets, diff_plans
from optimizer.search.explain import describe
from optimizer.search.fallbacks import compatible, lost_nodes, match, with_fallbacks
from optimizer.search.fleet_result import FleetPlan
from optimizer.search.planner import plan
from optimizer.search.reported import reported_plan
from optimizer.search.result import Fallback, FallbackStart, PlannedConfig, PlanResult, Progress
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import content_hash
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.objectives import objective_name
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from service.job_requests import JobRequest, SearchOptions, check, target, target_of
from service.plans import fleet_of, inventory_between, planned, specs_of
from service.replan_decisions import decided
from store.db import Database
from store.models import Job, Plan, PlanDocument, job_inputs
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import FINISHED, JobRepository
from store.repositories.measurements import CalibrationRepository, MeasurementRepository, calibration_spec
from store.repositories.models import ModelRepository
from store.repositories.plans import PlanFilter, PlanRepository
from store.repositories.submissions import submission_rows
from store.repositories.watches import WatchRepository
from store.repositories.workloads import WorkloadRepository, workload_hash
from store.settings import Settings, settings

log = logging.getLogger("meshplan.jobs")


@dataclass(frozen=True)
class JobInputs:
    """Everything a solve needs, loaded from the database."""

    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainingWorkload | InferenceWorkload
    space: SearchSpace
    time_limit_s: float
    top_k: int
    warm_start: ParallelConfig | None
    measured: tuple[ParallelConfig, ...] = ()
    """Configurations of this model measured on this cluster: the territory the interval rule prefers."""
    ran: ParallelConfig | None = None
    """A configuration reported as run: planned as given (optimizer/search/reported.py), no search."""
    fallbacks: bool = False
    """Training: compute the plan's fallbacks after it (optimizer/search/fallbacks.py)."""
    start: FallbackMatch | None = None
    """A re-plan after lost nodes: the previous plan's stored fallback for that loss (the first answer)."""


@dataclass(frozen=True)
class FallbackMatch:
    """A previous plan's stored fallback that matches the nodes the inventory lost since."""

    fallback: Fallback
    plan_id: int
    matched_by: str
    """nodes | gpu_counts (optimizer/search/fallbacks.py match)."""
    framework: str | None
    """The framework the previous plan runs on."""
    seconds: float
    """Time the match took (reading the previous inventory, comparing): part of the time to answer."""


def submit(
    session: Session,
    req: JobRequest,
    *,
    client: str = "",
    idempotency_key: str | None = None,
    trigger: str = "user",
    watch_id: int | None = None,
    warm_start_plan_id: int | None = None,
    cfg: Settings | None = None,
) -> tuple[Job, bool]:
    """Check (job_requests.check: without building the search space) and store a job (queued). Returns (job,
    created); the caller commits, then enqueues."""
    cfg = cfg or settings()
    limit = cfg.time_limit(req.time_limit_s)
    # One query for every row it reads (store/repositories/submissions.py); a missing row's 404 from the slow path.
    rows = submission_rows(
        session,
        req.cluster_id,
        req.model_id,
        req.cluster_revision,
        req.model_version,
        workload_hash(req.workload),
    )
    if rows is not None:
        t = target_of(rows)
    else:
        t = target(session, req.cluster_id, req.model_id, req.cluster_revision, req.model_version)
    rev, version = check(t, req.workload, req.search, limit, cfg)
    cluster, model = t.cluster, t.model
    workload = rows.workload if rows and rows.workload else WorkloadRepository(session).intern(req.workload)
    if req.calibration == "none":
        calibration_id = None
    elif rows is not None:
        calibration_id = rows.calibration_id
    else:
        calibration = CalibrationRepository(session).current(cluster.id)
        calibration_id = calibration.id if calibration is not None else None
    job = Job(
        watch_id=watch_id,
        warm_start_plan_id=warm_start_plan_id,
        search=req.search.model_dump(mode="json"),
        objective=objective_name(req.workload),
        time_limit_s=limit,
        top_k=req.top_k,
        status="queued",
        client=client,
        idempotency_key=idempotency_key,
        request_hash=content_hash(req.model_dump(mode="json")),
        trigger=trigger,
        calibration_id=calibration_id,
    )
    # the input ids, and the rows themselves (read-only links: answering the job reads them from the session)
    job.cluster_id, job.cluster_revision_id, job.cluster_revision = cluster.id, rev.id, rev
    job.model_id, job.model_version_id, job.model_version = model.id, version.id, version
    job.workload_id, job.workload = workload.id, workload
    return JobRepository(session).submit(job)


def load_inputs(session: Session, job: Job) -> JobInputs:
    specs = specs_of(session, job)
    warm = None
    start: FallbackMatch | None = None
    prev = PlanRepository(session).find(job.warm_start_plan_id) if job.warm_start_plan_id is not None else None
    if prev is not None and prev.result.get("plan"):
        warm = ParallelConfig.model_validate(prev.result["plan"]["config"])
        start = matching_fallback(session, prev, specs.cluster)
    calibration = calibration_spec(CalibrationRepository(session).find(job.calibration_id))
    measured = tuple(
        ParallelConfig.model_validate(m.config)
        for m, p in MeasurementRepository(session).of_cluster(job.cluster_id)
        if p.model_id == job.model_id and m.config
    )
    search = SearchOptions.model_validate(job.search)
    return JobInputs(
        model=specs.model,
        cluster=specs.cluster.with_calibration(calibration),
        workload=specs.workload,
        space=search.space(),
        time_limit_s=job.time_limit_s,
        top_k=job.top_k,
        warm_start=warm,
        measured=measured,
        ran=search.ran,
        fallbacks=search.fallbacks and isinstance(specs.workload, TrainingWorkload),
        start=start,
    )


def matching_fallback(session: Session, prev: Plan, cluster: ClusterSpec) -> FallbackMatch | None:
    """The previous plan's stored fallback for the nodes `cluster` lost since the inventory it was planned on
    (optimizer/search/fallbacks.py match), with how it matched; None when none matches."""
    t0 = time.perf_counter()
    stored = [Fallback.model_validate(f) for f in prev.result.get("fallbacks") or []]
    if not stored:
        return None
    before = specs_of(session, prev).cluster
    found = match(stored, lost_nodes(before, cluster), {p.name: p.healthy_gpus for p in cluster.pools})
    if found is None:
        return None
    return FallbackMatch(found[0], prev.id, found[1], prev.result.get("framework"), time.perf_counter() - t0)


class _Watcher:
    """Polls the job's cancel flag (twice a second) and writes progress (at most once per interval), each in its
    own short transaction, while the solver runs in the calling thread."""

    def __init__(self, db: Database, job_id: int, interval_s: float) -> None:
        self.db, self.job_id, self.interval_s = db, job_id, interval_s
        self.cancel = threading.Event()
        self._done = threading.Event()
        self._last_write = 0.0
        self._thread = threading.Thread(target=self._poll, name=f"job-{job_id}-cancel", daemon=True)

    def __enter__(self) -> _Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _poll(self) -> None:
        beats = 0
        while not self._done.wait(0.5):
            beats += 1
            try:
                with self.db.session() as s:
                    jobs = JobRepository(s)
                    if jobs.cancel_requested(self.job_id):
                        self.cancel.set()
                        return
                    if beats % 4 == 0:  # every 2 s: this worker is alive (a lease of LEASE_S)
                        jobs.heartbeat(self.job_id)
            except Exception:  # the database is briefly away: keep solving, look again
                log.warning("job %s: cancel flag unreadable", self.job_id, exc_info=True)

    def progress(self, p: Progress) -> None:
        t = time.monotonic()
        if t - self._last_write < self.interval_s:
            return
        self._last_write = t
        try:
            with self.db.session() as s:
                JobRepository(s).progress(self.job_id, p.best, p.bound, p.elapsed_s, p.solved)
        except Exception:
            log.warning("job %s: progress not written", self.job_id, exc_info=True)


def run_job(db: Database, job_id: int, cfg: Settings | None = None) -> str:
    """Solve one job and store its plan. Returns the job's final status. Safe to call twice for the same job
    (a redelivery): a finished job is not solved again, and a plan is stored at most once per job."""
    cfg = cfg or settings()
    with db.session() as s:
        jobs = JobRepository(s)
        if not jobs.claim(job_id):
            return jobs.get(job_id).status
        inputs = load_inputs(s, jobs.get(job_id))
    result: PlanResult | None = None
    error: str | None = None
    with _Watcher(db, job_id, cfg.job_progress_interval_s) as watcher:
        try:
            result = solve(inputs, cfg, watcher)
        except DomainError as exc:
            error = str(exc)
        except Exception as exc:  # a bug: the job says so, the worker lives on
            log.exception("job %s failed", job_id)
            error = f"internal error ({type(exc).__name__}); see the worker log"
        cancelled = watcher.cancel.is_set()
        # Written while the watcher still beats: a final write waiting out a database outage keeps the job's
        # lease, so that no live worker takes over a solved job once the database is back [issue 47 item 2].
        return _complete(db, job_id, result, error, cancelled)


def solve(inputs: JobInputs, cfg: Settings, watcher: _Watcher) -> PlanResult:
    """The job's plan: a reported configuration as given, else the planner's search."""
    if inputs.ran is not None:
        return reported_plan(inputs.model, inputs.cluster, inputs.workload, inputs.ran)
    t0 = time.perf_counter()
    fb = inputs.start.fallback if inputs.start is not None else None
    first = _fallback_answer(inputs) if inputs.start is not None else None
    answered = time.perf_counter() - t0 + (inputs.start.seconds if inputs.start is not None else 0.0)
    result = plan(
        inputs.model,
        inputs.cluster,
        inputs.workload,
        inputs.space,
        top_k=inputs.top_k,
        time_limit_s=inputs.time_limit_s,
        max_time_limit_s=max(inputs.time_limit_s, cfg.max_time_limit_s),
        warm_start=fb.config if fb is not None and fb.config is not None else inputs.warm_start,
        measured=inputs.measured,
        progress=watcher.progress,
        cancelled=watcher.cancel.is_set,
    )
    if inputs.start is not None and fb is not None and fb.config is not None:
        start = FallbackStart(
            plan_id=inputs.start.plan_id,
            scenario=fb.scenario,
            label=fb.label,
            matched_by="gpu_counts" if inputs.start.matched_by == "gpu_counts" else "nodes",
            config=fb.config,
            step_time_s=first.estimate.step_time_s if first is not None else None,
            time_to_answer_s=answered,
            search_time_s=result.solve_time_s,
        )
        said = (
            f"Started from plan {start.plan_id}'s fallback for losing {start.label} "
            f"(matched by {'the same nodes' if start.matched_by == 'nodes' else 'the same GPUs per pool'}): "
            f"answered in {answered:.3f} s"
            + (f" at {start.step_time_s:.3g} s per step" if start.step_time_s is not None else " (it no longer fits)")
            + f"; the warm-started search then took {result.solve_time_s:.1f} s. "
        )
        result = result.model_copy(
            update={
                "started_from_fallback": start,
                "explanation": result.explanation.model_copy(update={"summary": said + result.explanation.summary}),
            }
        )
    if inputs.fallbacks and result.plan is not None and isinstance(inputs.workload, TrainingWorkload):
        if watcher.cancel.is_set():
            return result
        try:
            return with_fallbacks(
                inputs.model, inputs.cluster, inputs.workload, result, inputs.space, inputs.time_limit_s
            )
        except DomainError:  # a rule the reduced inventory breaks that the search did not catch: no fallbacks
            log.warning("fallbacks not computed", exc_info=True)
    return result


def _fallback_answer(inputs: JobInputs) -> PlannedConfig | None:
    """The matched fallback priced on the new inventory (None: it does not fit there after all)."""
    start, w = inputs.start, inputs.workload
    if start is None or start.fallback.config is None or not isinstance(w, TrainingWorkload):
        return None
    if w.framework == "auto":  # priced on the framework the previous plan runs on
        w = w.model_copy(update={"framework": start.framework or priced_framework(w.framework)})
    return compatible(inputs.model, inputs.cluster, w, start.fallback.config)


# A solved plan is worth waiting for: its final write is retried through a short database outage before the
# error reaches the task (which retries the job, re-solving it) [issue 16].
FINAL_WRITE_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


def _complete(db: Database, job_id: int, result: PlanResult | None, error: str | None, cancelled: bool) -> str:
    """Store the outcome in one transaction (the plan and the job's final state together), retrying while the
    database is unreachable."""
    for pause in FINAL_WRITE_BACKOFF_S:
        try:
            return _write_outcome(db, job_id, result, error, cancelled)
        except OperationalError:
            log.warning("job %s: outcome not written (database unreachable); again in %.1f s", job_id, pause)
            time.sleep(pause)
    return _write_outcome(db, job_id, result, error, cancelled)


def _write_outcome(db: Database, job_id: int, result: PlanResult | None, error: str | None, cancelled: bool) -> str:
    try:
        with db.session() as s:
            jobs = JobRepository(s)
            job = jobs.find(job_id)
            if job is None:  # deleted with its cluster or its model while it ran (its watcher stopped the solver)
                return "cancelled"
            if job.status in FINISHED:  # another delivery finished it first (or it was cancelled)
                return job.status
            # Running here, or taken over meanwhile (queued again, or running on another worker after an outage
            # stopped this one's heartbeats): the first finished solve stores its plan, the other one's watcher
            # then sees the job finished and stops [issue 47 item 2].
            if cancelled or job.cancel_requested:
                jobs.finish(job, "cancelled")
                return "cancelled"
            if result is None:
                jobs.finish(job, "failed", error)
                return "failed"
            store_plan(s, job, result)
            job.best_objective, job.bound = result.objective_value, result.lower_bound
            job.elapsed_s, job.candidates_solved = result.solve_time_s, result.candidates_solved
            jobs.finish(job, "succeeded")
            return "succeeded"
    except IntegrityError:  # a racing delivery stored this job's plan (exactly one plan per job), or it was deleted
        with db.session() as s:
            gone = JobRepository(s).find(job_id)
            return "cancelled" if gone is None else gone.status


def store_plan(s: Session, job: Job, result: PlanResult) -> Plan:
    """The plan row of a finished job, linked to the previous plan of the same watch (or of the same inputs for
    a user's job) with the diff against it. A watch's re-plan is first weighed against the layout the watch runs
    (service/replan_decisions.py: kept, switched or shrunk)."""
    result = decided(s, job, result)
    plans = PlanRepository(s)
    if job.watch_id is not None:
        previous = plans.latest(PlanFilter(watch_id=job.watch_id))
    else:
        previous = plans.latest(PlanFilter(cluster_id=job.cluster_id, model_id=job.model_id))
    best = result.plan
    est = best.estimate if best else None
    row = Plan(
        job_id=job.id,
        **job_inputs(job),
        previous_plan_id=previous.id if previous else None,
        trigger=job.trigger,
        solver_status=result.status,
        objective=result.objective,
        objective_value=result.objective_value,
        step_time_s=est.step_time_s if est else None,
        gap=result.gap,
        gpus=est.gpus if est else None,
        mfu=est.mfu if est else None,
        peak_memory_gb=est.peak_memory_gb if est else None,
        summary=(
            result.explanation.summary
            if best is None or result.fleet is not None
            else describe(best.config, best.estimate.mode == "inference")
        )[:256],
        calibration_id=job.calibration_id,
        document=PlanDocument(result=result.model_dump(mode="json")),
        diff=plan_diff_document(s, previous, job, best, result.fleet) if previous else None,
    )
    plans.add(row)
    if job.watch_id is not None:
        WatchRepository(s).get(job.watch_id).last_plan_id = row.id
    return row


def plan_diff_document(
    s: Session, previous: Plan, job: Job, best: PlannedConfig | None, fleet: FleetPlan | None = None
) -> dict[str, Any]:
    """What changed since `previous`: the inputs (inventory, model version, workload) and the plan itself."""
    inputs: dict[str, Any] = {}
    if previous.cluster_revision_id != job.cluster_revision_id:
        clusters = ClusterRepository(s)
        before = clusters.revision_by_id(previous.cluster_revision_id).number
        after = clusters.revision_by_id(job.cluster_revision_id).number
        inv = inventory_between(s, job.cluster_id, previous.cluster_revision_id, job.cluster_revision_id)
        inputs["cluster_revision"] = {"before": before, "after": after, **inv.model_dump(mode="json")}
        inputs["cluster_revision"]["summary"] = inv.summary()
    if previous.model_version_id != job.model_version_id:
        models = ModelRepository(s)
        inputs["model_version"] = {
            "before": models.version_by_id(previous.model_version_id).number,
            "after": models.version_by_id(job.model_version_id).number,
        }
    if previous.workload_id != job.workload_id:
        inputs["workload"] = {"before": previous.workload_id, "after": job.workload_id}
    if previous.calibration_id != job.calibration_id:
        cals = CalibrationRepository(s)
        before_cal, after_cal = cals.find(previous.calibration_id), cals.find(job.calibration_id)
        change = cals.change(previous.calibration_id, job.calibration_id)
        inputs["calibration"] = {
            "before": before_cal.number if before_cal else None,
            "after": after_cal.number if after_cal else None,
            "largest_change": round(change, 4),
        }
    before_fleet = fleet_of(previous)
    d = diff_fleets(before_fleet, fleet) if before_fleet and fleet else diff_plans(planned(previous), best)
    return {"against": previous.id, "inputs": inputs, "plan": d.model_dump(mode="json"), "summary": d.summary()}


def cancel(session: Session, job_id: int) -> Job:
    return JobRepository(session).request_cancel(job_id)


def recover_interrupted(session: Session) -> list[int]:
    """Embedded mode at start-up: jobs left queued or running by a process that stopped, to run again."""
    jobs = JobRepository(session)
    jobs.requeue_running()
    return jobs.queued_ids()
