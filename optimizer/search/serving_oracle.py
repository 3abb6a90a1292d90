"""Exhaustive reference for serving plans over the same declared space and cost model (small instances only).

It enumerates every serving candidate the planner considers (tp, ep, pp, dp) and every stage layout its CP-SAT
model admits (layers per stage as stage_layers.LayerRules allows, any allowed pool per stage within the pools'
GPUs), evaluates each with `estimate`, and keeps the best objective: time per output token (latency) or
GPU-seconds per output token (throughput). The tests require plan_inference's optimum to equal it [issue 15].
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.search.inference_planner import serving_candidates, serving_pools
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import InferenceWorkload


def _layouts(
    model: ModelSpec, cluster: ClusterSpec, c: ParallelConfig, names: list[str]
) -> Iterator[tuple[list[int], list[str]]]:
    for layers in LayerRules.of(model, c.pp, 1, True).splits():
        for assign in itertools.product(names, repeat=c.pp):
            used = Counter(assign)
            if all(n * c.gpus_per_stage <= cluster.pool(q).healthy_gpus for q, n in used.items()):
                yield layers, list(assign)


def serving_oracle(
    model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, space: SearchSpace | None = None
) -> tuple[float, ParallelConfig] | None:
    """(best objective, its configuration), or None when nothing fits."""
    space = space or SearchSpace()
    pools = serving_pools(cluster, space)
    best: tuple[float, ParallelConfig] | None = None
    for c in serving_candidates(model, cluster, w, space, pools):
        names = [p.name for p in pools if p.healthy_gpus >= c.gpus_per_stage]
        for layers, assign in _layouts(model, cluster, c, names):
            cfg = c.model_copy(update={"layers_per_stage": layers, "stage_pools": assign})
            try:
                est = estimate(model, cluster, w, cfg)
            except DomainError:
                continue
            if not est.feasible or est.tpot_s is None:
                continue
            obj = est.tpot_s * (cfg.gpus / (cfg.dp * w.batch) if w.objective == "throughput" else 1.0)
            if best is None or obj < best[0]:
                best = (obj, cfg)
    return best
