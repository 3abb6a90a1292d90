"""Why this plan: binding constraints, where the time goes, what makes the runner-up slower; and, when nothing
fits, which resource runs out and the smallest change that would make a plan exist."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from optimizer.cluster_spec import ClusterSpec
from optimizer.errors import DomainError
from optimizer.search.result import (
    Alternative,
    BindingConstraint,
    Explanation,
    InfeasibilityReport,
    PlannedConfig,
    Suggestion,
)

if TYPE_CHECKING:
    from optimizer.search.candidates import TrainingSpace

BINDING_SHARE = 0.85


def describe(c: object) -> str:
    """Short text of a configuration's main knobs."""
    g = c.__getattribute__
    parts = [f"tp={g('tp')}", f"pp={g('pp')}", f"dp={g('dp')}"]
    for k in ("cp", "ep", "vp"):
        if g(k) > 1:
            parts.append(f"{k}={g(k)}")
    parts += [f"mbs={g('mbs')}", f"{g('schedule')}", f"zero={g('zero_stage')}", f"recompute={g('recompute')}"]
    if g("sequence_parallel"):
        parts.append("sp")
    if g("tp_comm_overlap"):
        parts.append("tp-overlap")
    return " ".join(parts)


def explain(
    ts: TrainingSpace | None, planned: PlannedConfig, alts: list[Alternative], budget: int | None = None
) -> Explanation:
    est, cfg = planned.estimate, planned.config
    binding = []
    for s in sorted(est.stages, key=lambda s: -s.memory_gb.total / s.memory_gb.capacity)[:3]:
        share = s.memory_gb.total / s.memory_gb.capacity
        binding.append(
            BindingConstraint(
                kind="memory",
                share=share,
                detail=f"stage {s.index} ({s.layers} layers on {s.gpu}, pool {s.pool}) uses {s.memory_gb.total:.1f} of "
                f"{s.memory_gb.capacity:.1f} GB ({share:.0%})" + (" - binding" if share >= BINDING_SHARE else ""),
            )
        )
    budget = budget if budget is not None else (ts.budget if ts is not None else None)
    if budget:
        binding.append(
            BindingConstraint(
                kind="gpus", share=cfg.gpus / budget, detail=f"uses {cfg.gpus} of {budget} available GPUs"
            )
        )
    breakdown = {k: v for k, v in est.breakdown.model_dump().items() if v > 0}
    top = sorted(breakdown.items(), key=lambda kv: -kv[1])[:3]
    if est.mode == "training":
        head = f"{describe(cfg)}: step {est.step_time_s:.3f} s, {est.tokens_per_s:,.0f} tokens/s, MFU {est.mfu:.1%}"
    else:
        head = f"{describe(cfg)}: TPOT {1000 * (est.tpot_s or 0):.2f} ms, TTFT {1000 * (est.ttft_s or 0):.1f} ms"
    summary = head + "; time goes to " + ", ".join(f"{k} {v / est.step_time_s:.0%}" for k, v in top)
    versus = None
    if alts:
        r = alts[0]
        rb = r.estimate.breakdown.model_dump()
        diffs = sorted(((k, rb.get(k, 0.0) - breakdown.get(k, 0.0)) for k in rb), key=lambda kv: -kv[1])
        worse = [f"{k} +{d:.3g} s" for k, d in diffs if d > 0][:3]
        versus = (
            f"runner-up {describe(r.config)} is {r.delta_pct:.1f}% slower (differs in "
            f"{', '.join(r.differs_in) or 'stage layout'}): " + (", ".join(worse) or "same terms, larger total")
        )
    return Explanation(summary=summary, binding=binding, time_breakdown=breakdown, versus_runner_up=versus)


def diagnose_infeasible(ts: TrainingSpace, thorough: bool = True) -> InfeasibilityReport:
    """Name the resource that runs out and search for the smallest change that makes a plan exist. When the rules
    and pins leave no configuration at all (before any memory check), the resource is the search space: no amount
    of memory changes that."""
    from optimizer.search.planner import has_plan
    from optimizer.search.space import SearchSpace

    model, cluster, w, space = ts.model, ts.cluster, ts.w, ts.space
    usable = max(ts.usable.values(), default=0.0) / 1e9
    states_gb = model.num_parameters * 16 / max(1, ts.budget) / 1e9  # ZeRO-3 accounting over every GPU [Z20]
    if states_gb > usable:
        resource = "memory"
        detail = (
            f"{model.name} has {model.num_parameters / 1e9:.1f}B parameters: even fully sharded over all "
            f"{ts.budget} GPUs its weights, gradients and Adam states need {states_gb:.1f} GB per GPU; "
            f"{usable:.1f} GB are usable"
        )
    elif next(ts.all_candidates(prune_memory=False), None) is None:
        resource = "search space"
        pins = ", ".join(f"{k}={','.join(str(v) for v in (p.values or ()))}" for k, p in space.pins.items() if p.values)
        detail = (
            f"no configuration satisfies the divisibility rules (global_batch_size={w.global_batch_size} = dp x mbs "
            f"x micro-batches, layers over stages, heads over tp) within {ts.budget} GPUs"
            + (f" and the pins {pins}" if pins else "")
        )
    else:
        resource = "memory"
        detail = (
            f"no configuration in the search space fits in {usable:.1f} GB usable per GPU "
            f"(weights + gradients + optimizer + activations of the micro-batches in flight)"
        )
    suggestions: list[Suggestion] = []
    if not thorough:
        return InfeasibilityReport(resource=resource, detail=detail, suggestions=suggestions)

    def feasible(m: object, c: ClusterSpec, wl: object, sp: SearchSpace) -> bool:
        try:
            return has_plan(m, c, wl, sp, time_limit_s=3.0)  # type: ignore[arg-type]
        except (DomainError, ValidationError):  # a relaxation that breaks a rule is simply not a suggestion
            return False

    relaxed = {k: v for k, v in space.pins.items() if k not in ("recompute", "zero")}
    if len(relaxed) != len(space.pins):
        sp2 = space.model_copy(update={"pins": relaxed})
        if feasible(model, cluster, w, sp2):
            suggestions.append(
                Suggestion(change="allow full recompute and ZeRO-3", detail="drop the recompute/zero pins")
            )
    if space.max_gpus is not None and space.max_gpus < cluster.healthy_gpus:
        sp2 = space.model_copy(update={"max_gpus": None})
        if feasible(model, cluster, w, sp2):
            suggestions.append(
                Suggestion(
                    change="raise the GPU budget",
                    detail=f"use up to {cluster.healthy_gpus} GPUs instead of {space.max_gpus}",
                )
            )
    for pool in ts.pools:
        for factor in (2, 4, 8, 16):
            nodes = pool.healthy_nodes * factor
            data = cluster.model_dump()
            for p in data["pools"]:
                if p["name"] == pool.name:
                    p["nodes"] = nodes
                    p["node_states"] = {}
            bigger = ClusterSpec.model_validate(data)
            if feasible(model, bigger, w, space.model_copy(update={"max_gpus": None})):
                gpu = cluster.gpu_of(pool)
                suggestions.append(
                    Suggestion(
                        change=f"more GPUs: {nodes - pool.healthy_nodes} more healthy nodes in pool {pool.name}",
                        detail=f"{nodes} x {pool.gpus_per_node} {gpu.name} ({gpu.memory_gib:g} GiB each) fit a plan",
                    )
                )
                break
    # A smaller batch only shrinks activations: when one sequence does not fit, no halving will (one probe).
    if (
        w.mode == "training"
        and w.global_batch_size > 1
        and feasible(model, cluster, w.model_copy(update={"global_batch_size": 1}), space)
    ):
        gbs = w.global_batch_size
        while gbs > 1:
            gbs //= 2
            if feasible(model, cluster, w.model_copy(update={"global_batch_size": gbs}), space):
                suggestions.append(
                    Suggestion(
                        change=f"smaller global batch: {gbs} sequences", detail=f"instead of {w.global_batch_size}"
                    )
                )
                break
    return InfeasibilityReport(resource=resource, detail=detail, suggestions=suggestions)
