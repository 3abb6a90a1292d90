"""A training plan's placement and what the cost model must price of it: `place` chooses the hosts and the GPU of
every rank (choose.py), reads off which NVLink domain each TP group is in and where each pipeline boundary's sends
go, and, per stage, the levels its slowest group of each kind spans where that is worse than the tiers assume
(spans.py), with a sentence for each shortfall."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import TypeAdapter

from optimizer.costmodel import network as net
from optimizer.costmodel.placed_fabric import PlacedFabric, StageFabric
from optimizer.frameworks.validation import assign_pools
from optimizer.placement.choose import HostRun, rank_slots
from optimizer.placement.hosts import Host
from optimizer.placement.result import PipelineHop, PlacedHost, Placement
from optimizer.placement.spans import (
    COMPARE_BYTES,
    SAME,
    TIER_WORDS,
    GroupSpan,
    IntArray,
    RankUnits,
    collective_cost,
    describe,
    group_span,
    shared_tier,
)
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.parallel_config import ParallelConfig

# The groups of a stage the cost model prices by their fabric levels: (field of StageFabric, label, size, stride,
# all-to-all), from the configuration. Megatron's rank order inside a stage: tp - cp - dp for the dense layers,
# etp - ep - edp for the experts [MLM parallel_state.py RankGenerator, order 'tp-cp-ep-dp-pp'].
GroupKind = tuple[str, str, int, int, bool]


def group_kinds(c: ParallelConfig) -> list[GroupKind]:
    """The priced groups of a configuration's stage (size > 1 only)."""
    kinds: list[GroupKind] = [
        ("tp", "TP", c.tp, 1, False),
        ("cp", "CP", c.cp, c.tp, c.cp_comm == "a2a"),
        ("dp", "DP", c.dp * c.cp, c.tp, False),
        ("ep", "EP", c.ep, c.expert_tp, True),
        ("edp", "expert-DP", c.expert_dp, c.expert_tp * c.ep, False),
    ]
    if c.cp_comm == "p2p":  # the ring's neighbours are priced, not the group's levels
        kinds = [k for k in kinds if k[0] != "cp"]
    return [k for k in kinds if k[2] > 1]


@dataclass(frozen=True, slots=True)
class PlacementOutcome:
    """A placement and the per-stage fabric the estimate must price (None: nothing worse than the tiers assume)."""

    placement: Placement
    fabric: PlacedFabric | None


@dataclass(slots=True)
class _Ranks:
    """Per global rank: host, local GPU, NVLink domain and leaf switch, as integer ids (each numbered in order of
    first appearance), with the hosts and the domain and leaf names those ids index."""

    host: IntArray
    local: IntArray
    domain: IntArray
    leaf: IntArray
    hosts: list[Host]
    domain_names: list[str]
    leaf_names: list[str]

    @classmethod
    def of(cls, runs: list[HostRun]) -> _Ranks:
        """From the ranks' runs on their hosts (choose.rank_slots), per host, then spread to the ranks with numpy:
        a plan on 800,000 GPUs has 100,000 hosts (issue 49: per-rank Python loops here were most of its time)."""
        number: dict[int, int] = {}  # the runs' Host objects are one per node (choose.PoolStock)
        hosts: list[Host] = []
        for h, _, _ in runs:
            if number.setdefault(id(h), len(hosts)) == len(hosts):
                hosts.append(h)
        domains: dict[str, int] = {}
        leaves: dict[str, int] = {}
        host_domain = np.array([domains.setdefault(h.domain, len(domains)) for h in hosts], dtype=np.int64)
        host_leaf = np.array([leaves.setdefault(h.leaf, len(leaves)) for h in hosts], dtype=np.int64)
        run_host = np.array([number[id(h)] for h, _, _ in runs], dtype=np.int64)
        first_local = np.array([lo for _, lo, _ in runs], dtype=np.int64)
        counts = np.array([k for _, _, k in runs], dtype=np.int64)
        n = int(counts.sum())
        starts = np.cumsum(counts) - counts
        offset = np.arange(n, dtype=np.int64) - np.repeat(starts, counts)
        host = np.repeat(run_host, counts)
        return cls(
            host=host,
            local=np.repeat(first_local, counts) + offset,
            domain=host_domain[host] if n else host,
            leaf=host_leaf[host] if n else host,
            hosts=hosts,
            domain_names=list(domains),
            leaf_names=list(leaves),
        )

    def runs(self) -> tuple[IntArray, IntArray]:
        """(first rank, rank count) of each host's ranks, in rank order; AssertionError where a host's ranks are not
        consecutive on its GPUs 0, 1, ... (choose.py never gives a host's GPUs to stages that are not neighbours on
        one pool)."""
        n = len(self.host)
        starts = np.flatnonzero(np.diff(self.host)) + 1 if n else np.zeros(0, dtype=np.int64)
        starts = np.concatenate(([0], starts)).astype(np.int64) if n else starts
        counts = np.diff(np.append(starts, n)).astype(np.int64)
        if len(starts) != len(self.hosts):
            raise AssertionError("a host's ranks are not consecutive")
        expected = np.arange(n, dtype=np.int64) - np.repeat(starts, counts)
        if not np.array_equal(self.local, expected):
            bad = int(self.host[np.flatnonzero(self.local != expected)[0]])
            raise AssertionError(f"host {self.hosts[bad].name}: ranks not consecutive on its GPUs")
        return starts, counts

    def units(self, cluster: ClusterSpec, pool: NodePool) -> RankUnits:
        """Every rank's unit at each tier of `pool` (the unit ids of ranks on other pools are not read)."""
        tiers = net.cluster_tiers(cluster, pool)
        fabric = cluster.fabric_of(pool)
        g = pool.gpus_per_node
        domain_gpus = fabric.domain_size or 1
        out: list[IntArray] = []
        for t in tiers:
            if t.unit == net.INF:
                out.append(np.zeros_like(self.host))
            elif t.name == "nvlink":
                out.append(self.domain if domain_gpus >= g else self.host * g + self.local // domain_gpus)
            elif t.name == "pcie":
                out.append(self.host)
            else:  # the network tier of a pool with pods: one unit per leaf switch
                out.append(self.leaf)
        return RankUnits(tiers, tuple(out))


_PLACED_HOSTS = TypeAdapter(list[PlacedHost])  # one validation call for every host (100,000 at 800,000 GPUs)


def _hosts(ranks: _Ranks, n: int) -> list[PlacedHost]:
    """The hosts in order of their first rank, with the stages (of n ranks) their ranks belong to."""
    starts, counts = ranks.runs()
    rows = [
        {
            "name": h.name,
            "pool": h.pool,
            "leaf": h.leaf,
            "nvlink_domain": h.domain,
            "first_rank": r,
            "ranks": count,
            "stages": list(range(r // n, (r + count - 1) // n + 1)),
        }
        # numbered in order of first appearance: the runs' order
        for h, r, count in zip(ranks.hosts, starts.tolist(), counts.tolist(), strict=True)
    ]
    return _PLACED_HOSTS.validate_python(rows)


def _tp_domains(ranks: _Ranks, tp: int) -> list[str]:
    """Per TP group (tp consecutive ranks), the NVLink domains it spans joined by ' + ' (in rank order)."""
    groups = len(ranks.domain) // tp
    d = ranks.domain[: groups * tp].reshape(groups, tp)
    one = (d == d[:, :1]).all(axis=1)
    names = ranks.domain_names
    out = [names[x] for x in d[:, 0].tolist()]
    for g in np.flatnonzero(~one).tolist():
        out[g] = " + ".join(names[x] for x in dict.fromkeys(d[g].tolist()))
    return out


def _stage_spans(ru: RankUnits, c: ParallelConfig, lo: int, hi: int) -> dict[str, tuple[str, GroupSpan]]:
    stage = RankUnits(ru.tiers, tuple(u[lo:hi] for u in ru.units))
    out = {}
    for field, label, size, stride, a2a in group_kinds(c):
        span = group_span(stage, size, stride, a2a)
        if span.worse:
            out[field] = (label, span)
    return out


def _ring_tier(ru: RankUnits, c: ParallelConfig, lo: int) -> net.Tier | None:
    """The tier of a p2p CP ring's worst neighbour pair, where worse than the tiers assume."""
    if c.cp <= 1 or c.cp_comm != "p2p":
        return None
    n = c.gpus_per_stage
    i = np.arange(n, dtype=np.int64)
    cp_rank = (i // c.tp) % c.cp
    nxt = i + c.tp * np.where(cp_rank == c.cp - 1, 1 - c.cp, 1)
    k = shared_tier(ru, lo + i, lo + nxt)
    return _if_worse(ru.tiers[k], net.neighbour_tier(ru.tiers, c.tp))


def _if_worse(placed: net.Tier, assumed: net.Tier) -> net.Tier | None:
    """`placed` when a send over it is slower than over `assumed` (the tier the cost model assumes), else None."""
    slower = net.p2p(placed.bw, placed.network, COMPARE_BYTES) > net.p2p(assumed.bw, assumed.network, COMPARE_BYTES) * (
        1 + SAME
    )
    return placed if slower else None


@dataclass(frozen=True, slots=True)
class _Hop:
    hop: PipelineHop
    to: int
    tier: int | None  # index in the pool's tiers (None: to another pool)
    domains: list[str]  # the NVLink domains of the two stages' ranks


def _hops(
    c: ParallelConfig,
    pools: Sequence[NodePool],
    ranks: _Ranks,
    units: dict[str, RankUnits],
    leaf_names: list[str],
    domain_names: list[str],
) -> list[_Hop]:
    """The sends between consecutive stages (and from the last to the first under interleaving)."""
    n, pp = c.gpus_per_stage, c.pp
    pairs = [(s, s + 1) for s in range(pp - 1)]
    if c.vp > 1 and pp > 1:
        pairs.append((pp - 1, 0))
    i = np.arange(n, dtype=np.int64)
    out: list[_Hop] = []
    for s, t in pairs:
        a, b = s * n + i, t * n + i
        leaves = [leaf_names[x] for x in np.union1d(ranks.leaf[a], ranks.leaf[b]).tolist()]
        same_leaf = bool((ranks.leaf[a] == ranks.leaf[b]).all())
        domains = [domain_names[x] for x in np.union1d(ranks.domain[a], ranks.domain[b]).tolist()]
        if pools[s].name != pools[t].name:
            hop = PipelineHop(stage=s, next_stage=t, same_leaf=same_leaf, tier="pools", leaves=leaves)
            out.append(_Hop(hop, t, None, domains))
            continue
        ru = units[pools[s].name]
        k = shared_tier(ru, a, b)
        hop = PipelineHop(stage=s, next_stage=t, same_leaf=same_leaf, tier=ru.tiers[k].name, leaves=leaves)
        out.append(_Hop(hop, t, k, domains))
    return out


@dataclass(slots=True)
class _Analysis:
    """A placement on one inventory and, per stage, where it is worse than the cost model's tiers assume."""

    ranks: _Ranks
    hops: list[_Hop]
    units: dict[str, RankUnits]
    spans: list[dict[str, tuple[str, GroupSpan]]]  # per stage: field -> (label, span) where worse
    rings: list[net.Tier | None]  # per stage: the CP ring's tier where worse
    sends: list[net.Tier | None]  # per stage: its same-pool pipeline sends' worst tier where worse

    @property
    def short(self) -> bool:
        return any(self.spans) or any(self.rings) or any(self.sends)


def _analyse(cluster: ClusterSpec, c: ParallelConfig, stage_pools: list[NodePool], spans: bool = True) -> _Analysis:
    """The placement and, with `spans`, where its groups and sends are worse than the tiers assume."""
    slots = rank_slots(cluster, c, stage_pools)
    n = c.gpus_per_stage
    ranks = _Ranks.of(slots)
    units = {p.name: ranks.units(cluster, p) for p in {p.name: p for p in stage_pools}.values()}
    hops = _hops(c, stage_pools, ranks, units, ranks.leaf_names, ranks.domain_names)
    reach: dict[int, list[int]] = {}  # per stage, the tier indices its same-pool sends reach
    for h in hops:
        if h.tier is not None:
            reach.setdefault(h.hop.stage, []).append(h.tier)
            reach.setdefault(h.to, []).append(h.tier)
    worse: list[dict[str, tuple[str, GroupSpan]]] = []
    rings: list[net.Tier | None] = []
    sends: list[net.Tier | None] = []
    for s, pool in enumerate(stage_pools if spans else []):
        ru = units[pool.name]
        worse.append(_stage_spans(ru, c, s * n, (s + 1) * n))
        rings.append(_ring_tier(ru, c, s * n))
        send = None
        if s in reach:
            send = _if_worse(ru.tiers[max(reach[s])], net.neighbour_tier(ru.tiers, n))
        sends.append(send)
    if not spans:  # nothing to compare: every stage as the tiers say
        worse, rings, sends = [{} for _ in stage_pools], [None] * len(stage_pools), [None] * len(stage_pools)
    return _Analysis(ranks, hops, units, worse, rings, sends)


def healthy_twin(cluster: ClusterSpec) -> ClusterSpec:
    """The same inventory with every node healthy (and the same calibration)."""
    pools = []
    for pool in cluster.pools:
        doc = pool.model_dump(mode="json")
        doc["node_states"] = {}
        if isinstance(pool.nodes, list):
            doc["nodes"] = [{**node, "state": "healthy"} for node in doc["nodes"]]
        pools.append(doc)
    twin = ClusterSpec.model_validate({**cluster.model_dump(mode="json"), "pools": pools})
    return twin.with_calibration(cluster.calibration)


def _send_cost(t: net.Tier) -> float:
    return net.p2p(t.bw, t.network, COMPARE_BYTES)


def _worse_tier(actual: net.Tier | None, base: net.Tier | None) -> net.Tier | None:
    """`actual` when slower than `base` (None: the tiers' own assumption, which `actual` is already worse than)."""
    if actual is None or (base is not None and _send_cost(actual) <= _send_cost(base) * (1 + SAME)):
        return None
    return actual


def place(cluster: ClusterSpec, c: ParallelConfig, pools: Sequence[NodePool] | None = None) -> PlacementOutcome:
    """The placement of configuration `c` on `cluster` (its stages' pools: `pools`, else as `validate` assigns
    them), and what the estimate must price: where its groups span a slower fabric than the cost model's tiers
    assume AND than the same plan placed on the inventory with every node healthy. What a healthy inventory
    cannot give either (pipeline stages that outnumber an NVLink domain or a leaf switch) is how the published runs
    the cost model is validated on were placed too, so its idealisation stands there; what drained and failed
    nodes take away beyond that is priced as placed."""
    stage_pools = list(pools) if pools is not None else assign_pools(cluster, c)
    unhealthy = any(p.healthy_nodes < p.node_count for p in {p.name: p for p in stage_pools}.values())
    a = _analyse(cluster, c, stage_pools, spans=unhealthy)  # a healthy inventory is its own baseline
    n = c.gpus_per_stage
    base = a
    if a.short and unhealthy:
        twin = healthy_twin(cluster)
        base = _analyse(twin, c, [twin.pool(p.name) for p in stage_pools])
    tp_domains = _tp_domains(a.ranks, c.tp)
    fabric: list[StageFabric | None] = []
    notes: dict[tuple[str, str, str], list[tuple[int, int, int]]] = {}  # (label, placed, assumed) -> stages
    kinds = {k[0]: k[4] for k in group_kinds(c)}
    for s in range(len(stage_pools)):
        kept: dict[str, GroupSpan] = {}
        for field, (label, span) in a.spans[s].items():
            other = base.spans[s].get(field)
            floor = other[1].worst if other is not None else span.assumed
            if collective_cost(span.worst, kinds[field]) > collective_cost(floor, kinds[field]) * (1 + SAME):
                kept[field] = span
                key = (label, describe(span.worst), describe(span.assumed))
                notes.setdefault(key, []).append((s, span.worse_groups, span.groups))
        ring = _worse_tier(a.rings[s], base.rings[s]) if base is not a else None
        send = _worse_tier(a.sends[s], base.sends[s]) if base is not a else None
        if ring is not None:
            notes.setdefault(("CP ring", TIER_WORDS.get(ring.name, ring.name), ""), []).append((s, 0, 0))
        sf = StageFabric(cp_ring=ring, pp=send, **{f: span.worst for f, span in kept.items()})
        fabric.append(None if sf.empty else sf)
    degraded = [
        _group_note(label, placed, assumed, stages, tp_domains, c) for (label, placed, assumed), stages in notes.items()
    ]
    if base is not a:
        worse_hops = []
        for h, b in zip(a.hops, base.hops, strict=True):
            if h.tier is None:
                continue
            tiers = a.units[stage_pools[h.hop.stage].name].tiers
            base_tier = tiers[b.tier] if b.tier is not None else None
            if _worse_tier(tiers[h.tier], base_tier) is not None:
                worse_hops.append(h)
        degraded += _hop_notes(worse_hops, len(a.hops), a.units, stage_pools, n)
    placement = Placement(
        world_size=len(a.ranks.host),
        tp=c.tp,
        gpus_per_stage=n,
        hosts=_hosts(a.ranks, n),
        tp_domains=tp_domains,
        hops=[h.hop for h in a.hops],
        degraded=degraded,
        idle_gpus=_idle(a.ranks, stage_pools),
    )
    return PlacementOutcome(placement, tuple(fabric) if any(f is not None for f in fabric) else None)


def _idle(ranks: _Ranks, pools: Sequence[NodePool]) -> int:
    """GPUs of the hosts the plan uses that no rank runs on."""
    g = {p.name: p.gpus_per_node for p in pools}
    _, counts = ranks.runs()
    return sum(g[h.pool] for h in ranks.hosts) - int(counts.sum())


def _stages_text(stages: list[tuple[int, int, int]]) -> str:
    names = ", ".join(str(s) for s, _, _ in stages[:6]) + (", ..." if len(stages) > 6 else "")
    return f"stage{'s' if len(stages) > 1 else ''} {names}"


def _group_note(
    label: str, placed: str, assumed: str, stages: list[tuple[int, int, int]], tp_domains: list[str], c: ParallelConfig
) -> str:
    where = _stages_text(stages)
    if label == "CP ring":
        return f"CP ring neighbours of {where} meet over {placed} only; priced so"
    worse = sum(k for _, k, _ in stages)
    total = sum(g for _, _, g in stages)
    text = f"{label} groups of {where}: {worse} of {total} span {placed} where the plan priced {assumed}"
    if label == "TP":
        split = [d for d in tp_domains if " + " in d]
        text += f" (split across NVLink domains: {'; '.join(split[:3])}{'; ...' if len(split) > 3 else ''})"
        text += "; the healthy nodes left in those domains are too few for whole TP groups"
    return text + "; priced as placed"


def _hop_notes(
    hops: list[_Hop], total: int, units: dict[str, RankUnits], pools: Sequence[NodePool], n: int
) -> list[str]:
    """One sentence per kind of shortfall of the pipeline sends (across the spine; out of the NVLink domain the
    cost model assumed), naming the boundaries."""
    spine: list[_Hop] = []
    domain: dict[tuple[str, str], list[_Hop]] = {}  # (placed tier, assumed tier) -> hops
    for h in hops:
        if h.tier is None:
            continue
        tiers = units[pools[h.hop.stage].name].tiers
        assumed = net.neighbour_tier(tiers, n)
        if _if_worse(tiers[h.tier], assumed) is None:
            continue
        if h.hop.tier == "inter-pod":
            spine.append(h)
        else:
            domain.setdefault((h.hop.tier, assumed.name), []).append(h)
    out = []
    if spine:
        leaves = list(dict.fromkeys(leaf for h in spine for leaf in h.hop.leaves))
        out.append(
            f"pipeline sends {_boundaries(spine, total)} cross the spine (leaf switches {_names(leaves)}): the "
            "pipeline's stages do not fit under one leaf switch's healthy nodes; priced as placed"
        )
    for (placed_name, assumed_name), group in domain.items():
        domains = list(dict.fromkeys(d for h in group for d in h.domains))
        out.append(
            f"pipeline sends {_boundaries(group, total)} leave their NVLink domain for "
            f"{TIER_WORDS.get(placed_name, placed_name)} (domains {_names(domains)}), where the plan priced "
            f"{TIER_WORDS.get(assumed_name, assumed_name)}: neighbouring stages do not fit in one domain's healthy "
            "GPUs; priced as placed"
        )
    return out


def _boundaries(hops: list[_Hop], total: int) -> str:
    names = [f"{h.hop.stage}->{h.to}" for h in hops]
    text = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return text + (f" ({len(names)} of {total} boundaries)" if len(names) > 1 else "")


def _names(items: list[str], most: int = 4) -> str:
    return " / ".join(items[:most]) + (" / ..." if len(items) > most else "")
