"""Re-plans that do not churn (issue 38 §3): keep a watch's running layout unless the new optimum is significantly
faster, and when the running layout no longer fits, prefer its smallest change (fewer data-parallel replicas).

Significant means both: the 80% interval of the true ratio t_running / t_new (costmodel.uncertainty.
difference_interval) lies wholly above 1, and the predicted gain t_running / t_new - 1 exceeds the watch's
threshold. A pure rule: the caller (service.replan_decisions) stores what it returns.
"""

from __future__ import annotations

import math

from optimizer.costmodel.uncertainty import difference_interval
from optimizer.errors import DomainError
from optimizer.placement.priced import placed_estimate
from optimizer.placement.result import Placement
from optimizer.search.replan_decision import DEFAULT_SWITCH_THRESHOLD_PCT, ReplanDecision
from optimizer.search.result import Alternative, Explanation, PlannedConfig, PlanResult
from optimizer.search.training_search import MAIN_KNOBS
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


def priced(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, config: ParallelConfig) -> PlannedConfig:
    """The configuration estimated on `cluster` as placed there (optimizer/placement); raises NoLongerFits when it
    breaks a rule there or does not fit."""
    return placed(model, cluster, w, config)[0]


def placed(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, config: ParallelConfig
) -> tuple[PlannedConfig, Placement]:
    """`priced`, with the placement its estimate prices."""
    try:
        pe = placed_estimate(model, cluster, w, config)
    except DomainError as exc:
        raise NoLongerFits(shortfall(cluster, config) or exc.rule) from exc
    if not pe.estimate.feasible:
        raise NoLongerFits(pe.estimate.reason or "it does not fit in memory")
    return PlannedConfig(config=config, estimate=pe.estimate), pe.placement


class NoLongerFits(Exception):
    """A configuration that the new inventory (or model, or workload) cannot run; the message says why."""


def shortfall(cluster: ClusterSpec, config: ParallelConfig) -> str | None:
    """'lacks 16 GPUs (2 nodes)' when the configuration's pools have fewer healthy GPUs than its stages need (a
    pool gone counts as empty), else None."""
    pools = {p.name: p for p in cluster.pools}
    need: dict[str, int] = {}
    for name in config.stage_pools or []:
        need[name] = need.get(name, 0) + config.gpus_per_stage
    if not need:
        missing, per_node = config.gpus - cluster.healthy_gpus, cluster.pools[0].gpus_per_node
    else:
        missing = sum(max(0, n - (pools[k].healthy_gpus if k in pools else 0)) for k, n in need.items())
        per_node = next((pools[k].gpus_per_node for k in need if k in pools), cluster.pools[0].gpus_per_node)
    if missing <= 0:
        return None
    nodes = math.ceil(missing / per_node)
    return f"lacks {missing} GPUs ({nodes} node{'s' if nodes != 1 else ''})"


def objective_of(cluster: ClusterSpec, w: TrainingWorkload, p: PlannedConfig) -> float:
    """The planner's objective for `p`: its step time, or with objective=cost its price per step when every pool
    it uses has a price (training_search.py: step time x ClusterSpec.price_per_s), with objective=goodput its wall time
    per useful step (costmodel/goodput.py)."""
    if w.objective == "goodput" and p.estimate.goodput is not None:
        return p.estimate.goodput.wall_s_per_step
    rate = cluster.price_per_s(p.config.gpus_per_stage, [s.pool for s in p.estimate.stages])
    return p.estimate.step_time_s * rate if w.objective == "cost" and rate is not None else p.estimate.step_time_s


def pct(x: float) -> str:
    """A fraction as a percent with two significant digits: 0.012 -> '1.2', 0.14 -> '14'."""
    return f"{100 * x:.2g}" if abs(x) < 0.995 else f"{100 * x:.0f}"


def gain_words(gain: float, interval: tuple[float, float]) -> str:
    """'gain 1.2% (interval -3..+5%)'."""
    lo, hi = (100 * x for x in interval)
    span = f"{lo:.0f}..{hi:+.0f}%" if lo < 0 else f"{lo:.0f}..{hi:.0f}%"
    return f"gain {pct(gain)}% (interval {span})"


def weigh(t_base: float, t_new: float, threshold_pct: float) -> tuple[float, tuple[float, float], bool]:
    """(gain, its 80% interval, significant) of a new objective against a base one."""
    ratio = t_base / t_new
    lo, hi = difference_interval(ratio)
    gain = ratio - 1
    return gain, (lo - 1, hi - 1), lo > 1 and 100 * gain > threshold_pct


def shrunk(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, running: ParallelConfig
) -> PlannedConfig | None:
    """The running layout with the most data-parallel replicas below its own that fits the new inventory (same
    tp, cp, ep, pp, schedule; the global batch unchanged, so the micro-batches per step grow; the micro-batch size
    drops only when the global batch does not split otherwise), on its own stage pools or, failing that, on the
    first pools with room. None when no dp fits."""
    budget = cluster.healthy_gpus
    for dp in range(running.dp - 1, 0, -1):
        if running.tp * running.cp * running.pp * dp > budget:
            continue
        for mbs in range(running.mbs, 0, -1):
            if w.global_batch_size % (dp * mbs):
                continue
            for pools in (running.stage_pools, None):
                try:
                    return priced(
                        model, cluster, w, running.model_copy(update={"dp": dp, "mbs": mbs, "stage_pools": pools})
                    )
                except NoLongerFits:
                    continue
            break  # the largest mbs that splits the batch decides this dp
    return None


def decide(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    running: ParallelConfig,
    new: PlannedConfig,
    threshold_pct: float | None = None,
) -> ReplanDecision:
    """Keep `running`, switch to the new search's best `new`, or shrink `running`'s dp (see the module docstring).
    `w` names one framework (the running plan's when the watch's is auto); `threshold_pct` None: the default."""
    threshold = DEFAULT_SWITCH_THRESHOLD_PCT if threshold_pct is None else threshold_pct
    t_new = objective_of(cluster, w, new)
    common = {"threshold_pct": threshold, "new_step_time_s": new.estimate.step_time_s}
    try:
        now = priced(model, cluster, w, running)
    except NoLongerFits as exc:
        why = str(exc)
        small = shrunk(model, cluster, w, running)
        if small is None:
            text = f"switched: the running layout {why} and no smaller dp fits"
            return ReplanDecision(outcome="switched", text=text, config=new.config, no_longer_fits=why, **common)
        gain, interval, significant = weigh(objective_of(cluster, w, small), t_new, threshold)
        step = f"dp {running.dp} -> {small.config.dp}"
        out = {"gain": gain, "gain_interval": interval, "no_longer_fits": why, **common}
        if significant:
            text = (
                f"switched: the running layout {why}; the reshaped optimum's {gain_words(gain, interval)} over {step}"
            )
            return ReplanDecision(outcome="switched", text=text, config=new.config, **out)
        text = (
            f"shrunk: {step} (the running layout {why}); the reshaped optimum's {gain_words(gain, interval)} "
            f"is not {'significant' if interval[0] <= 0 else f'above the {threshold:g}% threshold'}"
        )
        return ReplanDecision(outcome="shrunk", text=text, config=small.config, **out)
    gain, interval, significant = weigh(objective_of(cluster, w, now), t_new, threshold)
    out = {"gain": gain, "gain_interval": interval, "running_step_time_s": now.estimate.step_time_s, **common}
    if significant:
        return ReplanDecision(
            outcome="switched", text=f"switched: {gain_words(gain, interval)}", config=new.config, **out
        )
    below = f", below the {threshold:g}% threshold" if interval[0] > 0 else ""
    return ReplanDecision(outcome="kept", text=f"kept: {gain_words(gain, interval)}{below}", config=running, **out)


def applied(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, result: PlanResult, decision: ReplanDecision
) -> PlanResult:
    """The plan result a watch stores for `decision`: on switched, the search's result with the decision; on kept
    or shrunk, the layout it runs (re-estimated on the new inventory) as the plan, the search's optimum as its
    first alternative, the decision's sentence leading the explanation."""
    if result.plan is None or decision.config == result.plan.config:
        return result.model_copy(update={"decision": decision})
    best = result.plan
    plan, placement = placed(model, cluster, w, decision.config)
    obj, best_obj = objective_of(cluster, w, plan), objective_of(cluster, w, best)
    optimum = Alternative.versus(best.estimate, best.config, best_obj, plan.config, obj, MAIN_KNOBS)
    rate = cluster.price_per_s(plan.config.gpus_per_stage, [s.pool for s in plan.estimate.stages])
    lower = result.lower_bound
    return result.model_copy(
        update={
            "status": "FEASIBLE" if result.status == "OPTIMAL" else result.status,
            "objective_value": obj,
            "gap": None if lower is None else max(0.0, (obj - lower) / obj),
            "plan": plan,
            "framework": w.framework,
            "price_per_step": None if rate is None else plan.estimate.step_time_s * rate,
            "alternatives": [optimum],
            "explanation": Explanation(summary=f"{decision.text}. The search's optimum: {result.explanation.summary}"),
            "decision": decision,
            "placement": placement,
        }
    )
