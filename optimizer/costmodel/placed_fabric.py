"""What a placement gives one pipeline stage's communication groups, where it is worse than the tiers assume.

The cost model costs a group of `size` ranks `stride` apart by the fabric levels it spans (network.group_levels),
assuming the stage's ranks start at a unit boundary of every tier and fill healthy GPUs in order. A placement on
real hosts may not give that: drained nodes leave an NVLink domain too small for a whole TP group, a pipeline
stage straddles two leaf switches. optimizer/placement derives, per stage, the levels its worst group of each kind
actually spans and hands them here; the stage then prices those instead (None: as the tiers say).
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel import network as net


@dataclass(frozen=True, slots=True)
class StageFabric:
    """The levels one stage's slowest group of each kind spans as placed; None where the placement gives what
    network.group_levels / neighbour_tier assume."""

    tp: tuple[net.Level, ...] | None = None
    """The tensor-parallel group (tp ranks, 1 apart)."""
    cp: tuple[net.Level, ...] | None = None
    """The context-parallel group (cp ranks, tp apart; all-gather and all-to-all kinds)."""
    cp_ring: net.Tier | None = None
    """The tier between context-parallel ring neighbours (the p2p kind)."""
    dp: tuple[net.Level, ...] | None = None
    """The dense data-parallel group (dp x cp ranks, tp apart)."""
    ep: tuple[net.Level, ...] | None = None
    """The expert-parallel group (ep ranks, etp apart)."""
    edp: tuple[net.Level, ...] | None = None
    """The expert data-parallel group (edp ranks, etp x ep apart)."""
    pp: net.Tier | None = None
    """The tier of the stage's pipeline sends to its neighbours on the same pool (the slowest of them)."""

    @property
    def empty(self) -> bool:
        """Nothing differs from the tiers' assumption."""
        return all(v is None for v in (self.tp, self.cp, self.cp_ring, self.dp, self.ep, self.edp, self.pp))


PlacedFabric = tuple[StageFabric | None, ...]
"""One entry per pipeline stage (None: the stage is priced as the tiers say)."""
