"""Collective and point-to-point costs on a tiered fabric.

A group of `size` ranks whose members are `stride` GPUs apart (Megatron rank order: tp fastest, then cp, dp, pp)
spans some levels of the fabric: the NVLink domain, the node's PCIe, the NICs inside a pod, the oversubscribed
links between pods. Each level it spans is costed with its own bandwidth and hop latency; large collectives are
hierarchical (reduce-scatter inside, all-reduce across, all-gather inside) [formulas C7], so the bytes that cross
a level shrink by the members below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from optimizer.costmodel.constants import NCCL_PROTOCOLS, NIC_EFFICIENCY, NVLINK_EFFICIENCY, PCIE_EFFICIENCY
from optimizer.spec.calibration import IDENTITY, PoolCalibration
from optimizer.spec.cluster_spec import PCIE_GBYTES_PER_S, ClusterSpec, IntraNodeFabric, NodePool

INF = float("inf")


@dataclass(frozen=True, slots=True)
class Tier:
    """A fabric level: units of `unit` GPUs joined at `bw` bytes/s per GPU (bus bandwidth)."""

    unit: float
    bw: float
    network: bool
    name: str


@dataclass(frozen=True, slots=True)
class Level:
    """The part of a group inside one tier: `members` sub-groups joined at `bw`."""

    members: int
    bw: float
    network: bool
    name: str


def cluster_tiers(cluster: ClusterSpec, pool: NodePool) -> tuple[Tier, ...]:
    """The tiers of a pool of `cluster`, with the cluster's calibration applied (memoised per pool object)."""
    cal = cluster.calibration_of(pool)
    hit = cluster.tier_cache.get(id(pool))
    if hit is not None and hit[0] is pool and hit[1] is cal:
        return hit[2]  # type: ignore[return-value]
    tiers = pool_tiers(pool, cluster.fabric_of(pool), cal)
    cluster.tier_cache[id(pool)] = (pool, cal, tiers)
    return tiers


def pool_tiers(pool: NodePool, fabric: IntraNodeFabric, cal: PoolCalibration = IDENTITY) -> tuple[Tier, ...]:
    """The tiers of a pool, innermost first. `cal` scales the scale-up (NVLink, PCIe) and NIC bandwidths by the
    pool's fitted factors [issue 14]."""
    n = pool.gpus_per_node
    pcie = PCIE_GBYTES_PER_S[fabric.pcie_gen or 4] * 1e9 * PCIE_EFFICIENCY * cal.intra_node
    nic = pool.inter_node.gbytes_per_s_per_node * 1e9 / n * NIC_EFFICIENCY * cal.network
    tiers: list[Tier] = []
    domain = fabric.domain_size or 1
    if fabric.kind == "nvlink" and fabric.gbytes_per_s and domain > 1:
        tiers.append(Tier(domain, fabric.gbytes_per_s * 1e9 * NVLINK_EFFICIENCY * cal.intra_node, False, "nvlink"))
    if domain < n:
        tiers.append(Tier(n, pcie, False, "pcie"))
    scale_up = max(n, domain)
    if nic <= 0:
        nic = 1.0  # no NICs: crossing nodes is effectively impossible; keep finite so costs say so
    if pool.pod_size is not None and pool.oversubscription > 1.0:
        tiers.append(Tier(max(scale_up, pool.pod_size * n), nic, True, "network"))
        tiers.append(Tier(INF, nic / pool.oversubscription, True, "inter-pod"))
    else:
        tiers.append(Tier(INF, nic, True, "network"))
    return tuple(tiers)


@lru_cache(maxsize=4096)
def group_levels(tiers: tuple[Tier, ...], size: int, stride: int) -> tuple[Level, ...]:
    """Split a group of `size` ranks, `stride` GPUs apart, over the tiers it spans (levels with 1 member dropped)."""
    levels: list[Level] = []
    below = 1
    for tier in tiers:
        # A tier of `unit` GPUs holds whole groups only when the group's span divides it; otherwise the worst group
        # straddles two units and only gcd(size, unit/stride) of its members share one (tp=3 on 8-GPU nodes).
        inside = size if tier.unit == INF else math.gcd(size, max(1, int(tier.unit // stride)))
        if inside > below:
            levels.append(Level(inside // below, tier.bw, tier.network, tier.name))
            below = inside
        if below >= size:
            break
    return tuple(levels)


@lru_cache(maxsize=16384)
def _time(
    levels: tuple[Level, ...], nbytes: float, steps_per_member: float, volume: float, tree: bool = False
) -> float:
    """Cheapest-protocol time of a collective over a group spanning `levels`.

    Bytes: per level with g members, volume*(g-1)/g of the bytes still in flight at that level over its bandwidth;
    inner levels shrink the bytes by g (hierarchical, or NCCL's multi-channel rings, one NIC per channel: the same
    bus bandwidth [formulas C7]). Latency: NCCL's ring runs steps_per_member*(n-1) steps over all n ranks, of which
    steps_per_member*(nodes-1) cross the network [NC tuning.cc ring latency]; an all-reduce may take the tree
    instead, 2*((n/nodes - 1) intra + log2(nodes) network) hops [NC tuning.cc tree latency], when it is cheaper.
    """
    if not levels:
        return 0.0
    n = nodes = 1
    for lv in levels:
        n *= lv.members
        if lv.network:
            nodes *= lv.members
    best = INF
    for base, intra_hop, net_hop, share in NCCL_PROTOCOLS:
        net_steps = steps_per_member * (nodes - 1)
        intra_steps = steps_per_member * (n - 1) - net_steps
        lat = intra_steps * intra_hop + net_steps * net_hop
        if tree and nodes > 1:
            lat = min(lat, 2 * ((n // nodes - 1) * intra_hop + math.log2(nodes) * net_hop))
        t = base + lat
        remaining = nbytes
        for lv in levels:
            g = lv.members
            t += volume * (g - 1) / g * remaining / (lv.bw * share)
            remaining /= g
        best = min(best, t)
    return best


def all_reduce(levels: tuple[Level, ...], nbytes: float) -> float:
    """Ring all-reduce of an nbytes buffer: 2(n-1)/n of it crosses each link [NT PERFORMANCE.md]."""
    return _time(levels, nbytes, 2.0, 2.0, True)


def all_gather(levels: tuple[Level, ...], nbytes: float) -> float:
    """All-gather (or reduce-scatter) whose full buffer is nbytes: (n-1)/n of it crosses each link [NT]."""
    return _time(levels, nbytes, 1.0, 1.0)


reduce_scatter = all_gather


@lru_cache(maxsize=4096)
def all_to_all(levels: tuple[Level, ...], nbytes: float, network_scale: float = 1.0) -> float:
    """All-to-all where each rank sends nbytes in all: the share that leaves each level crosses its links at once
    [NT: busbw factor (n-1)/n]; the slowest level bounds the time. `network_scale` scales what crosses the network
    levels (hierarchical MoE dispatch sends a token once per node: costmodel/ep_dispatch.py)."""
    if not levels:
        return 0.0
    best = INF
    size = 1
    for lv in levels:
        size *= lv.members
    for base, intra_hop, net_hop, share in NCCL_PROTOCOLS:
        worst = 0.0
        inner = 1
        for lv in levels:
            inner *= lv.members
            leaving = (inner - inner // lv.members) / size  # peers in this level but outside the level below
            hop = net_hop if lv.network else intra_hop
            sent = nbytes * leaving * (network_scale if lv.network else 1.0)
            worst = max(worst, base + hop + sent / (lv.bw * share))
        best = min(best, worst)
    return best


def p2p(tier_bw: float, network: bool, nbytes: float) -> float:
    """One point-to-point send over a link of tier_bw bytes/s."""
    base, intra_hop, net_hop, _ = NCCL_PROTOCOLS[2]
    return base + (net_hop if network else intra_hop) + nbytes / tier_bw


def neighbour_tier(tiers: tuple[Tier, ...], stride: int) -> Tier:
    """The innermost tier that holds two GPUs `stride` apart."""
    for tier in tiers:
        if tier.unit > stride:
            return tier
    return tiers[-1]
