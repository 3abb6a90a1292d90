"""Serving plans: tp, pp, ep (and replicas when pinned) and the stage layout, minimising time per output token
(latency) or GPU-seconds per output token (throughput), with the KV cache and weights fitting every stage.

The stage layout is a CP-SAT model like the training one: decode time and memory per stage are the cost model's
values tabulated over (pool, layers) and read with element constraints; TPOT = sum of stage times + hops, or
p x the slowest stage when at least p micro-batches keep every stage busy [costmodel G].
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from optimizer.cluster_spec import ClusterSpec, NodePool
from optimizer.costmodel import network as net
from optimizer.costmodel.inference import _stage_time, serving_memory
from optimizer.errors import DomainError
from optimizer.estimate import estimate
from optimizer.model_spec import ModelSpec
from optimizer.objectives import objective_name
from optimizer.parallel_config import ParallelConfig
from optimizer.search.explain import explain
from optimizer.search.result import (
    Alternative,
    Explanation,
    InfeasibilityReport,
    PlannedConfig,
    PlanResult,
    Progress,
    ProgressFn,
    Suggestion,
    no_plan_within_limit,
)
from optimizer.search.solver_params import TIME_UNIT_S, stage_solver
from optimizer.search.space import SearchSpace
from optimizer.stage_layers import LayerRules
from optimizer.workload import BYTES, InferenceWorkload


def _memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    pool: NodePool,
    layers: int,
    moe: int,
    first: bool,
    last: bool,
) -> tuple[float, float]:
    """(bytes needed, capacity) of one stage, exactly as estimate_inference counts them."""
    *terms, capacity = serving_memory(model, cluster, w, c, pool, layers, moe, first, last)
    return sum(terms), capacity


@dataclass(frozen=True)
class ServingLayout:
    """One serving candidate's solved layout (status as CP-SAT names it)."""

    status: str
    tpot_s: float = math.inf
    bound_s: float = 0.0
    layers: tuple[int, ...] = ()
    pools: tuple[str, ...] = ()


def check_serving_pins(model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, space: SearchSpace) -> None:
    """Pins that leave no serving configuration at all: an error naming the pin and the rule."""
    pools = serving_pools(cluster, space)
    if serving_candidates(model, cluster, w, space, pools):
        return
    if not _tp_values(model, space, pools):
        raise DomainError(
            "pin.tp",
            f"no tp allowed by the pins divides num_attention_heads={model.num_attention_heads} and "
            f"num_kv_heads={model.kv_heads} (tp up to 2 x the largest node)",
        )
    if model.moe is not None and not space.allows("ep", 1):
        raise DomainError(
            "pin.ep",
            "serving expert parallelism spreads whole experts over a stage's tp x dp GPUs (ep = tp x dp, as vLLM "
            f"and SGLang run it) and must divide num_experts={model.moe.num_experts}: no tp x dp allowed by the "
            "pins gives the pinned ep",
        )
    raise DomainError(
        "pins", f"no tp x pp x dp allowed by the pins fits in {_budget(space, pools)} healthy GPUs of the allowed pools"
    )


def serving_pools(cluster: ClusterSpec, space: SearchSpace) -> list[NodePool]:
    """The allowed pools that have a healthy GPU (a DomainError on `pools` when none has)."""
    names = space.pools or tuple(p.name for p in cluster.pools)
    pools = [cluster.pool(n) for n in names if cluster.pool(n).healthy_gpus > 0]
    if not pools:
        raise DomainError("pools", "the allowed pools have no healthy GPU")
    return pools


def _budget(space: SearchSpace, pools: list[NodePool]) -> int:
    budget = sum(p.healthy_gpus for p in pools)
    return budget if space.max_gpus is None else min(budget, space.max_gpus)


def _tp_values(model: ModelSpec, space: SearchSpace, pools: list[NodePool]) -> list[int]:
    top = max(p.gpus_per_node for p in pools) * 2
    return [
        t
        for t in range(1, top + 1)
        if model.num_attention_heads % t == 0
        and (model.mla is not None or model.kv_heads % t == 0 or t % model.kv_heads == 0)
        and space.allows("tp", t)
    ]


def _ep_values(model: ModelSpec, space: SearchSpace, tp: int, dp: int) -> list[int]:
    """No EP, or whole experts over the stage's tp x dp GPUs (validation.check_serving_experts)."""
    eps = [1]
    if model.moe is not None and tp * dp > 1 and model.moe.num_experts % (tp * dp) == 0:
        eps.append(tp * dp)
    return [e for e in eps if space.allows("ep", e)]


def serving_candidates(
    model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, space: SearchSpace, pools: list[NodePool]
) -> list[ParallelConfig]:
    budget = _budget(space, pools)
    dps = [d for d in (space.pinned_values("dp") or (1,)) if space.allows("dp", d)]
    out = []
    for tp in _tp_values(model, space, pools):
        for dp in dps:
            for ep in _ep_values(model, space, tp, dp):
                for pp in range(1, min(model.num_layers, 128) + 1):
                    if not space.allows("pp", pp):
                        continue
                    if tp * pp * dp > budget:
                        break
                    out.append(ParallelConfig(tp=tp, pp=pp, dp=dp, ep=ep, etp=1 if ep > 1 else None))
    return out


def _solve_layout(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    pools: list[NodePool],
    limit_s: float,
    upper: float | None,
) -> ServingLayout:
    """CP-SAT: layers and pool per stage minimising TPOT (seconds). INFEASIBLE is proven (nothing fits under
    `upper`); UNKNOWN means the solve stopped first."""
    p, L = c.pp, model.num_layers
    usable = [q for q in pools if q.healthy_gpus >= c.gpus_per_stage]
    if not usable:
        return ServingLayout("INFEASIBLE")
    Q = len(usable)
    mb = w.batch / p if w.batch >= p and p > 1 else float(w.batch)
    ctx_mean = w.prompt_len + w.output_len / 2
    ns = 1.0 / TIME_UNIT_S
    mdl = cp_model.CpModel()
    lay: list[cp_model.IntVar] = []
    qv: list[cp_model.IntVar] = []
    dvar: list[cp_model.IntVar] = []
    idxs: list[cp_model.IntVar] = []
    # Declared space (as for training, stage_layers.LayerRules): the leading dense layers stay on stage 0 and
    # stages hold whole MoE periods, so each stage's dense/MoE mix depends only on its layer count.
    rules = LayerRules.of(model, p, 1, True)
    k_dense = rules.first_k_dense
    prefix = model.moe_prefix
    size = Q * (L + 1)
    cache: dict[tuple[bool, bool], tuple[list[int], list[int]]] = {}
    for i in range(p):
        first, last = i == 0, i == p - 1
        role = (first, last)
        if role not in cache:
            table = [0] * size
            allowed = []
            for q, pool in enumerate(usable):
                for x in rules.counts(i):
                    start = 0 if first else k_dense
                    moe = prefix[min(L, start + x)] - prefix[start]
                    need, cap = _memory(model, cluster, w, c, pool, x, moe, first, last)
                    t, _ = _stage_time(model, cluster, w, c, pool, start, x, mb, ctx_mean, True, last)
                    j = q * (L + 1) + x
                    table[j] = round(t * ns)
                    if need <= cap:
                        allowed.append(j)
            cache[role] = (table, allowed)
        table, allowed = cache[role]
        if not allowed:
            return ServingLayout("INFEASIBLE")
        idx = mdl.new_int_var_from_domain(cp_model.Domain.from_values(allowed), f"idx{i}")
        lv = mdl.new_int_var(1, L, f"layers{i}")
        qvar = mdl.new_int_var(0, Q - 1, f"pool{i}")
        mdl.add(idx == qvar * (L + 1) + lv)
        d = mdl.new_int_var(0, max(table), f"d{i}")
        mdl.add_element(idx, table, d)
        lay.append(lv)
        qv.append(qvar)
        dvar.append(d)
        idxs.append(idx)
    mdl.add(sum(lay) == L)
    # Pool capacity: each stage takes tp x dp GPUs of its pool.
    for qi, pool in enumerate(usable):
        members = []
        for i in range(p):
            b = mdl.new_bool_var(f"on{i}_{qi}")
            mdl.add(qv[i] == qi).only_enforce_if(b)
            mdl.add(qv[i] != qi).only_enforce_if(~b)
            members.append(b)
        mdl.add(sum(members) * c.gpus_per_stage <= pool.healthy_gpus)
    hop = 0
    hv: cp_model.IntVar | None = None
    if p > 1:
        tiers = net.cluster_tiers(cluster, usable[0])
        nb = net.neighbour_tier(tiers, c.tp)
        hop = round(net.p2p(nb.bw, nb.network, mb * model.hidden_size * 2) * ns)
        if Q > 1:  # the estimator takes the hop from stage 0's pool
            hop_tab = []
            for pool in usable:
                nb = net.neighbour_tier(net.cluster_tiers(cluster, pool), c.tp)
                hop_tab.append(round(net.p2p(nb.bw, nb.network, mb * model.hidden_size * 2) * ns))
            hv = mdl.new_int_var(0, max(hop_tab), "hop")
            mdl.add_element(qv[0], hop_tab, hv)
    tpot = mdl.new_int_var(0, sum(max(cache[r][0]) for r in cache) * (p + 1) + 10**12, "tpot")
    hop_term = (p - 1) * (hv if hv is not None else hop)
    mdl.add(tpot >= sum(dvar) + hop_term)
    if p > 1 and w.batch >= p:
        dmax = mdl.new_int_var(0, max(max(cache[r][0]) for r in cache), "dmax")
        for d in dvar:
            mdl.add(d <= dmax)
        mdl.add(tpot >= p * dmax)
    if upper is not None:
        mdl.add(tpot <= int(upper * ns))
    mdl.minimize(tpot)
    solver = stage_solver(limit_s)
    status = solver.solve(mdl)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ServingLayout("INFEASIBLE" if status == cp_model.INFEASIBLE else "UNKNOWN")
    layers = tuple(int(solver.value(x)) for x in lay)
    names = tuple(usable[int(solver.value(x))].name for x in qv)
    return ServingLayout(
        name, solver.objective_value * TIME_UNIT_S, solver.best_objective_bound * TIME_UNIT_S, layers, names
    )


def plan_inference(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    space: SearchSpace,
    *,
    top_k: int,
    time_limit_s: float,
    progress: ProgressFn | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> PlanResult:
    """Best serving configuration under the cost model: candidates in order of a roofline lower bound, each
    candidate's layout by CP-SAT, stopping when the next bound cannot beat the K-th best (OPTIMAL), at the time
    limit or on cancellation (FEASIBLE with a gap, or UNKNOWN without a plan)."""
    t0 = time.perf_counter()
    pools = serving_pools(cluster, space)
    cands = serving_candidates(model, cluster, w, space, pools)
    throughput = w.objective == "throughput"
    # Lower bound: every token reads each GPU's share of the weights once [costmodel G roofline].
    heap: list[tuple[float, int, int]] = []
    for n, c in enumerate(cands):
        fits = [cluster.gpu_of(p).memory_tbps for p in pools if p.healthy_gpus >= c.gpus_per_stage]
        if not fits:
            continue
        weights = model.num_parameters * BYTES[w.precision] / (c.tp * c.ep if model.moe else c.tp)
        lb = weights / (max(fits) * 1e12) * (0.0 if model.moe else 1.0)
        factor = c.gpus / (c.dp * w.batch) if throughput else 1.0
        heapq.heappush(heap, (lb * factor, c.gpus, n))
    found: list[tuple[float, int, ParallelConfig]] = []
    stopped: str | None = None
    unproven = math.inf  # least bound of the candidate solves that stopped before their proof
    bound = math.inf
    solved = 0
    while heap:
        lb, _g, n = heap[0]
        thr = sorted(v[0] for v in found)[top_k - 1] if len(found) >= top_k else math.inf
        bound = lb
        if lb >= thr:
            break
        if cancelled is not None and cancelled():
            stopped = "cancelled"
            break
        if time.perf_counter() - t0 > time_limit_s:
            stopped = "time limit"
            break
        heapq.heappop(heap)
        c = cands[n]
        factor = c.gpus / (c.dp * w.batch) if throughput else 1.0
        res = _solve_layout(
            model,
            cluster,
            w,
            c,
            pools,
            max(0.05, time_limit_s - (time.perf_counter() - t0)),
            None if math.isinf(thr) else thr / factor,
        )
        solved += 1
        if res.status not in ("OPTIMAL", "INFEASIBLE"):
            unproven = min(unproven, max(lb, res.bound_s * factor))
        if res.layers:
            cfg = c.model_copy(update={"layers_per_stage": list(res.layers), "stage_pools": list(res.pools)})
            found.append((res.tpot_s * factor, cfg.gpus, cfg))
        if progress is not None:
            best = min((v[0] for v in found), default=None)
            progress(Progress(best, lb, time.perf_counter() - t0, solved))
    else:
        bound = math.inf
    found.sort(key=lambda v: (v[0], v[1]))
    objective = objective_name(w)
    elapsed = time.perf_counter() - t0
    counts = {"solve_time_s": elapsed, "candidates_total": len(cands), "candidates_solved": solved}
    if not found:
        if stopped is not None or math.isfinite(unproven):
            return PlanResult(
                status="UNKNOWN",
                objective=objective,
                explanation=no_plan_within_limit(stopped, time_limit_s),
                **counts,
            )
        need = model.num_parameters * BYTES[w.precision] / 1e9
        usable = sum(cluster.gpu_of(p).memory_bytes * p.healthy_gpus for p in pools) / 1e9
        report = InfeasibilityReport(
            resource="memory",
            detail=f"weights alone need {need:.0f} GB; the allowed GPUs hold {usable:.0f} GB in all, less reserves "
            f"and the KV cache of {w.batch} x {w.prompt_len + w.output_len} tokens",
            suggestions=[
                Suggestion(
                    change="more GPUs or fewer concurrent sequences",
                    detail="add nodes with more memory, lower --batch, or use fp8 weights/KV",
                )
            ],
        )
        return PlanResult(
            status="INFEASIBLE",
            objective=objective,
            explanation=Explanation(summary=f"No serving configuration fits: {report.detail}", infeasible=report),
            **counts,
        )
    best_obj, _, best_cfg = found[0]
    est = estimate(model, cluster, w, best_cfg)
    alts: list[Alternative] = []
    seen = {(best_cfg.tp, best_cfg.pp, best_cfg.ep, best_cfg.dp)}
    for obj, _, cfg in found[1:]:
        sig = (cfg.tp, cfg.pp, cfg.ep, cfg.dp)
        if sig in seen or len(alts) >= top_k - 1:
            continue
        seen.add(sig)
        alts.append(
            Alternative.versus(estimate(model, cluster, w, cfg), cfg, obj, best_cfg, best_obj, ("tp", "pp", "dp", "ep"))
        )
    planned = PlannedConfig(config=best_cfg, estimate=est)
    expl = explain(None, planned, alts, budget=sum(p.healthy_gpus for p in pools))
    lower = min(bound, unproven, best_obj)
    status = "OPTIMAL" if stopped is None and lower >= best_obj else "FEASIBLE"
    return PlanResult(
        status=status,
        objective=objective,
        objective_value=best_obj,
        lower_bound=lower,
        gap=None if status == "OPTIMAL" else (best_obj - lower) / best_obj,
        plan=planned,
        alternatives=alts,
        explanation=expl,
        **counts,
    )
