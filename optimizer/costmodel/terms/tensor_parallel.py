"""Tensor-parallel collectives of one transformer layer per micro-batch [formulas C2].

TP: 2 all-reduces forward, 2 backward, 2 more with full recompute, each of b*s*h activations [S19 §3]; with SP each
becomes reduce-scatter + all-gather of the same volume [K22 §4.2.2].
"""

from __future__ import annotations

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import overlapped
from optimizer.costmodel.constants import BF16_BYTES


def tp_in_nvlink_domain(levels: tuple[net.Level, ...]) -> bool:
    """Whether a TP group's levels are one NVLink domain (no PCIe, no NIC between its members)."""
    return len(levels) == 1 and levels[0].name == "nvlink"


def tp_collective(levels: tuple[net.Level, ...], tokens: float, hidden_size: int, sequence_parallel: bool) -> float:
    """One TP collective over a micro-batch's b*s*h bf16 activations (2 B each), seconds: an all-reduce, or with
    SP a reduce-scatter + all-gather of the same volume [K22 §4.2.2] (priced as two all-gathers [NT])."""
    msg = tokens * hidden_size * BF16_BYTES
    return 2 * net.all_gather(levels, msg) if sequence_parallel else net.all_reduce(levels, msg)


def tp_collective_counts(
    moe_layer: bool, expert_tp: int, full_recompute: bool, op_sac: bool, modules: frozenset[str]
) -> tuple[int, float]:
    """(forward, backward) TP collectives of one layer: 2 forward, 2 backward, 2 more with full recompute [S19 §3].

    An MoE layer whose experts are not tensor-parallel (etp = 1) has no TP collective around its MLP: the
    sequence-parallel shards are dispatched by the all-to-all instead [MLM moe token_dispatcher.py]. A checkpointed
    MLP (dense, or an MoE layer with tensor-parallel experts) gathers its input again; under torchtitan's op-level
    SAC the all-gathers are not in the save set, so the recompute gathers each input again (half the layer's)."""
    per_layer = 1 if moe_layer and expert_tp == 1 else 2
    n_fwd = per_layer
    n_bwd = float(per_layer + (per_layer if full_recompute else 0))
    if op_sac:
        n_bwd += per_layer / 2
    elif ("mlp" in modules and not moe_layer) or ("moe" in modules and per_layer == 2 and moe_layer):
        n_bwd += 1
    return n_fwd, n_bwd


def tp_exposed(
    one: float, n_fwd: int, n_bwd: float, t_gemm: float, tp: int, overlap: bool, share: float
) -> tuple[float, float]:
    """Exposed TP communication of one layer, (forward, backward + recompute), seconds; `one` is one collective.

    Overlap (`overlap`: the group sits in one NVLink domain and TP-comm overlap is on) hides TP traffic under the
    GEMMs, one chunk of tp left exposed (derived from [NB]): Transformer Engine's userbuffers (Megatron
    --tp-comm-overlap) and torchtitan's async TP use node-local symmetric memory [frameworks/capabilities.py];
    `share` is what the framework's overlap hides of what could hide. A group that spans PCIe or the NICs pays every
    collective in full on the tiers it crosses. The backward's GEMMs are 2x the forward's (dgrad + wgrad)."""
    if overlap:
        f_all, b_all = n_fwd * one, n_bwd * one
        f_min, b_min = max(f_all / tp, f_all - t_gemm), max(b_all / tp, b_all - 2 * t_gemm)
        return overlapped(f_all, f_all - share * (f_all - f_min)), overlapped(b_all, b_all - share * (b_all - b_min))
    return n_fwd * one, n_bwd * one
