"""A configuration the user reports as having run: planned as given, without a search [issue 33 §4].

The planner refuses a configuration the cost model says does not fit. A run that ran at it is evidence against
the model's memory, not a plan to refuse: its plan holds the configuration with its estimate, the overrun the
model predicts stated (costmodel/result.py admitted), so that its measurements attach to it as to any plan and
bound the cluster's memory reserve when it is calibrated (optimizer/calibration/memory_fit.py).
"""

from __future__ import annotations

import time

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import assign_pools
from optimizer.placement.place import place
from optimizer.search.explain import describe
from optimizer.search.result import BindingConstraint, Explanation, PlannedConfig, PlanResult
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.objectives import PRICE_PER_STEP, WALL_PER_USEFUL_STEP, objective_name
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

REPORTED = "REPORTED"
"""The solver status of a reported configuration's plan: no search ran, nothing is claimed about optimality."""


def check_reported(workload: TrainingWorkload | InferenceWorkload) -> TrainingWorkload:
    """A reported run is a training run on a named framework (a DomainError naming the field otherwise)."""
    if not isinstance(workload, TrainingWorkload):
        raise DomainError(
            "search.ran", "a reported run is a training run (serving plans are measured against their planned fleet)"
        )
    if workload.framework == "auto":
        raise DomainError("workload.framework", "a run that ran ran on one framework: name it (not auto)")
    return workload


def reported_plan(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainingWorkload | InferenceWorkload, config: ParallelConfig
) -> PlanResult:
    """The plan of configuration `config`, which ran: its estimate (admitted: any memory overrun stated), status
    REPORTED. A configuration that breaks a rule of the framework or the cluster raises a DomainError naming
    `search.ran.<field>` (a workload or cluster rule keeps its own field)."""
    t0 = time.perf_counter()
    w = check_reported(workload)
    try:
        est = estimate(model, cluster, w, config, admit=True)
    except DomainError as exc:  # config.tp -> search.ran.tp; a workload or cluster field keeps its name
        field = exc.field
        if field == "config" or field.startswith("config."):
            field = "search.ran" + field.removeprefix("config")
        raise DomainError(field, exc.rule) from None
    pools = [p.name for p in assign_pools(cluster, config)]
    rate_s = cluster.price_per_s(config.gpus_per_stage, pools)
    price = None if rate_s is None else est.step_time_s * rate_s
    objective = objective_name(w)
    summary = f"Reported as run: {describe(config)}; no search."
    binding: list[BindingConstraint] = []
    if est.memory_overrun_gb is not None:
        summary += f" The model predicts {est.memory_overrun_gb:.1f} GB per GPU more than the GPU has ({est.reason})."
        worst = max(est.stages, key=lambda s: s.memory_gb.total / s.memory_gb.capacity)
        binding.append(
            BindingConstraint(
                kind="memory",
                detail=f"stage {worst.index}: {worst.memory_gb.total:.1f} of {worst.memory_gb.capacity:.1f} GB "
                "predicted (the run ran: the model's memory is pessimistic here)",
                share=worst.memory_gb.total / worst.memory_gb.capacity,
            )
        )
    try:  # stored with the plan like a searched plan's, so its page and exports never place it again
        placement = place(cluster, config).placement
    except DomainError:  # it ran where the inventory now has no room for it: the plan stands without a placement
        placement = None
    return PlanResult(
        status=REPORTED,
        framework=w.framework,
        objective=objective,
        objective_value=price
        if objective == PRICE_PER_STEP
        else est.goodput.wall_s_per_step
        if objective == WALL_PER_USEFUL_STEP and est.goodput is not None
        else est.step_time_s,
        plan=PlannedConfig(config=config, estimate=est),
        price_per_step=price,
        goodput=est.goodput,
        placement=placement,
        explanation=Explanation(summary=summary, binding=binding, time_breakdown=est.breakdown.model_dump()),
        solve_time_s=time.perf_counter() - t0,
        candidates_total=0,
        candidates_solved=0,
    )
