"""When nothing fits: which resource runs out, and the smallest change (recompute and ZeRO pins, GPU budget, more
nodes, bf16 gradients, a smaller batch) that makes a plan exist, each found by a feasibility probe the caller
supplies."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.result import InfeasibilityReport, Suggestion
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec
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
