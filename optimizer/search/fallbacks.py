"""Fallback plans, ready before they are needed (issue 36 §2): with a training plan, the plan after losing one node,
two nodes, one whole NVLink domain or one leaf switch of each pool it runs on (and, on clusters of several pools,
the whole pool).

For each scenario the reduced inventory marks the lost nodes failed, and two plans are weighed:

- the checkpoint-compatible fallback: the running configuration itself when spare nodes take the loss, else its
  largest smaller dp that fits (keep_or_switch.shrunk: same tp, pp, cp, ep; the global batch kept by more
  micro-batches). Priced by the cost model on its placement: no search.
- the best reshaped plan: the planner's search on the reduced inventory, warm-started from the compatible fallback
  (so its first solve sets a threshold the rest must beat), with a short time limit. One search serves every
  scenario that leaves the same healthy GPUs per pool (its answer is re-priced on each scenario's own placement);
  the searches share a time budget (FALLBACK_BUDGET_S), the cheap fallbacks of every scenario coming first.

A reshaped plan is listed when it is faster than the compatible one, with what loading the running checkpoint
under it takes in the framework's format (`reshard_note`), and preferred when it is significantly faster
(keep_or_switch.weigh, the watch's default threshold).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError
from optimizer.placement.hosts import healthy_hosts
from optimizer.placement.place import place
from optimizer.placement.result import Placement
from optimizer.search.goodput_choice import gain_holds, paired_gain_band
from optimizer.search.keep_or_switch import NoLongerFits, objective_of, placed, shrunk, weigh
from optimizer.search.planner import plan
from optimizer.search.replan_decision import DEFAULT_SWITCH_THRESHOLD_PCT
from optimizer.search.result import Fallback, PlannedConfig, PlanResult, ScenarioKind
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool, NodeState
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# The seconds all fallback searches of one plan may take together: issue 36 §3 asks for the fallbacks of a
# 1,000+ GPU plan in under 10 s more than the plan; the cheap (no-search) fallbacks and the pricing take the rest.
FALLBACK_BUDGET_S = 7.0


def with_fallbacks(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    result: PlanResult,
    space: SearchSpace | None,
    time_limit_s: float,
) -> PlanResult:
    """`result` with its fallbacks and the seconds they took; the searches share FALLBACK_BUDGET_S, or the plan's
    own time limit when that is shorter (a plan asked for in 2 s does not wait 7 s for its fallbacks)."""
    t0 = time.perf_counter()
    found = fallbacks(model, cluster, w, result, space, budget_s=min(FALLBACK_BUDGET_S, time_limit_s))
    return result.model_copy(update={"fallbacks": found, "fallbacks_time_s": time.perf_counter() - t0})


# One search's cap, seconds: the budget is shared by the distinct GPU counts the scenarios leave (usually 2-4).
SEARCH_CAP_S = 3.0
# Below this a search is not started (the planner's own minimum time limit is 0.1 s, planner.MIN_TIME_LIMIT_S).
MIN_SEARCH_S = 0.3
# The knobs a checkpoint's shards are cut by: a fallback that keeps them loads the running checkpoint as is (fewer
# data-parallel replicas only) [issue 36 §2: same tp / pp / ep]. Also kept: the expert tensor split, the virtual
# stages and the layers per stage (the model chunks) and the ZeRO stage, since Megatron's default dp_reshardable
# optimizer state follows the distributed optimizer's buffers and reshards over DP only [MEGATRON_SRC below].
SHARD_KNOBS = ("tp", "pp", "cp", "ep", "etp", "vp", "layers_per_stage", "zero_stage")
# Bytes per parameter of a training checkpoint with mixed-precision Adam: 2 (bf16 weights) + 4 (fp32 master
# weights) + 4 + 4 (Adam's two moments) = 14 [ZeRO, Rajbhandari et al. 2020 (arXiv:1910.02054) §3.1: 2Ψ + 12Ψ of
# the 16Ψ model states are weights and optimizer states; the fp16 gradients are not saved].
CHECKPOINT_BYTES_PER_PARAM = 14
# Storage read (and write) bandwidth of the one host an offline conversion runs on, GB/s: the DGX SuperPOD
# reference architecture's "better" storage tier for a single node (NVIDIA DGX SuperPOD H100 reference
# architecture, storage architecture, performance requirements: single-node read 8 GB/s; its "best" tier 40 GB/s,
# a GDS-enabled read). A conversion reads the checkpoint once and writes it once.
CONVERSION_GBYTES_PER_S = 8.0

# Where each framework's checkpoint format stands on resharding (the sources the notes cite).
MEGATRON_SRC = "NVIDIA/Megatron-LM@d98e8a64 megatron/core/optimizer/distrib_optimizer.py"
DCP_SRC = "torch.distributed.checkpoint docs: 'load-time resharding' (pytorch.org/docs/2.3/distributed.checkpoint)"
DEEPSPEED_SRC = "deepspeedai/DeepSpeed@edaa7221 deepspeed/checkpoint/ds_to_universal.py"


@dataclass(frozen=True)
class Scenario:
    """One loss: its kind, the pool, the nodes taken away and the inventory left."""

    kind: ScenarioKind
    pool: str
    label: str
    lost: tuple[str, ...]
    cluster: ClusterSpec

    @property
    def healthy(self) -> tuple[tuple[str, int], ...]:
        return tuple((p.name, p.healthy_gpus) for p in self.cluster.pools)


@dataclass
class _Timed:
    """Seconds spent on one scenario (its share of a shared search added when it ran)."""

    compat: PlannedConfig | None = None
    seconds: float = 0.0
    searched: bool = False
    reshaped: PlannedConfig | None = None


def without_nodes(cluster: ClusterSpec, lost: dict[str, Sequence[str]]) -> ClusterSpec:
    """`cluster` with the named nodes of each pool failed (the rest unchanged, its calibration kept)."""
    pools: list[NodePool] = []
    for p in cluster.pools:
        names = lost.get(p.name)
        if not names:
            pools.append(p)
            continue
        states: dict[str, NodeState] = {**p.node_states, **dict.fromkeys(names, "failed")}
        pools.append(NodePool.model_validate({**p.model_dump(), "node_states": states}))
    return cluster.model_copy(update={"pools": pools})


def scenarios(cluster: ClusterSpec, placement: Placement) -> list[Scenario]:
    """The losses to prepare for, for each pool the plan runs on (busiest first): its last host, its last two
    hosts, the NVLink domain and the leaf switch holding most of its hosts (all their healthy nodes, when they
    span more than one node and less than the pool), and on clusters of several pools the whole pool."""
    by_pool: Counter[str] = Counter(h.pool for h in placement.hosts)
    healthy_pools = [p for p in cluster.pools if p.healthy_gpus]
    out: list[Scenario] = []
    for name, _ in by_pool.most_common():
        pool = cluster.pool(name)
        mine = [h for h in placement.hosts if h.pool == name]
        every = healthy_hosts(cluster, pool)
        out.append(_scenario(cluster, "node", name, f"one node of pool {name}", [mine[-1].name]))
        if len(every) > 2 and len(mine) >= 2:
            two = [mine[-2].name, mine[-1].name]
            out.append(_scenario(cluster, "two_nodes", name, f"two nodes of pool {name}", two))
        for kind, key, words in (
            ("nvlink_domain", "nvlink_domain", "NVLink domain"),
            ("leaf_switch", "leaf", "leaf switch"),
        ):
            counts = Counter(getattr(h, key) for h in mine)
            top = max(counts.values())
            group = next(g for g in reversed([getattr(h, key) for h in mine]) if counts[g] == top)
            attr = "domain" if kind == "nvlink_domain" else "leaf"
            nodes = [h.name for h in every if getattr(h, attr) == group]
            if 1 < len(nodes) < len(every):
                label = f"{words} {group} of pool {name} ({len(nodes)} nodes)"
                out.append(_scenario(cluster, kind, name, label, nodes))  # type: ignore[arg-type]
        if len(healthy_pools) > 1:
            out.append(_scenario(cluster, "pool", name, f"pool {name}", [h.name for h in every]))
    return out


def _scenario(cluster: ClusterSpec, kind: ScenarioKind, pool: str, label: str, lost: list[str]) -> Scenario:
    if len(lost) <= 2:
        label = f"{label} ({', '.join(lost)})"
    return Scenario(kind, pool, label, tuple(lost), without_nodes(cluster, {pool: lost}))


def _priced(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, cfg: ParallelConfig) -> PlannedConfig | None:
    try:
        return placed(model, cluster, w, cfg)[0]
    except NoLongerFits:
        return None


def compatible(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, running: ParallelConfig
) -> PlannedConfig | None:
    """The checkpoint-compatible fallback on `cluster`: the running configuration when it still fits (spare nodes
    take the loss), else its largest smaller dp that fits (same tp, pp, cp, ep; the global batch kept); None when
    no dp fits."""
    return _priced(model, cluster, w, running) or shrunk(model, cluster, w, running)


def keeps_shards(running: ParallelConfig, cfg: ParallelConfig) -> bool:
    """Whether `cfg` cuts the checkpoint as `running` does (the SHARD_KNOBS; dp and the micro-batches may differ)."""

    def same(k: str) -> bool:
        a, b = getattr(cfg, k), getattr(running, k)
        return a == b or (k == "layers_per_stage" and (a is None or b is None))  # None: the even split

    return all(same(k) for k in SHARD_KNOBS)


def checkpoint_gb(model: ModelSpec) -> float:
    """A training checkpoint's size, GB (CHECKPOINT_BYTES_PER_PARAM per parameter)."""
    return model.num_parameters * CHECKPOINT_BYTES_PER_PARAM / 1e9


def reshard_note(
    framework: str, model: ModelSpec, running: ParallelConfig, cfg: ParallelConfig
) -> tuple[bool, str, float | None]:
    """(loads as is, what loading the running checkpoint under `cfg` takes, seconds of offline conversion) in
    `framework`'s checkpoint format."""
    same_shards = keeps_shards(running, cfg)
    dp_only = same_shards and cfg.dp != running.dp
    if framework == "torchtitan":
        text = f"torch DCP reshards on load (any tp/pp/dp change): no extra step [{DCP_SRC}]"
        return same_shards, ("loads as is" if same_shards else text), 0.0
    if framework == "deepspeed":
        if same_shards and (not dp_only or running.zero_stage == 0):
            return True, "loads as is", 0.0
        gb = checkpoint_gb(model)
        cost = 2 * gb / CONVERSION_GBYTES_PER_S
        what = "a ZeRO checkpoint's optimizer shards are cut by dp" if dp_only else "the parallel layout changes"
        return (
            False,
            f"DeepSpeed: {what}; convert offline with ds_to_universal.py and load with "
            f"checkpoint.load_universal: about {cost:.0f} s to read and write {gb:.0f} GB at "
            f"{CONVERSION_GBYTES_PER_S:g} GB/s [{DEEPSPEED_SRC}]",
            cost,
        )
    # Megatron torch_dist: weights reshard on load; the distributed optimizer's default dp_reshardable format
    # reshards over DP only, fully_reshardable (--dist-ckpt-optim-fully-reshardable) over any layout.
    if same_shards:
        return True, "loads as is (torch_dist, dp_reshardable: reshards over DP on load)", 0.0
    if running.zero_stage == 0:
        return False, f"Megatron torch_dist reshards tp/pp on load: no extra step [{MEGATRON_SRC}]", 0.0
    return (
        False,
        "Megatron torch_dist reshards the weights on load; the distributed optimizer's state reshards across "
        "tp/pp only from a checkpoint saved with --dist-ckpt-optim-fully-reshardable (the default dp_reshardable "
        f"reshards over DP only): no offline step, a slower save [{MEGATRON_SRC}]",
        0.0,
    )


def diff_text(running: PlannedConfig, cfg: ParallelConfig, est: Estimate) -> str:
    """The knobs that change against the running plan, the step time and the GPUs."""
    b, a = running.config.model_dump(), cfg.model_dump()
    parts = [f"{k} {b[k]}→{a[k]}" for k in b if b[k] != a.get(k) and k not in ("layers_per_stage", "stage_pools")]
    if b["layers_per_stage"] != a["layers_per_stage"]:
        parts.append("layers per stage")
    if est.microbatches != running.estimate.microbatches:
        parts.append(f"micro-batches {running.estimate.microbatches}→{est.microbatches}")
    parts.append(f"step time {100 * (est.step_time_s / running.estimate.step_time_s - 1):+.1f}%")
    if est.gpus != running.estimate.gpus:
        parts.append(f"GPUs {running.estimate.gpus}→{est.gpus}")
    return ", ".join(parts)


def _entry(
    sc: Scenario,
    running: PlannedConfig,
    framework: str,
    model: ModelSpec,
    p: PlannedConfig | None,
    preferred: bool,
    seconds: float,
    searched: bool,
) -> Fallback:
    common = {
        "scenario": sc.kind,
        "pool": sc.pool,
        "label": sc.label,
        "lost_nodes": list(sc.lost),
        "healthy_gpus": dict(sc.healthy),
        "searched": searched,
        "compute_time_s": seconds,
    }
    if p is None:
        return Fallback(
            **common,
            diff="nothing with the running tp, pp, cp and ep fits",
            checkpoint_compatible=False,
            preferred=False,
            reshard="no compatible fallback",
        )
    ok, note, cost = reshard_note(framework, model, running.config, p.config)
    e = p.estimate
    return Fallback(
        **common,
        config=p.config,
        step_time_s=e.step_time_s,
        tokens_per_s=e.tokens_per_s,
        gpus=e.gpus,
        peak_memory_gb=e.peak_memory_gb,
        step_time_delta_pct=100 * (e.step_time_s / running.estimate.step_time_s - 1),
        # priced on the scenario's inventory: its spares and failure rate are those left after the loss
        goodput_tokens_per_s=e.goodput.useful_tokens_per_s if e.goodput is not None else None,
        diff=diff_text(running, p.config, e),
        checkpoint_compatible=ok,
        preferred=preferred,
        reshard=note,
        reshard_cost_s=cost,
    )


def fallbacks(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    result: PlanResult,
    space: SearchSpace | None = None,
    *,
    budget_s: float = FALLBACK_BUDGET_S,
) -> list[Fallback]:
    """The fallbacks of a solved training plan (`result`, planned on `cluster`), one or two per scenario: the
    checkpoint-compatible one, and a reshaped one when a search finds a faster plan."""
    if result.plan is None or result.fleet is not None:
        return []
    running = result.plan
    framework = result.framework or priced_framework(w.framework)
    wf = w.model_copy(update={"framework": framework}) if w.framework == "auto" else w
    placement = result.placement or place(cluster, running.config).placement
    found = scenarios(cluster, placement)
    timed: list[_Timed] = []
    for sc in found:  # the cheap ones first: no search
        t0 = time.perf_counter()
        timed.append(_Timed(compat=compatible(model, sc.cluster, wf, running.config)))
        timed[-1].seconds = time.perf_counter() - t0
    _search(model, wf, space or SearchSpace(), running, found, timed, budget_s)
    out: list[Fallback] = []
    for sc, t in zip(found, timed, strict=True):
        compat, reshaped = t.compat, t.reshaped
        if reshaped is not None and keeps_shards(running.config, reshaped.config):
            if compat is None or reshaped.estimate.step_time_s < compat.estimate.step_time_s:
                compat = reshaped  # the search found a faster plan that keeps the checkpoint: it is compatible
            reshaped = None
        if (
            reshaped is not None
            and compat is not None
            and objective_of(sc.cluster, wf, reshaped) >= objective_of(sc.cluster, wf, compat)
        ):
            reshaped = None
        switch = reshaped is not None and (
            compat is None
            or (
                weigh(objective_of(sc.cluster, wf, compat), objective_of(sc.cluster, wf, reshaped), _THRESHOLD)[2]
                and _goodput_gain_holds(model, sc.cluster, wf, compat, reshaped, framework)
            )
        )
        out.append(_entry(sc, running, framework, model, compat, not switch, t.seconds, t.searched))
        if reshaped is not None:
            out.append(_entry(sc, running, framework, model, reshaped, switch, 0.0, True))
    return out


_THRESHOLD = DEFAULT_SWITCH_THRESHOLD_PCT


def _goodput_gain_holds(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    compat: PlannedConfig,
    reshaped: PlannedConfig,
    framework: str | None,
) -> bool:
    """Objective goodput: the reshaped fallback's gain in useful tokens/s holds at the low end of its 80% band
    (search/goodput_choice.py); other objectives: no band to respect here."""
    if w.objective != "goodput" or compat.estimate.goodput is None or reshaped.estimate.goodput is None:
        return True
    return gain_holds(paired_gain_band(model, cluster, w, compat, reshaped, framework))


def _search(
    model: ModelSpec,
    w: TrainingWorkload,
    space: SearchSpace,
    running: PlannedConfig,
    found: list[Scenario],
    timed: list[_Timed],
    budget_s: float,
) -> None:
    """One warm-started search per distinct healthy-GPU count, within the budget; its best re-priced on each
    scenario of that count (in `timed`)."""
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for i, sc in enumerate(found):
        groups.setdefault(sc.healthy, []).append(i)
    t_start = time.perf_counter()
    left = len(groups)
    for members in groups.values():
        remaining = budget_s - (time.perf_counter() - t_start)
        limit = min(SEARCH_CAP_S, remaining / left)
        left -= 1
        if limit < MIN_SEARCH_S:
            continue
        t0 = time.perf_counter()
        first = found[members[0]]
        warm = timed[members[0]].compat
        try:
            r = plan(
                model,
                first.cluster,
                w,
                space,
                top_k=1,
                time_limit_s=limit,
                warm_start=warm.config if warm is not None else running.config,
                diagnose=False,
                interval_rule=False,
            )
        except DomainError:  # the pins leave nothing on the reduced inventory
            r = None
        best = r.plan.config if r is not None and r.plan is not None else None
        share = (time.perf_counter() - t0) / len(members)
        for i in members:
            t = timed[i]
            t.searched = True
            t1 = time.perf_counter()
            t.reshaped = _priced(model, found[i].cluster, w, best) if best is not None else None
            t.seconds += share + time.perf_counter() - t1


def match(
    stored: Sequence[Fallback], lost: dict[str, set[str]], healthy: dict[str, int]
) -> tuple[Fallback, str] | None:
    """The stored fallback a re-plan starts from, and how it matched: the preferred fallback of the scenario that
    lost the same nodes ('nodes'), else of one that leaves the same healthy GPUs in every pool ('gpu_counts');
    None when none does (or the matched scenario has no plan)."""
    lost_all = set().union(*lost.values()) if lost else set()
    if not lost_all:
        return None
    preferred = [f for f in stored if f.preferred and f.config is not None]
    for f in preferred:
        if set(f.lost_nodes) == lost_all:
            return f, "nodes"
    for f in preferred:
        if all(healthy.get(p, 0) == n for p, n in f.healthy_gpus.items()) and set(f.healthy_gpus) == set(healthy):
            return f, "gpu_counts"
    return None


def lost_nodes(before: ClusterSpec, after: ClusterSpec) -> dict[str, set[str]]:
    """Per pool, the nodes healthy in `before` that are not healthy (or gone) in `after`."""
    out: dict[str, set[str]] = {}
    now = {p.name: p for p in after.pools}
    for p in before.pools:
        was = {n.name for n in p.node_list if n.state == "healthy"}
        q = now.get(p.name)
        still = {n.name for n in q.node_list if n.state == "healthy"} if q is not None else set()
        gone = was - still
        if gone:
            out[p.name] = gone
    return out
