"""Serving plans: tp, pp, ep (and replicas when pinned) and the stage layout, minimising time per output token
(latency) or GPU-seconds per output token (throughput), with the KV cache and weights fitting every stage.

Candidates are taken in order of a roofline lower bound; each candidate's stage layout is the CP-SAT model of
serving_model.py; the search stops when the next bound cannot beat the K-th best.
"""

from __future__ import annotations

import heapq
import math
import time

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import SERVING_EP_DISPATCH_RULE, check_serving_experts
from optimizer.search.explain import explain
from optimizer.search.request import SearchRequest
from optimizer.search.result import (
    Alternative,
    Explanation,
    InfeasibilityReport,
    PlannedConfig,
    PlanResult,
    Progress,
    Suggestion,
    no_plan_within_limit,
    proven_bound,
    relative_gap,
)
from optimizer.search.serving_model import ServingModel
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.objectives import objective_name
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


def check_serving_pins(model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, space: SearchSpace) -> None:
    """Pins that leave no serving configuration at all: an error naming the pin and the rule."""
    if not space.allows("ep_dispatch", "alltoall"):
        raise DomainError("pin.ep_dispatch", SERVING_EP_DISPATCH_RULE)
    pools = serving_pools(cluster, space)
    if serving_candidates(model, cluster, w, space, pools):
        return
    if not _tp_values(model, space, pools):
        raise DomainError(
            "pin.tp",
            f"no tp allowed by the pins divides num_attention_heads={model.num_attention_heads} and "
            f"num_kv_heads={model.kv_heads} (tp up to 2 x the largest node)",
        )
    if model.moe is None and not space.allows("ep", 1):
        raise DomainError("pin.ep", f"expert parallelism needs a mixture-of-experts model ({model.name} is dense)")
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
    out.extend(_attention_dp_candidates(model, w, space, pools, budget))
    return [c for c in out if _engine_runs(model, w, c)]


def _engine_runs(model: ModelSpec, w: InferenceWorkload, c: ParallelConfig) -> bool:
    """The engine's expert layout rules (validation.check_serving_experts), e.g. TensorRT-LLM's attention TP 1."""
    try:
        check_serving_experts(model, w.engine, c)
    except DomainError:
        return False
    return True


def _attention_dp_candidates(
    model: ModelSpec, w: InferenceWorkload, space: SearchSpace, pools: list[NodePool], budget: int
) -> list[ParallelConfig]:
    """MoE layouts the engines recommend on one node: attention data parallelism over dp ranks sharing the routed
    experts, whole (EP = tp x dp) or tensor-sharded (etp = tp x dp), every engine (validation.check_serving_experts;
    TensorRT-LLM with attention TP 1). Only when dp is not pinned (a pinned dp is searched as given above)."""
    if model.moe is None or space.pinned_values("dp"):
        return []
    node = max(p.gpus_per_node for p in pools)
    out = []
    for tp in _tp_values(model, space, pools):
        if w.engine == "trtllm" and tp > 1:
            continue
        dp = 2
        while tp * dp <= min(node, budget):
            grid = tp * dp
            layouts = [(1, grid)]
            if model.moe.num_experts % grid == 0:
                layouts.insert(0, (grid, 1))
            for ep, etp in layouts:
                if space.allows("dp", dp) and space.allows("ep", ep) and space.allows("pp", 1):
                    out.append(ParallelConfig(tp=tp, pp=1, dp=dp, ep=ep, etp=etp))
            dp *= 2
    return out


def plan_inference(req: SearchRequest[InferenceWorkload]) -> PlanResult:
    """Best serving configuration under the cost model: candidates in order of a roofline lower bound, each
    candidate's layout by CP-SAT, stopping when the next bound cannot beat the K-th best (OPTIMAL), at the time
    limit or on cancellation (FEASIBLE with a gap, or UNKNOWN without a plan)."""
    model, cluster, w, space = req.model, req.cluster, req.workload, req.space
    top_k, time_limit_s, progress, cancelled = req.top_k, req.time_limit_s, req.progress, req.cancelled
    t0 = time.perf_counter()
    pools = serving_pools(cluster, space)
    cands = serving_candidates(model, cluster, w, space, pools)
    throughput = w.objective == "throughput"
    heap = _bound_heap(model, cluster, w, cands, pools)
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
        res = ServingModel(model, cluster, w, c, pools).solve(
            max(0.05, time_limit_s - (time.perf_counter() - t0)), None if math.isinf(thr) else thr / factor
        )
        solved += 1
        if res.status not in ("OPTIMAL", "INFEASIBLE"):
            unproven = min(unproven, max(lb, res.bound_s * factor))
        if res.layers:
            cfg = c.model_copy(update={"layers_per_stage": list(res.layers), "stage_pools": list(res.pools)})
            found.append((res.tpot_s * factor, cfg.gpus, cfg))
        if progress is not None:
            best = min((v[0] for v in found), default=None)
            progress(Progress(best, proven_bound(lb, best, unproven), time.perf_counter() - t0, solved))
    else:
        bound = math.inf
    found.sort(key=lambda v: (v[0], v[1]))
    objective = objective_name(w)
    elapsed = time.perf_counter() - t0
    counts = {"solve_time_s": elapsed, "candidates_total": len(cands), "candidates_solved": solved}
    if not found:
        return _no_plan(model, cluster, w, pools, stopped, unproven, time_limit_s, counts)
    best_obj, _, best_cfg = found[0]
    est = estimate(model, cluster, w, best_cfg)
    alts = _alternatives(model, cluster, w, found, top_k)
    planned = PlannedConfig(config=best_cfg, estimate=est)
    expl = explain(None, planned, alts, budget=sum(p.healthy_gpus for p in pools))
    lower = min(bound, unproven, best_obj)
    status = "OPTIMAL" if stopped is None and lower >= best_obj else "FEASIBLE"
    return PlanResult(
        status=status,
        objective=objective,
        objective_value=best_obj,
        lower_bound=lower,
        gap=relative_gap(best_obj, lower),
        plan=planned,
        alternatives=alts,
        explanation=expl,
        **counts,
    )


def _bound_heap(
    model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, cands: list[ParallelConfig], pools: list[NodePool]
) -> list[tuple[float, int, int]]:
    """The candidates that fit a pool, as a heap of (lower bound, GPUs, index). Lower bound: every token reads each
    GPU's share of the weights once [formulas G roofline]; per GPU and sequence under the throughput objective."""
    throughput = w.objective == "throughput"
    heap: list[tuple[float, int, int]] = []
    for n, c in enumerate(cands):
        fits = [cluster.gpu_of(p).memory_tbps for p in pools if p.healthy_gpus >= c.gpus_per_stage]
        if not fits:
            continue
        weights = model.num_parameters * w.weight_bytes / (c.tp * c.ep if model.moe else c.tp)
        lb = weights / (max(fits) * 1e12) * (0.0 if model.moe else 1.0)
        factor = c.gpus / (c.dp * w.batch) if throughput else 1.0
        heapq.heappush(heap, (lb * factor, c.gpus, n))
    return heap


def _no_plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    pools: list[NodePool],
    stopped: str | None,
    unproven: float,
    time_limit_s: float,
    counts: dict[str, float],
) -> PlanResult:
    """The result without a plan: UNKNOWN where the search stopped or a solve ended before its proof, else
    INFEASIBLE with what the weights need against what the allowed GPUs hold."""
    objective = objective_name(w)
    if stopped is not None or math.isfinite(unproven):
        return PlanResult(
            status="UNKNOWN",
            objective=objective,
            explanation=no_plan_within_limit(stopped, time_limit_s),
            **counts,
        )
    need = model.num_parameters * w.weight_bytes / 1e9
    usable = sum(cluster.gpu_of(p).memory_bytes * p.healthy_gpus for p in pools) / 1e9
    report = InfeasibilityReport(
        resource="memory",
        detail=f"weights alone need {need:.0f} GB; the allowed GPUs hold {usable:.0f} GB in all, less reserves "
        f"and the KV cache of {w.batch} x {w.prompt_len + w.output_len} tokens",
        suggestions=memory_suggestions(w, [cluster.gpu_of(p) for p in pools]),
    )
    return PlanResult(
        status="INFEASIBLE",
        objective=objective,
        explanation=Explanation(summary=f"No serving configuration fits: {report.detail}", infeasible=report),
        **counts,
    )


def _alternatives(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    found: list[tuple[float, int, ParallelConfig]],
    top_k: int,
) -> list[Alternative]:
    """Up to top_k - 1 runners-up of distinct (tp, pp, ep, dp), each against the best (found[0])."""
    best_obj, _, best_cfg = found[0]
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
    return alts


def memory_suggestions(w: InferenceWorkload, gpus: list[GPUSpec]) -> list[Suggestion]:
    """What may make a serving model fit, only the changes that apply: more GPUs always; a lower batch only above 1;
    fp8 weights and KV only where every allowed GPU runs FP8 GEMMs (Hopper and later: `fp8_tflops` in the catalog;
    A100 has none), int4 weight-only (AWQ / GPTQ Marlin kernels, which run on Ampere and later) unless the weights
    are int4 already; each with the bytes it saves per parameter."""
    out = [Suggestion(change="more GPUs", detail="add nodes (or GPUs with more memory) to the allowed pools")]
    if w.batch > 1:
        out.append(Suggestion(change="fewer concurrent sequences", detail=f"lower --batch below {w.batch}"))
    bytes_now = w.weight_bytes
    if bytes_now > 1 and all(g.fp8_tflops for g in gpus):
        out.append(
            Suggestion(
                change="fp8 weights and KV cache",
                detail=f"--precision fp8 --kv-cache-dtype fp8: weights {bytes_now:g} -> 1 byte per parameter",
            )
        )
    if bytes_now > 0.5:
        out.append(
            Suggestion(
                change="int4 weights",
                detail=f"--weight-dtype int4 (AWQ / GPTQ weight-only): weights {bytes_now:g} -> 0.5 byte per parameter",
            )
        )
    return out
