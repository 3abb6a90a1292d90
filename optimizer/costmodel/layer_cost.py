"""One layer's cost per micro-batch on one GPU [formulas B, C]: its compute (GEMMs, attention core, memory-bound
kernels, streaming, FP8 casts), its recompute, and its exposed TP / CP / EP communication and launch gaps. The cost
context (cost_context.py) caches it per pool; a stage (stage.py) adds up its layers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import (
    LayerFlops,
    attention_generation,
    elementwise_bytes_per_token,
    flash_efficiency,
    flash_length_factor,
    gemm_efficiency,
    hbm_time,
    peak_flops,
)
from optimizer.costmodel.fp8_casts import linear_io_per_token
from optimizer.costmodel.framework_runtime import FrameworkRuntime
from optimizer.costmodel.placed_fabric import StageFabric
from optimizer.costmodel.terms.context_parallel import cp_exposed
from optimizer.costmodel.terms.expert_parallel import (
    dense_launch_gaps,
    eager_launch_gaps,
    ep_all_to_all,
    ep_overlapped,
)
from optimizer.costmodel.terms.recompute import module_recompute, op_sac_recompute
from optimizer.costmodel.terms.tensor_parallel import (
    tp_collective,
    tp_collective_counts,
    tp_exposed,
    tp_in_nvlink_domain,
)
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import AttentionKernel
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# What a stage without a placement's own levels prices: every group as the tiers say.
NO_FABRIC = StageFabric()
# Flash attention's backward recomputes the scores: 2.5x the forward FLOPs [FlashAttention-2 paper §3.1.2].
FLASH_BWD_FLOP_RATIO = 2.5
# Unfused attention, bytes per score element: scale-mask-softmax 4 (bf16 in and out), with attention dropout 5 more
# (its mask and output) [K22 §4].
SOFTMAX_BYTES = 4
SOFTMAX_DROPOUT_BYTES = 4 + 5


@dataclass(slots=True, kw_only=True)
class LayerCost:
    """Per-micro-batch cost of one layer on one GPU, seconds."""

    fwd: float  # compute
    bwd: float  # compute
    wgrad: float  # weight-gradient part of bwd (zero-bubble W pass)
    recompute: float
    tp: float  # exposed TP comm, fwd + bwd + recompute
    cp: float
    ep: float
    tp_fwd: float
    launch: float = 0.0  # exposed host launch time of an eager MoE layer, fwd + bwd
    launch_fwd: float = 0.0


class LayerContext(Protocol):
    """What one layer's cost reads from its estimate's context (cost_context.CostContext)."""

    model: ModelSpec
    cluster: ClusterSpec
    w: TrainingWorkload
    c: ParallelConfig
    rt: FrameworkRuntime
    tokens: float
    fp8: bool
    causal: float
    attention_kernel: AttentionKernel
    eager_moe: bool
    eager_dense: bool

    def tiers(self, pool: NodePool) -> tuple[net.Tier, ...]: ...

    def gemm_times(self, gpu: GPUSpec, moe_layer: bool) -> tuple[float, float]: ...

    def gemm_streaming(self, gpu: GPUSpec, moe_layer: bool, t_rest: float, t_routed: float) -> tuple[float, float]: ...


@dataclass(frozen=True, slots=True)
class LayerCompute:
    """One layer's compute per micro-batch on one GPU, seconds."""

    fwd: float
    """Forward: GEMMs, their wait on device memory, attention core, memory-bound kernels."""
    bwd: float
    """Backward: 2x the GEMMs, their streaming, the attention backward, 2x the memory-bound kernels."""
    gemm: float
    """Forward GEMMs (the weight-gradient pass takes as long)."""
    rest: float
    """Forward GEMMs other than the routed experts'."""
    routed: float
    """Forward GEMMs of the routed experts."""
    attn: float
    """Attention core forward."""
    attn_bwd: float
    """Attention core backward."""
    elementwise: float
    """Norms, activations, residuals and dropout (HBM-bound)."""
    softmax: float
    """Unfused scale-mask-softmax and its dropout (zero with flash attention)."""


def layer_compute(
    ctx: LayerContext, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool, attention_rate: float = 1.0
) -> LayerCompute:
    """Compute time of one layer per micro-batch [formulas B]: GEMMs at their efficiency, the attention core (flash
    kernel or explicit softmax; `attention_rate` is the pool's calibrated attention factor), the HBM-bound kernels,
    the GEMMs' streaming and FP8 casts."""
    m, c, w = ctx.model, ctx.c, ctx.w
    tp, tokens = c.tp, ctx.tokens
    rows, cols = tokens, lf.largest_gemm_cols / tp
    eff16 = gemm_efficiency(gpu, tokens * lf.largest_gemm_per_token / tp, False, rows, cols, lf.gemm_groups)
    t_rest, t_routed = ctx.gemm_times(gpu, moe_layer)
    t_gemm = t_rest + t_routed
    attn_flops = tokens * lf.attn_per_ctx * w.seq_len * ctx.causal / tp
    t_attn = attn_flops / (peak_flops(gpu, False) * eff16)
    t_attn_bwd = 2.0 * t_attn  # explicit softmax: the two score GEMMs backward, as dense GEMMs
    if w.flash_attention:  # the fused kernel's own efficiency; backward recomputes the scores: 2.5x the FLOPs
        fa_fwd, fa_bwd = flash_efficiency(ctx.attention_kernel, gpu.family)
        gen = attention_generation(ctx.attention_kernel, gpu.family)
        length = flash_length_factor(gen, w.seq_len, c.cp, c.cp_comm)
        fa_fwd, fa_bwd = fa_fwd * length, fa_bwd * length
        t_attn = attn_flops / (peak_flops(gpu, False) * fa_fwd)
        t_attn_bwd = FLASH_BWD_FLOP_RATIO * attn_flops / (peak_flops(gpu, False) * fa_bwd)
    if attention_rate != 1.0:
        t_attn, t_attn_bwd = t_attn / attention_rate, t_attn_bwd / attention_rate
    repl, shard = elementwise_bytes_per_token(m, moe_layer, m.dropout)
    ew = tokens * (repl / (tp if c.sequence_parallel else 1) + shard / tp)
    softmax = 0.0
    if not w.flash_attention:  # scale-mask-softmax (4 B/elt) and dropout (5 B/elt) over a*s^2*b [K22 §4]
        per_score = SOFTMAX_DROPOUT_BYTES if m.dropout else SOFTMAX_BYTES
        softmax = tokens * m.num_attention_heads * w.seq_len / tp * per_score
    t_ew = hbm_time(gpu, ew)
    t_soft = hbm_time(gpu, softmax)
    stream_fwd, stream_bwd = ctx.gemm_streaming(gpu, moe_layer, t_gemm - t_routed, t_routed)
    cast_in, cast_grad = ctx.rt.fp8_cast_bytes if ctx.fp8 else (0.0, 0.0)
    if cast_in or cast_grad:  # FP8 operand casts as their own kernels (costmodel/fp8_casts.py)
        ins, outs = linear_io_per_token(m, moe_layer)
        stream_fwd += hbm_time(gpu, tokens * ins * cast_in / 2 / tp)
        stream_bwd += hbm_time(gpu, tokens * (ins * cast_in / 2 + outs * cast_grad) / tp)
    fwd = t_gemm + stream_fwd + t_attn + t_ew + t_soft
    # Backward: 2x the GEMM FLOPs (dgrad + wgrad) [formulas B]; flash attention's backward recomputes the
    # scores, 2.5x its forward [FlashAttention-2 paper §3.1.2 FLOP count]; memory-bound kernels ~2x.
    bwd = 2 * t_gemm + stream_bwd + t_attn_bwd + 2 * (t_ew + t_soft)
    return LayerCompute(
        fwd=fwd,
        bwd=bwd,
        gemm=t_gemm,
        rest=t_rest,
        routed=t_routed,
        attn=t_attn,
        attn_bwd=t_attn_bwd,
        elementwise=t_ew,
        softmax=t_soft,
    )


def layer_cost(
    ctx: LayerContext, pool: NodePool, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool, fabric: StageFabric | None = None
) -> LayerCost:
    """One layer's compute, recompute and exposed communication per micro-batch on `pool`'s GPU `gpu`; its TP, CP
    and EP groups span the levels `fabric` gives where a placement says so (placed_fabric.py), else the tiers'."""
    placed = fabric or NO_FABRIC
    m, c, w = ctx.model, ctx.c, ctx.w
    tp, tokens = c.tp, ctx.tokens
    cal = ctx.cluster.calibration_of(pool)
    pc = layer_compute(ctx, gpu, lf, moe_layer, cal.attention)
    fwd, bwd, t_gemm, t_routed = pc.fwd, pc.bwd, pc.gemm, pc.routed
    moe = m.moe if moe_layer else None
    op_sac = c.recompute == "selective" and ctx.rt.selective_recompute == "every_other_matmul"
    if c.recompute == "full":
        rc = fwd
    elif op_sac:
        rc = op_sac_recompute(m, lf, moe_layer, pc.rest, t_routed, pc.elementwise)
    else:
        rc = module_recompute(
            gpu,
            m,
            lf,
            moe_layer,
            c.modules,
            tokens,
            tp,
            c.sequence_parallel,
            w.flash_attention,
            t_gemm,
            pc.attn + pc.softmax,
        )

    tiers = ctx.tiers(pool)
    tp_total = tp_fwd = 0.0
    if tp > 1:
        lv = placed.tp if placed.tp is not None else net.group_levels(tiers, tp, 1)
        one = tp_collective(lv, tokens, m.hidden_size, c.sequence_parallel)
        n_fwd, n_bwd = tp_collective_counts(moe is not None, c.expert_tp, c.recompute == "full", op_sac, c.modules)
        overlap = c.tp_comm_overlap and tp_in_nvlink_domain(lv)
        tp_fwd, tp_bwd = tp_exposed(one, n_fwd, n_bwd, t_gemm, tp, overlap, ctx.rt.tp_overlap_share)
        tp_total = tp_fwd + tp_bwd
    cp_total = 0.0
    if c.cp > 1:
        cp_total = cp_exposed(
            tiers,
            c.cp_comm,
            c.cp,
            tp,
            c.mbs,
            w.seq_len,
            m.q_dim,
            m.kv_dim,
            c.recompute == "full",
            pc.attn,
            pc.attn_bwd,
            levels=placed.cp,
            ring=placed.cp_ring,
        )
    ep_raw = 0.0
    if c.ep > 1 and moe_layer and m.moe is not None:
        again = c.recompute == "full" or "moe" in c.modules
        sp_div = tp if c.sequence_parallel else 1
        ep_raw = ep_all_to_all(
            tiers, m.moe, c.ep, c.expert_tp, tokens, sp_div, m.hidden_size, c.ep_dispatch, again, placed.ep
        )
    launch_f = launch_b = 0.0
    if moe is not None and ctx.eager_moe:
        launch_f, launch_b = eager_launch_gaps(t_routed, cal.host)
    elif moe is None and ctx.eager_dense:
        launch_f, launch_b = dense_launch_gaps(fwd, bwd, cal.host)
    ep_total = ep_raw
    if ep_raw and c.ep_comm_overlap:
        ep_total = ep_overlapped(ep_raw, fwd + launch_f, bwd + launch_b)
    return LayerCost(
        fwd=fwd,
        bwd=bwd,
        wgrad=t_gemm,
        recompute=rc,
        tp=tp_total,
        cp=cp_total,
        ep=ep_total,
        tp_fwd=tp_fwd,
        launch=launch_f + launch_b,
        launch_fwd=launch_f,
    )
