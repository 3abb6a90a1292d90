"""When nothing fits: which resource runs out, and the smallest change (recompute and ZeRO pins, GPU budget, more
nodes, bf16 gradients, a smaller batch) that makes a plan exist, each found by a feasibility probe the caller
supplies."""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import ValidationError

from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.result import InfeasibilityReport, Suggestion
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER, ClusterSpec
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import TrainingWorkload

Probe = Callable[[ModelSpec, ClusterSpec, TrainingWorkload, SearchSpace], bool]
"""Whether any training plan exists for these inputs."""


def diagnose_infeasible(ts: TrainingSpace, probe: Probe | None = None) -> InfeasibilityReport:
    """Name the resource that runs out and search for the smallest change that makes a plan exist. When the rules
    and pins leave no configuration at all (before any memory check), the resource is the search space: no amount
    of memory changes that. With a `probe` (does a plan exist for these inputs?), also search for the smallest
    change that makes one exist."""

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
    if probe is None:
        return InfeasibilityReport(resource=resource, detail=detail, suggestions=suggestions)

    def feasible(m: ModelSpec, c: ClusterSpec, wl: TrainingWorkload, sp: SearchSpace) -> bool:
        try:
            return probe(m, c, wl, sp)
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
        found = _more_nodes(ts, pool.name, feasible)
        if found is not None:
            nodes, gpu = found
            suggestions.append(
                Suggestion(
                    change=f"more GPUs: {nodes - pool.healthy_nodes} more healthy nodes in pool {pool.name}",
                    detail=f"{nodes} x {pool.gpus_per_node} {gpu.name} ({gpu.memory_gib:g} GiB each) fit a plan",
                )
            )
    suggestions += _lighter_states(ts, feasible)
    # bf16 gradients: Megatron keeps fp32 main grads unless told (--grad-reduce-in-bf16; NeMo's performance recipes
    # set grad_reduce_in_fp32=False: scripts/performance/helpers.py set_precision_configs), 2 B per parameter less.
    if (
        w.mode == "training"
        and w.grad_dtype == "fp32"
        and feasible(model, cluster, w.model_copy(update={"grad_dtype": "bf16"}), space)
    ):
        suggestions.append(
            Suggestion(
                change="bf16 gradients: grad_dtype bf16",
                detail="Megatron --grad-reduce-in-bf16, as NeMo's and Megatron-Bridge's performance recipes run "
                "(grad_reduce_in_fp32=False): 2 B per parameter instead of 4",
            )
        )
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


Feasible = Callable[[ModelSpec, ClusterSpec, TrainingWorkload, SearchSpace], bool]

NODE_STEPS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0)
"""Node counts probed, as multiples of the least that could hold the sharded states (or of today's nodes): the
first that fits is the suggestion, within a few probes (each stops at its first plan)."""


def _more_nodes(ts: TrainingSpace, pool_name: str, feasible: Feasible) -> tuple[int, GPUSpec] | None:
    """The fewest nodes of the pool probed (NODE_STEPS) with which a plan exists, and its GPU, or None. Starts at
    the nodes whose GPUs could hold every weight, gradient and Adam state fully sharded (16 B per parameter, ZeRO-3
    [Z20]) beside the other pools, so a model 20x too large is not probed at 2x, 4x, ... [issue 48 §4: Llama 3.1
    405B on 8 A100-40GB had no suggestion: 16x its node was the largest probed]."""
    model, cluster, w, space = ts.model, ts.cluster, ts.w, ts.space
    pool = next(p for p in ts.pools if p.name == pool_name)
    gpu = cluster.gpu_of(pool)
    usable = ts.usable.get(pool.name, 0.0)
    if usable <= 0:
        return None
    others = sum(p.plannable_gpus for p in ts.pools if p.name != pool.name)
    need_gpus = model.num_parameters * 16 / usable - others
    least = max(pool.healthy_nodes + 1, math.ceil(need_gpus / pool.gpus_per_node))
    tried: set[int] = set()
    for step in NODE_STEPS:
        nodes = min(math.ceil(least * step), MAX_NODES_PER_CLUSTER)  # an inventory's limit
        if nodes in tried:
            continue
        tried.add(nodes)
        data = cluster.model_dump()
        for p in data["pools"]:
            if p["name"] == pool.name:
                p["nodes"] = nodes
                p["node_states"] = {}
        bigger = ClusterSpec.model_validate(data)
        if feasible(model, bigger, w, space.model_copy(update={"max_gpus": None})):
            return nodes, gpu
    return None


def _lighter_states(ts: TrainingSpace, feasible: Feasible) -> list[Suggestion]:
    """On the same GPUs: ZeRO-3 when a pin holds the sharding below it, and activation offloading when no pin
    forbids it (Megatron --cpu-offloading-num-layers: pp 1, no recompute; searched only when pinned, so the probe
    pins it). FP8 training is no memory change to suggest: its primary weights are 2 B per parameter at best
    (--fp8-param-gather), as bf16's (costmodel/stage_memory.py); FP8 / int4 weights are serving suggestions."""
    model, cluster, w, space = ts.model, ts.cluster, ts.w, ts.space
    out: list[Suggestion] = []
    zero = space.pinned_values("zero")
    if zero is not None and 3 not in zero:
        pins = {**space.pins, "zero": parse_pins(["zero=3"])["zero"]}
        if feasible(model, cluster, w, space.model_copy(update={"pins": pins})):
            out.append(Suggestion(change="ZeRO-3: --pin zero=3", detail="shard weights, gradients and Adam states"))
    if space.pinned_values("offload_layers") is None and model.num_layers > 1:
        pins = {**space.pins, **parse_pins([f"offload_layers={model.num_layers - 1}"])}
        if feasible(model, cluster, w, space.model_copy(update={"pins": pins})):
            out.append(
                Suggestion(
                    change=f"activation offloading: --pin offload_layers={model.num_layers - 1}",
                    detail="Megatron --cpu-offloading-num-layers: the layers' activations wait in host memory (pp 1, "
                    "no recompute)",
                )
            )
    return out
