"""Expert-parallel token dispatch of one MoE layer per micro-batch, and the host-launch gaps of an eager MoE layer
[formulas C6]. The network share of hierarchical dispatch (DeepEP / HybridEP) is costmodel/ep_dispatch.py."""

from __future__ import annotations

from math import prod

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import overlapped
from optimizer.costmodel.constants import BF16_BYTES, KERNEL_LAUNCH_S, KERNELS_PER_LAYER, MOE_EAGER_HOST_S
from optimizer.costmodel.ep_dispatch import deepep_network_share
from optimizer.spec.model_spec import MoESpec

# All-to-alls per MoE layer and micro-batch: dispatch + combine forward, and their gradients backward [formulas C6;
# MLM token_dispatcher.py]; a recomputed layer dispatches and combines once more before its backward.
EP_ALL_TO_ALLS = 4
EP_ALL_TO_ALLS_RECOMPUTED = 6


def ep_all_to_all(
    tiers: tuple[net.Tier, ...],
    moe: MoESpec,
    ep: int,
    expert_tp: int,
    tokens: float,
    sp_div: int,
    hidden_size: int,
    dispatch: str,
    again: bool,
    levels: tuple[net.Level, ...] | None = None,
) -> float:
    """EP all-to-all time of one MoE layer per micro-batch, seconds: dispatch + combine forward and again backward,
    top_k copies of each of this rank's tokens (`tokens` / `sp_div`, b*s*h bf16 activations) [formulas C6].

    The expert grid is ordered etp - ep - expert-dp, so an EP group's ranks lie etp apart [MLM parallel_state.py:
    expert RankGenerator(tp=etp, ep, dp, cp=1, order 'tp-cp-ep-dp-pp')]. Hierarchical dispatch (`dispatch` "deepep":
    DeepEP / HybridEP) sends a token once per destination node over the network and forwards it over NVLink there
    [costmodel/ep_dispatch.py]. A recomputed MoE layer (`again`: full recompute, or the moe module) dispatches and
    combines its tokens again before its backward: the checkpointed forward includes the token dispatcher [MLM
    transformer_layer.py full recompute checkpoints the whole layer; moe_layer.py moe_layer_recompute]. `levels`:
    the group's levels as placed (costmodel/placed_fabric.py), where they differ from the tiers'."""
    lv = levels if levels is not None else net.group_levels(tiers, ep, expert_tp)
    per_rank = moe.top_k * tokens / sp_div * hidden_size * BF16_BYTES
    scale = 1.0
    if dispatch == "deepep":
        scale = deepep_network_share(moe, prod(x.members for x in lv if x.network))
    return (EP_ALL_TO_ALLS_RECOMPUTED if again else EP_ALL_TO_ALLS) * net.all_to_all(lv, per_rank, scale)


def eager_launch_gaps(t_routed: float, host_rate: float = 1.0) -> tuple[float, float]:
    """(forward, backward) host-launch time an eager MoE layer exposes per micro-batch, seconds.

    After the dispatcher's device-to-host sync the GPU runs only what the host has issued since, so the host's issue
    time for the rest of the layer (MOE_EAGER_HOST_S, a third forward and two thirds backward) is exposed where the
    routed experts' GEMMs (`t_routed` forward, 2x backward) are shorter [constants.MOE_EAGER_HOST_S]. Full-iteration
    CUDA graphs replay it without the host. `host_rate` is the pool's calibrated host factor (issue time /
    host_rate)."""
    host = MOE_EAGER_HOST_S / host_rate
    return max(0.0, host / 3 - t_routed), max(0.0, 2 * host / 3 - 2 * t_routed)


def dense_launch_gaps(fwd: float, bwd: float, host_rate: float = 1.0) -> tuple[float, float]:
    """(forward, backward) host-issue time an eager dense layer exposes per micro-batch, seconds: the host issues
    the layer's kernels (KERNELS_PER_LAYER forward, twice as many backward, KERNEL_LAUNCH_S each) ahead of the GPU,
    which waits only where its own work on the layer (`fwd`, `bwd`) is shorter [constants KERNEL_LAUNCH_S]; this is
    what makes a small model on many GPUs slower than its FLOPs say. Zero for every layer whose forward takes more
    than ~50 us; CUDA graphs (per-layer or full-iteration) replay without the host."""
    issue = KERNELS_PER_LAYER * KERNEL_LAUNCH_S / host_rate
    return _exposed(fwd, issue), _exposed(bwd, 2 * issue)


# The host issues ahead of the GPU through the launch queue, so the two overlap; near the point where they take as
# long neither hides the other fully (as compute and memory near a roofline's ridge, compute.roofline_time). A
# p-norm with p = 4 is within 1.5% of their maximum once one is twice the other, and smooth, so that a calibration
# can see a host that is nearly exposed (assumed; the pool's host factor absorbs the exact shape). Where the GPU's
# work is HOST_HIDDEN_RATIO times the host's or more, the host is hidden outright (the p-norm would add under 0.1%).
HOST_SMOOTHING_P = 4.0
HOST_HIDDEN_RATIO = 4.0


def _exposed(gpu_s: float, host_s: float) -> float:
    """What a host issue time of `host_s` adds to `gpu_s` of GPU work."""
    if host_s <= 0.0 or gpu_s >= HOST_HIDDEN_RATIO * host_s:
        return 0.0
    p = HOST_SMOOTHING_P
    return float((gpu_s**p + host_s**p) ** (1.0 / p)) - gpu_s


def ep_overlapped(ep_raw: float, window_f: float, window_b: float) -> float:
    """Exposed EP all-to-all under combined 1F1B, seconds: the forward of one micro-batch merges with the backward
    of the previous, so the forward's dispatch + combine (half of `ep_raw`) run under the backward's compute
    (`window_b`) and the backward's under the forward's (`window_f`) ['Overlaps All-to-All with computation by
    merging FWD-BWD passes of adjacent microbatches', MLM moe/README.md]; what exceeds that compute stays exposed.
    The host-launch gaps of an eager layer count in the windows: the copy engines and NICs run while the SMs wait
    for the host."""
    half = ep_raw / 2
    return overlapped(half, max(0.0, half - window_b)) + overlapped(half, max(0.0, half - window_f))
