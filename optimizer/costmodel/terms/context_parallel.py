"""Context-parallel communication of one layer per micro-batch [formulas C5; NB hybrid-context-parallel]."""

from __future__ import annotations

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import overlapped
from optimizer.costmodel.constants import BF16_BYTES


def cp_exposed(
    tiers: tuple[net.Tier, ...],
    cp_comm: str,
    cp: int,
    tp: int,
    mbs: int,
    seq_len: int,
    q_dim: int,
    kv_dim: int,
    full_recompute: bool,
    t_attn: float,
    t_attn_bwd: float,
    levels: tuple[net.Level, ...] | None = None,
    ring: net.Tier | None = None,
) -> float:
    """Context-parallel communication of one layer per micro-batch, forward and backward, by kind
    (ParallelConfig.cp_comm), seconds. CP ranks lie tp apart (rank order tp - cp - dp).
    - p2p: K and V blocks of s/cp tokens pass cp - 1 hops forward, twice that backward (K, V and their
      gradients), hidden behind the attention steps when those are longer [formulas C5; NB
      hybrid-context-parallel; TE AttnFuncWithCPAndKVP2P].
    - allgather: K and V gathered before the attention, exposed; the backward gathers them again and
      reduce-scatters their gradients [TE AttnFuncWithCPAndKVAllGather: 'KV all-gather between CP ranks is
      exposed'; Llama 3 report §3.3.2].
    - a2a: all-to-alls of Q, K, V before and of the output after the attention, and of their gradients in the
      backward, exposed [TE AttnFuncWithCPAndQKVOA2A; DeepSpeed-Ulysses, Jacobs et al. 2023].
    A fully recomputed layer runs its forward communication again. `levels` / `ring`: the group's levels and the
    ring neighbours' tier as placed (costmodel/placed_fabric.py), where they differ from the tiers'."""
    local = mbs * (seq_len / cp) * BF16_BYTES / tp  # bytes per unit of width of this rank's tokens
    again = 1 if full_recompute else 0
    if cp_comm == "p2p":
        tier = ring if ring is not None else net.neighbour_tier(tiers, tp)
        hops = (cp - 1) * net.p2p(tier.bw, tier.network, local * 2 * kv_dim)  # K and V
        fwd = overlapped(hops, max(0.0, hops - t_attn))
        return (1 + again) * fwd + overlapped(2 * hops, max(0.0, 2 * hops - t_attn_bwd))
    lv = levels if levels is not None else net.group_levels(tiers, cp, tp)
    if cp_comm == "allgather":
        gather = net.all_gather(lv, cp * local * 2 * kv_dim)
        return (1 + again) * gather + 2 * gather
    qkv = net.all_to_all(lv, local * (q_dim + 2 * kv_dim))
    out = net.all_to_all(lv, local * q_dim)
    return (1 + again) * (qkv + out) + (qkv + out)
