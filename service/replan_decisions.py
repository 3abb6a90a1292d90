"""A watch's re-plan weighs its new optimum against the layout the watch runs (optimizer/search/keep_or_switch.py)
before the plan is stored.

How a decision is stored: the plan row of the re-plan is always written and always becomes the watch's plan
(`watch.last_plan_id`), so the nightly check compares the next inventory with this one and re-plans only on the
next change. On `kept` (and `shrunk`) that row's configuration is the layout the watch runs (re-estimated on the new
inventory), not the search's optimum: whoever launches, exports or diffs from the watch sees the layout they run,
and the next re-plan weighs against it. The optimum is kept beside it as the first alternative, and the decision
(outcome, gain, interval, sentence) is in the plan's document (`PlanResult.decision`) and its sentence in
`watch.last_check`, so the history of a watch's plans records every decision.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from optimizer.search.fallbacks import with_fallbacks
from optimizer.search.keep_or_switch import NoLongerFits, applied, decide
from optimizer.search.result import PlannedConfig, PlanResult
from optimizer.spec.workload import TrainingWorkload
from service.job_requests import SearchOptions
from service.plans import planned, specs_of
from store.models import Job
from store.repositories.measurements import CalibrationRepository, calibration_spec
from store.repositories.plans import PlanRepository
from store.repositories.watches import WatchRepository


def decided(s: Session, job: Job, result: PlanResult) -> PlanResult:
    """The result to store for `job`: unchanged unless it re-plans a watch that runs a training plan and found a
    plan; then the keep-or-switch rule's result, and the decision's sentence in the watch's last_check."""
    if job.watch_id is None or result.plan is None or result.fleet is not None:
        return result
    watch = WatchRepository(s).get(job.watch_id)
    running_row = PlanRepository(s).find(watch.last_plan_id) if watch.last_plan_id is not None else None
    running: PlannedConfig | None = planned(running_row) if running_row is not None else None
    specs = specs_of(s, job)
    if running is None or running_row is None or not isinstance(specs.workload, TrainingWorkload):
        return result
    w = specs.workload
    if w.framework == "auto":  # the running layout is priced on the framework it runs on
        w = w.model_copy(update={"framework": running_row.result.get("framework") or result.framework})
    cluster = specs.cluster.with_calibration(calibration_spec(CalibrationRepository(s).find(job.calibration_id)))
    decision = decide(specs.model, cluster, w, running.config, result.plan, watch.switch_threshold_pct)
    try:
        out = applied(specs.model, cluster, w, result, decision)
    except NoLongerFits:  # cannot happen: decide priced the layout it keeps on this inventory
        return result
    watch.last_check = decision.text[:256]
    if result.fallbacks and out.plan is not None and out.plan.config != result.plan.config:
        # the fallbacks were computed for the search's optimum: the watch runs another layout, so its own
        space = SearchOptions.model_validate(job.search).space()
        out = with_fallbacks(specs.model, cluster, w, out, space, job.time_limit_s)
    return out
