"""Exhaustive reference planner over the same declared search space and cost model (small instances only).

It enumerates every global-knob candidate (without the planner's bounds) and every stage layout the space
declares (layers per stage, pools as contiguous blocks, middle stages on one pool non-decreasing, leading dense
layers on stage 0), and evaluates each with `estimate`. The tests require the CP-SAT planner's optimum to equal
the oracle's.
"""

from __future__ import annotations

from collections.abc import Iterator

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import TrainingWorkload


def contiguous_blocks(pools: int, stages: int) -> Iterator[tuple[int, ...]]:
    """Every assignment of `stages` stages to pools in which each pool's stages form one contiguous block, in
    lexicographic order (built stage by stage, not filtered out of all pools^stages assignments)."""

    def extend(prefix: tuple[int, ...], used: frozenset[int]) -> Iterator[tuple[int, ...]]:
        if len(prefix) == stages:
            yield prefix
            return
        for q in range(pools):
            if prefix and q == prefix[-1]:
                yield from extend((*prefix, q), used)
            elif q not in used:
                yield from extend((*prefix, q), used | {q})

    yield from extend((), frozenset())


def _layouts(ts: TrainingSpace, c: ParallelConfig) -> Iterator[tuple[list[int], list[str]]]:
    pp = c.pp
    rules = LayerRules.of(ts.model, pp, c.vp, ts.fw.virtual_stage_layout)
    pools = [p for p in ts.pools if p.plannable_gpus >= c.gpus_per_stage]
    names = [p.name for p in pools]

    assigns = list(contiguous_blocks(len(pools), pp))
    for layers in rules.splits():
        for assign in assigns:
            # middle stages on one pool: non-decreasing layers
            if any(assign[i] == assign[i + 1] and layers[i] > layers[i + 1] for i in range(1, pp - 2)):
                continue
            yield layers, [names[a] for a in assign]


def oracle_plan(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace | None = None
) -> tuple[float, int, ParallelConfig] | None:
    """(best objective: step time or price per step, its GPUs, its configuration), or None when nothing fits."""
    ranked = oracle_ranked(model, cluster, w, space)
    return ranked[0] if ranked else None


def oracle_ranked(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace | None = None
) -> list[tuple[float, int, ParallelConfig]]:
    """The best plan of every (tp, pp, dp, cp, ep) signature, best first: what the planner's top-K alternatives
    are drawn from."""
    ts = TrainingSpace(model, cluster, w, space or SearchSpace())
    best: dict[tuple[int, ...], tuple[float, int, ParallelConfig]] = {}
    for cand in ts.all_candidates(prune_memory=False):
        c = cand.config
        for layers, pools in _layouts(ts, c):
            cfg = c.model_copy(update={"layers_per_stage": layers, "stage_pools": pools})
            try:
                est = estimate(model, cluster, w, cfg, goodput_band=False)  # the point is what it ranks
            except DomainError:
                continue  # e.g. too many GPUs of one pool: the planner's pool-capacity family
            value = est.step_time_s
            if w.objective == "cost":  # price per step: each stage's GPUs at its pool's price
                value *= cluster.price_per_s(c.gpus_per_stage, pools) or 0.0
            elif w.objective == "goodput":  # wall time per useful step: step time / goodput fraction
                value = est.goodput.wall_s_per_step if est.goodput is not None else value
            sig = (cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep)
            prev = best.get(sig)
            if est.feasible and (prev is None or (value, cfg.gpus) < (prev[0], prev[1])):
                best[sig] = (value, cfg.gpus, cfg)
    return sorted(best.values(), key=lambda v: (v[0], v[1]))


def layout_count(ts: TrainingSpace, c: ParallelConfig) -> int:
    """How many stage layouts the oracle enumerates for `c` with every stage on one pool: stage 0 from its
    allowed counts, middle stages non-decreasing, the last free (partitions into exactly pp-2 parts, by DP)."""
    L, pp = ts.model.num_layers, c.pp
    if pp == 1:
        return 1
    rules = LayerRules.of(ts.model, pp, c.vp, ts.fw.virtual_stage_layout)
    firsts, others, lasts = rules.first_counts(), rules.other_counts(), rules.last_counts()
    parts = pp - 2
    # ways[j][n]: non-decreasing sequences of j values from `others` summing to n (parts taken in increasing order)
    ways = [[0] * (L + 1) for _ in range(parts + 1)]
    ways[0][0] = 1
    for x in others:
        for j in range(1, parts + 1):
            row, prev = ways[j], ways[j - 1]
            for n in range(x, L + 1):
                row[n] += prev[n - x]
    return sum(ways[parts][L - l0 - last] for l0 in firsts for last in lasts if L - l0 - last >= 0)


def oracle_evaluations_lower_bound(ts: TrainingSpace) -> int:
    """A lower bound on the `estimate` calls the oracle makes: every candidate of the space (memory bound off)
    whose stages all fit on one pool is evaluated with at least every one-pool layout; the others at least once."""
    counts: dict[tuple[int, int], int] = {}
    total = 0
    largest = max((p.plannable_gpus for p in ts.pools), default=0)
    for cand in ts.all_candidates(prune_memory=False):
        c = cand.config
        if c.gpus > largest:
            total += 1
            continue
        shape = (c.pp, c.vp)
        if shape not in counts:
            counts[shape] = layout_count(ts, c)
        total += counts[shape]
    return total
