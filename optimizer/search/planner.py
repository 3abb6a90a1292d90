"""Branch and bound over global-knob candidates, CP-SAT for each candidate's stage layout.

Candidates are explored in order of their lower bound; the search stops when the next bound cannot beat the K-th
best plan found (then the best is proven optimal under the cost model: every unexplored candidate's bound is at
least its objective), or at the time limit (FEASIBLE, with the gap to the smallest open bound).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from optimizer.errors import DomainError
from optimizer.frameworks.capabilities import framework
from optimizer.frameworks.validation import SERVING_EP_DISPATCH_RULE, check_serving_experts, precision_rule
from optimizer.search.candidates import TrainingSpace
from optimizer.search.explain import describe, goodput_change
from optimizer.search.goodput_choice import gain_holds, paired_gain_band
from optimizer.search.inference_planner import check_serving_pins, plan_inference
from optimizer.search.pin_checks import check_pin_rules, check_pins, heads_rule, pin_text
from optimizer.search.request import SearchRequest
from optimizer.search.result import (
    FrameworkOutcome,
    PlannedConfig,
    PlanResult,
    ProgressFn,
)
from optimizer.search.sla_planner import plan_sla
from optimizer.search.space import SearchSpace
from optimizer.search.training_search import TrainingSearch
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import AUTO_PRICED_AS, FRAMEWORKS, priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Callers import the training search and the pin checks from here (their homes: training_search.py, pin_checks.py).
__all__ = ["TrainingSearch", "TrainingSpace", "check_pin_rules", "check_pins", "check_request", "has_plan", "plan"]

MIN_TIME_LIMIT_S = 0.1


def plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    space: SearchSpace | None = None,
    *,
    top_k: int = 3,
    time_limit_s: float = 60.0,
    max_time_limit_s: float = 3600.0,
    warm_start: ParallelConfig | None = None,
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
    diagnose: bool = True,
    measured: Sequence[ParallelConfig] = (),
    interval_rule: bool = True,
) -> PlanResult:
    """The best configuration under the cost model, with runners-up and an explanation. With `diagnose`, an
    infeasible result names the resource that runs out and searches for the smallest change that helps. Among
    training plans the intervals cannot order, the rule of optimizer/search/decision.py picks (`measured`: the
    cluster's measured configurations, nearest first; `interval_rule` False: the point estimate decides alone)."""
    space = space or SearchSpace()
    # The spec checks here; the pins against the search space where the space is built, once per framework
    # (TrainingSearch checks them first; serving checks its pins without a space).
    check_request(model, cluster, workload, space, time_limit_s=time_limit_s, max_time_limit_s=max_time_limit_s)
    if isinstance(workload, InferenceWorkload):
        check_serving_pins(model, cluster, workload, space)
    if top_k < 1 or top_k > 20:
        raise DomainError("top", f"must be between 1 and 20 (got {top_k})")
    if isinstance(workload, InferenceWorkload):
        serving = SearchRequest(
            model, cluster, workload, space, time_limit_s, top_k=top_k, progress=progress, cancelled=cancelled
        )
        return plan_sla(serving) if workload.sla_plan else plan_inference(serving)
    req = SearchRequest(
        model,
        cluster,
        workload,
        space,
        time_limit_s,
        top_k,
        warm_start,
        progress,
        cancelled,
        tuple(measured),
        interval_rule,
    )
    if workload.framework == "auto":
        return _plan_each_framework(req, diagnose)
    return _plan_training(req, diagnose)


def _plan_each_framework(req: SearchRequest[TrainingWorkload], diagnose: bool) -> PlanResult:
    """framework=auto: plan for every framework whose knobs admit the pins (a share of the time limit each), keep
    the best and say by how much it wins."""
    results: list[tuple[str, PlanResult]] = []
    w = req.workload
    candidates = {f: _space_if_pins_allowed(req.model, req.cluster, w, req.space, f) for f in FRAMEWORKS}
    spaces = {f: ts for f, ts in candidates.items() if ts is not None}
    if not spaces:  # no framework admits the pins: the reason, as the default framework's space gives it
        check_pins(TrainingSpace(req.model, req.cluster, w, req.space))
    names = list(spaces)
    share = max(MIN_TIME_LIMIT_S, req.time_limit_s / max(1, len(names)))
    for name, ts in spaces.items():
        results.append((name, _plan_training(req.with_changes(workload=ts.w, time_limit_s=share), False, ts=ts)))
    found = [(n, r) for n, r in results if r.objective_value is not None]
    if not found:  # diagnose once, on the default framework's space
        wf = w.model_copy(update={"framework": names[0] if names else AUTO_PRICED_AS})
        return _plan_training(req.with_changes(workload=wf, time_limit_s=share, progress=None), diagnose)
    found.sort(key=lambda nr: float(nr[1].objective_value or math.inf))
    best_name, best = found[0]
    top = float(best.objective_value or 0.0)
    outcomes = [
        FrameworkOutcome(
            framework=n,
            status=r.status,
            objective_value=r.objective_value,
            versus_best_pct=None if r.objective_value is None else 100 * (r.objective_value / top - 1),
        )
        for n, r in sorted(results, key=lambda nr: float(nr[1].objective_value or math.inf))
    ]
    others = "; ".join(
        f"{o.framework} {o.versus_best_pct:+.1f}%" if o.versus_best_pct is not None else f"{o.framework}: no plan"
        for o in outcomes[1:]
    )
    summary = f"{best.explanation.summary} Framework {best_name} wins" + (f" ({others})." if others else ".")
    return best.model_copy(
        update={
            "framework_comparison": outcomes,
            "explanation": best.explanation.model_copy(update={"summary": summary}),
            "solve_time_s": sum(r.solve_time_s for _, r in results),
        }
    )


def _space_if_pins_allowed(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace, fw: str
) -> TrainingSpace | None:
    """Framework `fw`'s search space, or None when its knobs do not admit the pins."""
    ts = TrainingSpace(model, cluster, w.model_copy(update={"framework": fw}), space)
    try:
        check_pins(ts)
    except DomainError:
        return None
    return ts


def check_request(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    space: SearchSpace,
    *,
    time_limit_s: float,
    max_time_limit_s: float,
) -> None:
    """The checks decided from the specs alone, without building a search space (a job submission runs them, and
    `plan` first; the pins against the search space are checked where the search builds it): the time limit, a
    healthy GPU, known pools, the precision, the framework's rules for the model, the workload and each pin, tp
    against the heads, prices for a cost objective."""
    if not MIN_TIME_LIMIT_S <= time_limit_s <= max_time_limit_s:
        raise DomainError(
            "time_limit", f"must be between {MIN_TIME_LIMIT_S} and {max_time_limit_s} seconds (got {time_limit_s})"
        )
    if cluster.healthy_gpus == 0:
        raise DomainError("cluster", f"cluster {cluster.name} has no healthy GPU")
    for name in space.pools or ():
        cluster.pool(name)
    if space.pools and not any(cluster.pool(n).healthy_gpus for n in space.pools):
        raise DomainError("pools", f"the allowed pools ({', '.join(space.pools)}) have no healthy GPU")
    allowed = [p for p in cluster.pools if p.healthy_gpus and (not space.pools or p.name in space.pools)]
    rules = [precision_rule(cluster.gpu_of(p), workload.precision) for p in allowed]
    if allowed and all(rules):
        raise DomainError("workload.precision", f"{rules[0]} (pool {allowed[0].name})")
    if isinstance(workload, InferenceWorkload):
        if not space.allows("ep_dispatch", "alltoall"):
            raise DomainError("pin.ep_dispatch", SERVING_EP_DISPATCH_RULE)
        _check_pinned_expert_layout(model, workload, space)
    else:
        if workload.framework != "auto" or not any(_rules_allowed(model, workload, space, f) for f in FRAMEWORKS):
            check_pin_rules(framework(priced_framework(workload.framework)), model, workload, space)
        names = space.pools or tuple(p.name for p in cluster.pools)  # in TrainingSpace.pools' order
        unpriced = [n for n in names if cluster.pool(n).healthy_gpus and cluster.pool(n).price_per_gpu_hour is None]
        if workload.objective == "cost" and unpriced:
            raise DomainError(
                "workload.objective",
                f"cost needs price_per_gpu_hour on every allowed pool; missing on {', '.join(unpriced)}",
            )
    tps = space.pinned_values("tp")
    if tps and not any(model.num_attention_heads % int(t) == 0 for t in tps):
        raise DomainError("pin.tp", f"{pin_text('tp', space.pins['tp'])} contradicts {heads_rule(model)}")


def _check_pinned_expert_layout(model: ModelSpec, w: InferenceWorkload, space: SearchSpace) -> None:
    """A serving layout the pins fix whole (one tp, dp and ep) is held to the engine's expert rules at submission
    (validation.check_serving_experts), the error naming the pin."""
    fixed = {k: space.pinned_values(k) for k in ("tp", "dp", "ep", "etp")}
    if any(fixed[k] is None or len(fixed[k] or ()) != 1 for k in ("tp", "dp", "ep")):
        return
    tp, dp, ep = (int((fixed[k] or (1,))[0]) for k in ("tp", "dp", "ep"))
    etps = fixed["etp"]
    etp = int(etps[0]) if etps and len(etps) == 1 else (1 if ep > 1 else None)
    try:
        check_serving_experts(model, w.engine, ParallelConfig(tp=tp, dp=dp, ep=ep, etp=etp))
    except DomainError as e:
        raise DomainError(e.field.replace("config.", "pin."), e.rule) from None


def _rules_allowed(model: ModelSpec, w: TrainingWorkload, space: SearchSpace, fw: str) -> bool:
    try:
        check_pin_rules(framework(fw), model, w, space)
    except DomainError:
        return False
    return True


def _plan_training(
    req: SearchRequest[TrainingWorkload],
    diagnose: bool = True,
    first_feasible: bool = False,
    ts: TrainingSpace | None = None,
) -> PlanResult:
    """The training search of one framework; `ts` is its search space when the caller has already built it."""
    if req.workload.objective == "goodput" and not first_feasible:
        return _plan_goodput(req, diagnose, ts)
    ts = ts or TrainingSpace(req.model, req.cluster, req.workload, req.space)
    search = TrainingSearch(
        ts, req.top_k, req.time_limit_s, req.progress, req.cancelled, first_feasible, req.measured, req.interval_rule
    )
    return search.run(req.warm_start, _probe if diagnose else None)


def _plan_goodput(req: SearchRequest[TrainingWorkload], diagnose: bool, ts: TrainingSpace | None) -> PlanResult:
    """Objective goodput: the step-time optimum first (a third of the time limit), then the goodput search
    warm-started with it; the explanation says what the failure model changed against it."""
    t0 = time.perf_counter()
    fast_w = req.workload.model_copy(update={"objective": "step_time"})
    share = max(MIN_TIME_LIMIT_S, req.time_limit_s / 3)
    fast_ts = TrainingSpace(req.model, req.cluster, fast_w, req.space)
    fast = TrainingSearch(fast_ts, 1, share, None, req.cancelled, False, req.measured, False).run(req.warm_start, None)
    ts = ts or TrainingSpace(req.model, req.cluster, req.workload, req.space)
    rest = max(MIN_TIME_LIMIT_S, req.time_limit_s - (time.perf_counter() - t0))
    warm = req.warm_start or (fast.plan.config if fast.plan is not None else None)
    search = TrainingSearch(ts, req.top_k, rest, req.progress, req.cancelled, False, req.measured, req.interval_rule)
    result = search.run(warm, _probe if diagnose else None)
    if result.plan is None or fast.plan is None:
        return result
    if result.plan.config != fast.plan.config and fast.plan.estimate.goodput is not None:
        band = paired_gain_band(req.model, req.cluster, req.workload, fast.plan, result.plan, result.framework)
        if not gain_holds(band):
            return _keep_step_time_plan(result, fast.plan, band, t0)
    change = goodput_change(fast.plan, result.plan, ts.budget)
    summary = result.explanation.summary.rstrip(". ") + ". " + change
    return result.model_copy(
        update={
            "explanation": result.explanation.model_copy(update={"summary": summary}),
            "solve_time_s": time.perf_counter() - t0,
        }
    )


def _keep_step_time_plan(result: PlanResult, fast: PlannedConfig, band: tuple[float, float], t0: float) -> PlanResult:
    """The goodput search's pick gains less than its band: the step-time optimum stays (FEASIBLE, the pick's
    objective and bound as the gap), and the explanation says by how much the pick would have gained."""
    assert result.plan is not None and fast.estimate.goodput is not None
    value = fast.estimate.goodput.wall_s_per_step
    best = result.objective_value if result.objective_value is not None else value
    note = (
        f"Kept the step-time optimum ({describe(fast.config)}): the goodput search's pick "
        f"({describe(result.plan.config)}) "
        f"would gain {100 * (band[0] - 1):+.1f}% to {100 * (band[1] - 1):+.1f}% useful tokens/s over the failure "
        "inputs' ranges (80%), a gain inside its band."
    )
    return result.model_copy(
        update={
            "status": "FEASIBLE",
            "plan": fast,
            "goodput": fast.estimate.goodput,
            "objective_value": value,
            "gap": max(0.0, (value - best) / value) if value > 0 else None,
            "explanation": result.explanation.model_copy(update={"summary": note}),
            "solve_time_s": time.perf_counter() - t0,
        }
    )


def has_plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    space: SearchSpace,
    time_limit_s: float,
) -> bool:
    """Whether any training plan fits (the search stops at the first one): the infeasibility diagnosis probes
    relaxations with it."""
    r = _plan_training(SearchRequest(model, cluster, w, space, time_limit_s, top_k=1), False, first_feasible=True)
    return r.objective_value is not None


def _probe(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace) -> bool:
    """The diagnosis's feasibility probe: the search stops at the first plan (3 s each)."""
    return has_plan(model, cluster, w, space, time_limit_s=3.0)
