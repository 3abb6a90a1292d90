"""FLOPs and memory traffic of one transformer layer, and how fast a GPU turns them into time."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from itertools import pairwise

from optimizer.costmodel.constants import (
    FLASH_ATTENTION_EFFICIENCY,
    FLASH_ATTENTION_FALLBACK_FAMILY,
    FLASH_ATTENTION_LENGTH_CURVE,
    FLASH_ATTENTION_LENGTHS,
    FLASH_ATTENTION_REFERENCE_LENGTH,
    FP8_MAMF_RATIO,
    FRAMEWORK_FACTOR,
    FRAMEWORK_FACTOR_DEFAULT,
    GEMM_DEPTH_HALF,
    GEMM_SIZE_CURVE,
    HBM_EFFICIENCY,
    OVERLAP_COMPUTE_SLOWDOWN,
    ROOFLINE_SMOOTHING_P,
)
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.model_spec import ModelSpec

# Output tile (rows, cols) of the tensor-core GEMM kernels: 128x128 through Ampere [NVIDIA DL Performance Guide,
# "Matrix Multiplication Background"]; Hopper's warp-group MMA kernels favour 128x256 tiles [CUTLASS 3.x
# hopper_warp_specialized_gemm default TileShape; H100 whitepaper "Thread Block Clusters"].
GEMM_TILES: dict[str, tuple[int, int]] = {
    "hopper": (128, 256),
    "blackwell": (128, 256),
    "blackwell-ultra": (128, 256),
}
GEMM_TILE_DEFAULT = (128, 128)


@dataclass(frozen=True, slots=True)
class LayerFlops:
    """Forward FLOPs per token of one layer (full, not yet divided by TP). [MLM num_floating_point_operations]"""

    gemm: float  # projections and MLP: 2h(q+2kv) + 2qh + 2*mats*h*f (MoE: top_k experts + shared + router)
    attn_per_ctx: float  # attention core per token per context token: QK^T + AV = 2q + 2*a*d_v (x ctx)
    largest_gemm_per_token: float  # FLOPs per token of the biggest single GEMM (sets the size efficiency)
    largest_gemm_cols: int  # output width of that GEMM before the TP split (fused gate+up for SwiGLU)
    gemm_groups: float  # independent GEMMs sharing it (routed experts: top_k of num_experts per token)
    mlp: float = 0.0  # the MLP's share of gemm: dense MLP, or routed experts + shared experts + router
    shared: float = 0.0  # the shared experts' share of gemm
    mla_up: float = 0.0  # MLA's Q and KV up-projections (recomputed by the mla_up_proj module)
    routed: float = 0.0  # the routed experts' share of gemm (top_k experts per token)


_FLOPS_MEMO: dict[tuple[int, bool], tuple[ModelSpec, LayerFlops]] = {}


def layer_flops(model: ModelSpec, moe_layer: bool) -> LayerFlops:
    """Per-token forward FLOPs of one layer [formulas B; MLM training.py] (memoised per model object: every
    cost-model context of a search asks for the same two)."""
    hit = _FLOPS_MEMO.get((id(model), moe_layer))
    if hit is not None and hit[0] is model:
        return hit[1]
    if len(_FLOPS_MEMO) > 256:
        _FLOPS_MEMO.clear()
    lf = _layer_flops(model, moe_layer)
    _FLOPS_MEMO[(id(model), moe_layer)] = (model, lf)
    return lf


def _layer_flops(model: ModelSpec, moe_layer: bool) -> LayerFlops:
    h = model.hidden_size
    mats = 3 if model.activation == "swiglu" else 2
    if model.mla is not None:
        m, a = model.mla, model.num_attention_heads
        qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
        q_proj = 2 * (h * m.q_lora_rank + m.q_lora_rank * a * qk_head) if m.q_lora_rank else 2 * h * a * qk_head
        kv_proj = 2 * (
            h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
        )
        attn_proj = q_proj + kv_proj + 2 * a * m.v_head_dim * h
        attn_core = 2 * a * qk_head + 2 * a * m.v_head_dim
        mla_up = 2 * m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
        mla_up += 2 * m.q_lora_rank * a * qk_head if m.q_lora_rank else 0
    else:
        mla_up = 0
        q, kv = model.q_dim, model.kv_heads * model.head_size
        attn_proj = 2 * h * (q + 2 * kv) + 2 * q * h
        attn_core = 4 * q
    if moe_layer and model.moe is not None:
        moe = model.moe
        mlp = moe.top_k * 2 * mats * h * moe.expert_ffn_hidden_size + 2 * mats * h * moe.shared_ffn
        mlp += 2 * h * moe.num_experts  # router
        shared = 2 * mats * h * moe.shared_ffn
        routed = moe.top_k * 2 * mats * h * moe.expert_ffn_hidden_size
        biggest = 2 * h * moe.expert_ffn_hidden_size * moe.top_k
        cols = (mats - 1) * moe.expert_ffn_hidden_size
        groups = moe.num_experts / moe.top_k
    else:
        mlp = 2 * mats * h * model.ffn_hidden_size
        biggest = 2 * h * model.ffn_hidden_size
        cols, groups = (mats - 1) * model.ffn_hidden_size, 1.0
        shared = routed = 0
    return LayerFlops(
        gemm=attn_proj + mlp,
        attn_per_ctx=attn_core,
        largest_gemm_per_token=max(biggest, 2 * h * h),
        largest_gemm_cols=cols,
        gemm_groups=groups,
        mlp=mlp,
        shared=shared,
        mla_up=mla_up,
        routed=routed,
    )


def elementwise_bytes_per_token(model: ModelSpec, moe_layer: bool, dropout: bool) -> tuple[float, float]:
    """HBM bytes per token of one layer's memory-bound forward kernels: (parts sharded by SP, parts always /tp).

    Norms read and write h (2 x 4h bytes); residual adds read 2h and write h (2 x 6h), plus a 1-byte dropout mask
    each; the activation reads its input(s) and writes f (GeLU 4f, SwiGLU 6f bytes) [derived from K22 §4]."""
    h = model.hidden_size
    width, permutation = mlp_width_and_permutation(model, moe_layer)
    replicated = 8 * h + 12 * h + (2 * h if dropout else 0) + permutation
    sharded = (6 if model.activation == "swiglu" else 4) * width
    return replicated, sharded


def mlp_width_and_permutation(model: ModelSpec, moe_layer: bool) -> tuple[float, float]:
    """A layer's MLP width per token (an MoE layer: its top_k experts and the shared ones) and the HBM bytes per
    token of routing the tokens to the experts and back (read and write of top_k bf16 copies, both ways)."""
    if moe_layer and model.moe is not None:
        width = model.moe.top_k * model.moe.expert_ffn_hidden_size + model.moe.shared_ffn
        return width, 4.0 * model.moe.top_k * model.hidden_size * 2
    return model.ffn_hidden_size, 0.0


def gemm_efficiency(
    gpu: GPUSpec, flops_per_gemm: float, fp8: bool, rows: float = 1e9, cols: float = 1e9, groups: float = 1.0
) -> float:
    """Fraction of peak a GEMM of this size reaches in a real step (rows x cols output, split into `groups`
    independent GEMMs such as the experts of a grouped MoE GEMM)."""
    eff = gpu.mamf_fraction * FRAMEWORK_FACTOR.get(gpu.family, FRAMEWORK_FACTOR_DEFAULT)
    if fp8:
        eff *= FP8_MAMF_RATIO
    return eff * size_factor(flops_per_gemm) * wave_utilization(gpu, rows / groups, cols, groups)


def depth_factor(k: float) -> float:
    """Share of its deep-K rate a GEMM of reduction depth `k` reaches (GEMM_DEPTH_HALF)."""
    return k / (k + GEMM_DEPTH_HALF)


def expert_gemm_efficiency(
    gpu: GPUSpec,
    fp8: bool,
    rows_per_expert: float,
    hidden: int,
    cols: float,
    local_experts: int,
    streams: int | None,
    depth: float,
) -> float:
    """Fraction of peak the routed experts' GEMMs reach when each local expert is its own GEMM of
    `rows_per_expert` x `cols` over `hidden` (fc1; fc2 has the same FLOPs per row over the transposed shape), and
    `streams` of them run at once (None: one grouped kernel over all local experts) [frameworks.expert_gemm_streams].
    The size factor follows the work in flight: one expert's GEMM per stream, or the whole grouped kernel. Tile-wave
    quantization is left out: for few-tile shapes cuBLAS and the grouped kernels split K to fill the SMs (DeepGEMM's
    README: 64- and 128-row FP8 GEMMs reach 290-530 TFLOP/s on H100, where whole 128 x 256 tiles would cap them
    near 100). What shrinks with the rows per expert is the arithmetic intensity: the weights each expert streams
    (CostContext.gemm_streaming, roofline_time). `depth` is fc2's reduction depth (the expert FFN width on this
    GPU); fc2 runs at depth_factor(depth) / depth_factor(hidden) of fc1's rate, the routed FLOPs split between
    them as fc1's cols to depth (an expert split over TP, etp > 1, shortens it)."""
    at_once = local_experts if streams is None else max(1, min(streams, local_experts))
    eff = gpu.mamf_fraction * FRAMEWORK_FACTOR.get(gpu.family, FRAMEWORK_FACTOR_DEFAULT)
    if fp8:
        eff *= FP8_MAMF_RATIO
    eff *= size_factor(2.0 * max(rows_per_expert, 1.0) * hidden * cols * at_once)
    rel = min(1.0, depth_factor(depth) / depth_factor(hidden))
    fc2_share = depth / (cols + depth)
    return eff / ((1.0 - fc2_share) + fc2_share / rel)


def roofline_time(compute_s: float, memory_s: float) -> float:
    """A GEMM's time from its compute time and its device-memory time: the p-norm of the two with
    ROOFLINE_SMOOTHING_P (2), not their maximum. Near the ridge point neither hides the other fully: DeepGEMM's
    published H100 FP8 tables (README, grouped masked layout, N=4096 K=7168) fall from 1,288 TFLOP/s at 4,096
    rows per expert to 1,040 at 512 and 932 at 256 (0.81, 0.72); a maximum of the two predicts 0.96 and 0.94 there,
    the p = 2 norm 0.90 and 0.78 (fc2's shape N=7168 K=2048: measured 0.84, 0.75; p = 2 0.77, 0.65)."""
    p = ROOFLINE_SMOOTHING_P
    return float((compute_s**p + memory_s**p) ** (1.0 / p))


def wave_utilization(gpu: GPUSpec, rows: float, cols: float, groups: float = 1.0) -> float:
    """Share of SMs busy over a GEMM's waves of 128x128 output tiles (tile and wave quantization
    [NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background"])."""
    tr, tc = GEMM_TILES.get(gpu.family, GEMM_TILE_DEFAULT)
    tiles = max(1.0, groups) * math.ceil(max(rows, 1.0) / tr) * math.ceil(max(cols, 1.0) / tc)
    waves = math.ceil(tiles / gpu.sm_count)
    return tiles / (waves * gpu.sm_count)


# GEMM_SIZE_CURVE's segments as (upper x, log x0, 1 / (log x1 - log x0), y0, y1 - y0): size_factor runs for every
# layer of every candidate the search prices.
_SIZE_SEGMENTS = tuple(
    (x1, math.log(x0), 1.0 / (math.log(x1) - math.log(x0)), y0, y1 - y0)
    for (x0, y0), (x1, y1) in pairwise(GEMM_SIZE_CURVE)
)


def size_factor(flops: float) -> float:
    """Log-linear interpolation of GEMM_SIZE_CURVE."""
    curve = GEMM_SIZE_CURVE
    if flops >= curve[-1][0]:
        return curve[-1][1]
    if flops <= curve[0][0]:
        return curve[0][1]
    lf = math.log(flops)
    for x1, l0, inv, y0, dy in _SIZE_SEGMENTS:
        if flops <= x1:
            return y0 + (lf - l0) * inv * dy
    return curve[-1][1]


def hbm_time(gpu: GPUSpec, nbytes: float) -> float:
    """Seconds to stream nbytes through device memory."""
    return nbytes / (gpu.memory_tbps * 1e12 * HBM_EFFICIENCY)


def peak_flops(gpu: GPUSpec, fp8: bool) -> float:
    """Dense peak FLOP/s for the GEMM precision."""
    if fp8 and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    return gpu.bf16_tflops * 1e12


def overlapped(comm: float, exposed: float) -> float:
    """Time a collective of `comm` seconds adds to a step when all but `exposed` of it runs under compute: the
    exposed part plus the compute the hidden part slows [constants OVERLAP_COMPUTE_SLOWDOWN]."""
    return exposed + OVERLAP_COMPUTE_SLOWDOWN * max(0.0, comm - exposed)


def _flash_speed(curve: tuple[float, ...], length: float) -> float:
    """Log-linear interpolation of a FLASH_ATTENTION_LENGTH_CURVE row; flat beyond its longest length, and below
    its shortest the first segment's slope continued (an extrapolation, floored at a tenth of the first point)."""
    xs = FLASH_ATTENTION_LENGTHS
    if length <= xs[0]:
        slope = (curve[1] - curve[0]) / math.log(xs[1] / xs[0])
        return max(0.1 * curve[0], curve[0] - slope * math.log(xs[0] / max(length, 1.0)))
    for (x0, y0), (x1, y1) in pairwise(zip(xs, curve, strict=True)):
        if length <= x1:
            return y0 + (y1 - y0) * math.log(length / x0) / math.log(x1 / x0)
    return curve[-1]


def attention_generation(kernel: str, family: str) -> str:
    """The fused-attention kernel generation a GPU runs when `kernel` is asked for: FlashAttention-3 class kernels
    need Hopper or newer (wgmma / TMA), so Ampere runs fa2 [constants FLASH_ATTENTION_EFFICIENCY]."""
    return "fa2" if family == "ampere" else kernel


def flash_efficiency(kernel: str, family: str) -> tuple[float, float]:
    """(forward, backward) share of dense BF16 peak the fused attention core reaches at the reference length."""
    gen = attention_generation(kernel, family)
    table = FLASH_ATTENTION_EFFICIENCY[gen]
    return table.get(family, table[FLASH_ATTENTION_FALLBACK_FAMILY])


@functools.lru_cache(maxsize=4096)
def flash_length_factor(generation: str, seq_len: float, cp: int = 1, comm: str = "p2p") -> float:
    """The fused attention kernel's speed for this sequence length relative to the causal reference length that
    FLASH_ATTENTION_EFFICIENCY describes.

    Without context parallelism the kernel runs one causal sequence of `seq_len`; so does the all-to-all kind
    (`comm` a2a), which hands each rank whole heads over the full sequence [TE AttnFuncWithCPAndQKVOA2A]. With
    ring context parallelism and causal load balancing (each rank holds two chunks of s/2cp) the cp steps do equal
    work: the first is causal over the rank's s/cp tokens, the other cp - 1 run unmasked over half-blocks of s/2cp
    [TE context_parallel.py AttnFuncWithCPAndKVP2P; Megatron --cp-comm-type p2p]. The all-gather kind computes the
    same blocks for its two query chunks once K and V are gathered [TE AttnFuncWithCPAndKVAllGather]."""
    rows = FLASH_ATTENTION_LENGTH_CURVE[generation]
    ref = _flash_speed(rows[True], FLASH_ATTENTION_REFERENCE_LENGTH)
    if cp <= 1 or comm == "a2a":
        return _flash_speed(rows[True], seq_len) / ref
    local = seq_len / cp
    time = (1 / _flash_speed(rows[True], local) + (cp - 1) / _flash_speed(rows[False], local / 2)) / cp
    return 1 / (time * ref)
