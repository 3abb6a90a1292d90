"""Pipeline-parallel point-to-point sends and the pipeline bubble [formulas C3, D]."""

from __future__ import annotations

from optimizer.costmodel import network as net
from optimizer.costmodel.constants import BF16_BYTES


def pp_message_bytes(tokens: float, hidden_size: int, tp: int, scatter_gather: bool) -> float:
    """Bytes one rank sends per micro-batch across a stage boundary: the b*s*h bf16 activations (2 B each) forward,
    their gradient backward; with the scatter/gather optimisation each TP rank sends 1/tp of it [N21 §4.1]."""
    return tokens * hidden_size * BF16_BYTES / (tp if scatter_gather else 1)


def pp_hop(
    tiers: tuple[net.Tier, ...],
    next_tiers: tuple[net.Tier, ...] | None,
    gpus_per_stage: int,
    msg: float,
) -> float:
    """One send of `msg` bytes to the next stage, seconds. To a stage on another pool (`next_tiers`) it crosses
    the slower of the two pools' NICs; within a pool it takes the tier between ranks gpus_per_stage apart."""
    if next_tiers is not None:
        nic = min(tiers[-1].bw, next_tiers[-1].bw)
        return net.p2p(nic, True, msg)
    tier = net.neighbour_tier(tiers, gpus_per_stage)
    return net.p2p(tier.bw, tier.network, msg)


def pipeline_fill(schedule: str, vp: int, times: list[float], wgrads: list[float]) -> float:
    """The pipeline's fill and drain (the bubble) of one step, seconds, from each stage's per-micro-batch time
    F+B (B including W) and weight-gradient time W.

    1F1B/GPipe, unbalanced stages: the sum of the stage times less the slowest [A22 §5 eq. 2]. Interleaved: the
    fill/drain shrinks by v [N21 §2.2.2]. ZB-H1: each stage's share of the fill/drain is (F+B-W) instead of
    (F+B+W) [Q23 §3]; with t = F+B and w = W that is u = t - 2w, and the fill is the sum of u over the stages other
    than the one with the largest u."""
    if schedule == "interleaved-1f1b":
        return (sum(times) - max(times)) / vp
    if schedule == "zb-h1":
        u = [t - 2 * w for t, w in zip(times, wgrads, strict=True)]
        return sum(u) - max(u)
    return sum(times) - max(times)
