"""The fabric levels a placement's groups actually span, against what the cost model's tiers assume.

network.group_levels costs a group of `size` ranks `stride` apart as if every tier's units were filled in rank order
from a unit boundary: a unit of U GPUs holds gcd(size, U / stride) members of each group. On real hosts the unit of a
tier is a named thing (the NVLink domain, the host, the leaf switch), and a group's members in each are counted:
the group spans, at each tier, the greatest common divisor of its members per unit there (the same rule
group_levels applies to a group that straddles units). The slowest group of each kind in a stage is what the stage
waits for; where it is slower than the tiers' assumption, the stage prices it (costmodel/placed_fabric.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from optimizer.costmodel import network as net

IntArray = npt.NDArray[np.int64]

# Buffer size at which two level sets are compared (which group is slowest, and whether it is slower than the tiers
# assume): a mid-sized collective where both bandwidth and hops count; the estimate then prices the chosen levels at
# each collective's own size.
COMPARE_BYTES = 64e6
# Relative margin under which two costs are the same (rounding).
SAME = 1e-9

TIER_WORDS = {"nvlink": "NVLink", "pcie": "PCIe", "network": "the network", "inter-pod": "the spine"}


@dataclass(frozen=True, slots=True)
class RankUnits:
    """Per rank of one stage, the unit it occupies at each tier of its pool (same order as the tiers)."""

    tiers: tuple[net.Tier, ...]
    units: tuple[IntArray, ...]


def describe(levels: tuple[net.Level, ...]) -> str:
    """'4 over NVLink x 2 over the leaf's network' (one member when the group is one rank)."""
    if not levels:
        return "one GPU"
    return " x ".join(f"{lv.members} over {TIER_WORDS.get(lv.name, lv.name)}" for lv in levels)


def collective_cost(levels: tuple[net.Level, ...], all_to_all: bool) -> float:
    """The comparison cost of a level set: an all-gather (or all-to-all) of COMPARE_BYTES."""
    return net.all_to_all(levels, COMPARE_BYTES) if all_to_all else net.all_gather(levels, COMPARE_BYTES)


def _levels(tiers: tuple[net.Tier, ...], inside: tuple[int, ...], size: int) -> tuple[net.Level, ...]:
    """Levels from the members a group has in one unit of each tier (as network.group_levels builds them); a tier
    whose count is not a multiple of the one below adds nothing (the group gains no whole sub-groups there)."""
    out: list[net.Level] = []
    below = 1
    for tier, k in zip(tiers, inside, strict=True):
        members = size if tier.unit == net.INF else k
        if members > below and members % below == 0:
            out.append(net.Level(members // below, tier.bw, tier.network, tier.name))
            below = members
        if below >= size:
            break
    return tuple(out)


def group_ids(n: int, size: int, stride: int) -> IntArray:
    """Per rank of a stage of n ranks, the index of its group of `size` ranks `stride` apart."""
    i = np.arange(n, dtype=np.int64)
    return (i // (stride * size)) * stride + i % stride


def placed_levels(ru: RankUnits, size: int, stride: int) -> tuple[IntArray, list[tuple[net.Level, ...]]]:
    """Per group of the stage, the index of its level set in the returned list of distinct level sets."""
    n = len(ru.units[0])
    gid = group_ids(n, size, stride)
    groups = n // size
    inside = np.empty((groups, len(ru.tiers)), dtype=np.int64)
    for k, unit in enumerate(ru.units):
        span = int(unit.max()) + 1
        uniq, counts = np.unique(gid * span + unit, return_counts=True)
        owner = uniq // span
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        inside[:, k] = np.gcd.reduceat(counts, starts)
    rows, which = np.unique(inside, axis=0, return_inverse=True)
    sets = [_levels(ru.tiers, tuple(int(x) for x in row), size) for row in rows]
    return which.reshape(-1), sets


@dataclass(frozen=True, slots=True)
class GroupSpan:
    """How one kind of group of a stage is placed, against the tiers' assumption."""

    worst: tuple[net.Level, ...]
    assumed: tuple[net.Level, ...]
    worse_groups: int
    groups: int

    @property
    def worse(self) -> bool:
        return self.worse_groups > 0


def group_span(ru: RankUnits, size: int, stride: int, all_to_all: bool = False) -> GroupSpan:
    """The slowest group of `size` ranks `stride` apart in the stage, and how many groups are slower than the
    tiers assume."""
    assumed = net.group_levels(ru.tiers, size, stride)
    n = len(ru.units[0])
    if size <= 1:
        return GroupSpan(assumed, assumed, 0, n)
    which, sets = placed_levels(ru, size, stride)
    base = collective_cost(assumed, all_to_all)
    costs = [collective_cost(s, all_to_all) for s in sets]
    slow = int(np.argmax(costs))
    worse = [k for k, cost in enumerate(costs) if cost > base * (1 + SAME)]
    count = int(np.isin(which, worse).sum()) if worse else 0
    return GroupSpan(sets[slow] if worse else assumed, assumed, count, len(which))


def shared_tier(ru_a: RankUnits, a: IntArray, b: IntArray) -> int:
    """The outermost tier index (of ru_a's tiers) that a pair of ranks (a[i], b[i]) first shares, worst over the
    pairs; `a` and `b` index the stage-independent unit arrays given as ru_a (the whole pool's ranks)."""
    worst = 0
    pending = np.ones(len(a), dtype=bool)
    for k, unit in enumerate(ru_a.units):
        same = unit[a] == unit[b]
        if ru_a.tiers[k].unit == net.INF:
            same = np.ones(len(a), dtype=bool)
        newly = pending & same
        if newly.any():
            worst = k
        pending &= ~same
        if not pending.any():
            break
    return worst
