"""One pipeline stage's per-micro-batch time and per-GPU memory, composed from the terms in costmodel/terms/
[formulas A-C]: each layer's compute, recompute and exposed TP / CP / EP communication, the output layer, the
pipeline sends, the data-parallel / ZeRO sync and the optimizer step, and the memory terms."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import (
    LayerFlops,
    attention_generation,
    elementwise_bytes_per_token,
    expert_gemm_efficiency,
    flash_efficiency,
    flash_length_factor,
    gemm_efficiency,
    hbm_time,
    layer_flops,
    peak_flops,
    roofline_time,
)
from optimizer.costmodel.constants import BF16_BYTES, FP8_BYTES, TORCHAO_ROWWISE_FP8_RATE
from optimizer.costmodel.fp8_casts import linear_io_per_token
from optimizer.costmodel.framework_runtime import runtime
from optimizer.costmodel.memory import (
    LOGIT_BYTES,
    UNFUSED_LOGIT_BYTES,
    activation_bytes_per_layer,
    stage_params,
    state_bytes_per_param,
    training_reserve_bytes,
)
from optimizer.costmodel.placed_fabric import PlacedFabric, StageFabric
from optimizer.costmodel.terms.context_parallel import cp_exposed
from optimizer.costmodel.terms.data_parallel import (
    Zero3Schedule,
    bf16_optimizer_accumulate_time,
    dp_exposed,
    optimizer_step_time,
    secondary_weight_bytes,
    shard_ranks,
    sharded_groups,
    zero3_exposed,
    zero3_transient_bytes,
)
from optimizer.costmodel.terms.expert_parallel import (
    dense_launch_gaps,
    eager_launch_gaps,
    ep_all_to_all,
    ep_overlapped,
)
from optimizer.costmodel.terms.offload import offload_exposed, offloaded_bytes
from optimizer.costmodel.terms.pipeline import pp_hop, pp_message_bytes
from optimizer.costmodel.terms.recompute import module_recompute, op_sac_recompute
from optimizer.costmodel.terms.tensor_parallel import (
    tp_collective,
    tp_collective_counts,
    tp_exposed,
    tp_in_nvlink_domain,
)
from optimizer.frameworks.capabilities import framework
from optimizer.frameworks.releases import release_attention_kernel, release_compute_factor, release_fp8_recipe
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec, has_flash_attention
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.recompute_modules import MOE_ONLY_MODULES
from optimizer.spec.workload import TrainingWorkload

# What a stage without a placement's own levels prices: every group as the tiers say.
NO_FABRIC = StageFabric()
# Flash attention's backward recomputes the scores: 2.5x the forward FLOPs [FlashAttention-2 paper §3.1.2].
FLASH_BWD_FLOP_RATIO = 2.5
# Unfused attention, bytes per score element: scale-mask-softmax 4 (bf16 in and out), with attention dropout 5 more
# (its mask and output) [K22 §4].
SOFTMAX_BYTES = 4
SOFTMAX_DROPOUT_BYTES = 4 + 5
# The output layer's fp32 softmax / cross-entropy pass, HBM bytes per logit (~12: fp32 read, write, re-read)
# [MLM cross_entropy.py vocab-parallel fused kernel; formulas A].
CROSS_ENTROPY_BYTES_PER_LOGIT = 12
# A dropout mask, bytes per element [K22 §4 Table 2].
DROPOUT_MASK_BYTES = 1


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


@dataclass(slots=True, kw_only=True)
class StageCost:
    """One stage's per-micro-batch times and per-GPU memory terms, independent of its pipeline position except
    through `first`/`last`. Memory at position i = static + inflight(i) x act_per_mb."""

    fwd: float
    bwd: float  # incl. recompute and exposed comm
    wgrad: float  # weight-gradient GEMMs (the zero-bubble W pass)
    parts: dict[str, float]
    dp: float  # exposed DP communication after overlap
    zero: float  # exposed ZeRO-3 gathers
    opt: float  # optimizer step
    weights: float  # bytes, per GPU
    grads: float
    optim: float
    emb: float
    transient: float
    reserve: float
    capacity: float
    act_per_mb: float  # activation bytes per in-flight micro-batch

    @property
    def static(self) -> float:
        """Memory that does not depend on the micro-batches in flight, bytes."""
        return self.weights + self.grads + self.optim + self.emb + self.transient + self.reserve

    def memory(self, inflight: float) -> float:
        """Total bytes per GPU with `inflight` micro-batches of activations alive."""
        return self.static + inflight * self.act_per_mb

    @property
    def time(self) -> float:
        """Forward + backward per micro-batch."""
        return self.fwd + self.bwd

    @property
    def end(self) -> float:
        """Work after the stage's last backward: exposed DP sync, ZeRO gathers, optimizer step."""
        return self.dp + self.zero + self.opt


@dataclass(slots=True)
class PoolFacts:
    """Per-pool values that depend on the cluster only (the compute GPU, the fabric tiers, the memory reserve):
    one per context, or shared by the many contexts of one search over one cluster."""

    tiers: dict[str, tuple[net.Tier, ...]] = field(default_factory=dict)
    gpus: dict[str, GPUSpec] = field(default_factory=dict)
    reserve: dict[str, float] = field(default_factory=dict)


class CostContext:
    """Values shared by all stages of one estimate."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        w: TrainingWorkload,
        c: ParallelConfig,
        m: int,
        dense_memo: dict[tuple[object, ...], LayerCost] | None = None,
        pools: PoolFacts | None = None,
    ) -> None:
        """`dense_memo`: dense-layer costs shared by contexts of one model, cluster and workload (a search's
        many probes), keyed by the knobs a dense layer's cost depends on (dense_layer_key)."""
        if w.flash_attention and not all(has_flash_attention(cluster.gpu_of(p)) for p in cluster.pools):
            # No flash-attention kernel on the GPU (Volta): the step runs the unfused softmax [gpu_catalog].
            w = w.model_copy(update={"flash_attention": False})
        self.model, self.cluster, self.w, self.c, self.m = model, cluster, w, c, m
        self._dense_memo = dense_memo
        self.stage_cache: dict[tuple[bool, bool, int, int, str, str | None], StageCost] = {}
        # Stages priced with their placement's own levels (placed_fabric.py), apart: a search shares stage_cache.
        self.placed_stage_cache: dict[tuple[object, ...], StageCost] = {}
        self._moe_prefix = model.moe_prefix
        self.fp8 = w.precision == "fp8"
        self.tokens = c.mbs * w.seq_len / c.cp  # tokens of one micro-batch on one GPU (before SP split)
        self.dense = layer_flops(model, False)
        self.moe = layer_flops(model, True) if model.moe else self.dense
        self.causal = 0.5 if w.flash_attention else 1.0  # flash kernels skip masked blocks
        self.grad_bytes = 4 if w.grad_dtype == "fp32" else 2
        self.fw = framework(priced_framework(w.framework))
        self.rt = runtime(self.fw.name)
        # DeepSpeed bf16 + ZeRO 0 under PP: BF16_Optimizer, its own ZeRO-1 [frameworks: bf16_optimizer]
        self.bf16_optimizer = (
            self.rt.bf16_optimizer_under_pp and c.pp > 1 and c.zero_stage == 0 and w.precision == "bf16"
        )
        # Bytes per logit at the loss's peak: the framework's own loss unless the workload says which it runs.
        # The attention kernel: the workload's, else its stated release's default, else the framework's.
        self.attention_kernel = w.attention_kernel or release_attention_kernel(
            self.fw.name, w.framework_version, self.fw.attention_kernel
        )
        self.release_compute = release_compute_factor(self.fw.name, w.framework_version)
        # torchtitan's float8 recipe: the workload's, else its release's default (tensorwise through 0.2.2).
        recipe = w.fp8_recipe or release_fp8_recipe(self.fw.name, w.framework_version)
        self.fp8_rate = TORCHAO_ROWWISE_FP8_RATE if recipe == "rowwise" and w.precision == "fp8" else 1.0
        self.eager_moe = (w.cuda_graphs or "none") != "full_iteration"
        self.eager_dense = (w.cuda_graphs or "none") == "none"
        self.logit_bytes = self.rt.logit_bytes
        if w.fused_loss is not None:
            self.logit_bytes = LOGIT_BYTES if w.fused_loss else UNFUSED_LOGIT_BYTES
        facts = pools if pools is not None else PoolFacts()
        self._tiers, self._gpus, self._reserve = facts.tiers, facts.gpus, facts.reserve
        self._layer_cache: dict[tuple[object, ...], LayerCost] = {}
        self._act: dict[bool, float] = {}
        self._peak: dict[bool, float] = {}

    def stage_signature(self) -> tuple[object, ...]:
        """What stage_cost depends on besides the stage's own (first, last, layers, pools): every knob of the
        configuration except the pipeline depth (only whether there is one), the schedule and the layout, and the
        micro-batch count. Contexts with one signature may share their stage cache (the planner's candidates that
        differ only in pp or schedule)."""
        c = self.c
        return (
            c.tp,
            c.cp,
            c.cp_comm,
            c.dp,
            c.ep,
            c.expert_tp,
            c.vp,
            c.mbs,
            c.sequence_parallel,
            c.tp_comm_overlap,
            c.ep_comm_overlap,
            c.ep_dispatch,
            c.zero_stage,
            c.shard_group,
            c.shard_scope,
            c.overlap_grad_reduce,
            c.recompute,
            c.recompute_modules,
            c.offload_layers,
            c.pp > 1,
            self.m,
        )

    def recompute_peak(self, moe_layer: bool) -> float:
        """One layer's full working set, alive while full recompute re-runs that layer [K22 §5] (cached)."""
        hit = self._peak.get(moe_layer)
        if hit is None:
            no_rc = self.c.model_copy(update={"recompute": "none"})
            hit = self._peak[moe_layer] = activation_bytes_per_layer(
                self.model, no_rc, self.w.seq_len, moe_layer, self.w.flash_attention, self.fp8
            )
        return hit

    def activation_per_layer(self, moe_layer: bool) -> float:
        """memory.activation_bytes_per_layer of this configuration (cached: every stage asks)."""
        hit = self._act.get(moe_layer)
        if hit is None:
            hit = self._act[moe_layer] = activation_bytes_per_layer(
                self.model,
                self.c,
                self.w.seq_len,
                moe_layer,
                self.w.flash_attention,
                self.fp8,
                self.rt.selective_recompute,
            )
        return hit

    def moe_count(self, start: int, layers: int) -> int:
        """MoE layers among layers [start, start + layers)."""
        return self._moe_prefix[start + layers] - self._moe_prefix[start]

    def gpu(self, pool: NodePool) -> GPUSpec:
        key = f"{pool.name}/{self.fw.name}"  # a calibration may carry a framework's own compute factor
        g = self._gpus.get(key)
        if g is None:
            g = self.cluster.compute_gpu(pool, self.fw.name)
            if self.release_compute != 1.0 or self.fp8_rate != 1.0:  # the release's terms (frameworks/releases.py)
                k = self.release_compute
                fp8 = g.fp8_tflops * k * self.fp8_rate if g.fp8_tflops is not None else None
                g = g.model_copy(update={"bf16_tflops": g.bf16_tflops * k, "fp8_tflops": fp8})
            self._gpus[key] = g
        return g

    def reserve(self, pool: NodePool) -> float:
        """memory.training_reserve_bytes of the pool's GPU with its calibrated slack (cached: every stage asks)."""
        r = self._reserve.get(pool.name)
        if r is None:
            capacity = self.cluster.gpu_of(pool).memory_bytes
            r = self._reserve[pool.name] = training_reserve_bytes(
                capacity, self.cluster.calibration_of(pool).memory_reserve
            )
        return r

    def tiers(self, pool: NodePool) -> tuple[net.Tier, ...]:
        t = self._tiers.get(pool.name)
        if t is None:
            t = net.cluster_tiers(self.cluster, pool)
            self._tiers[pool.name] = t
        return t

    def layer(self, pool: NodePool, gpu: GPUSpec, moe_layer: bool, fabric: StageFabric | None = None) -> LayerCost:
        """One layer's cost on `pool` (cached); `fabric`: the stage's groups as placed (placed_fabric.py)."""
        key: tuple[object, ...] = (pool.name, moe_layer) if fabric is None else (pool.name, moe_layer, fabric)
        hit = self._layer_cache.get(key)
        if hit is None and fabric is not None:
            hit = self._layer_cache[key] = layer_cost(
                self, pool, gpu, self.moe if moe_layer else self.dense, moe_layer, fabric
            )
        if hit is None:
            memo = self._dense_memo if not moe_layer else None
            shared = (pool.name, *self.dense_layer_key()) if memo is not None else None
            hit = memo.get(shared) if memo is not None and shared is not None else None
            if hit is None:
                hit = layer_cost(self, pool, gpu, self.moe if moe_layer else self.dense, moe_layer)
                if memo is not None and shared is not None:
                    memo[shared] = hit
            self._layer_cache[key] = hit
        return hit

    def dense_layer_key(self) -> tuple[object, ...]:
        """The knobs a dense layer's cost depends on: not ep, etp or EP overlap, and of the recompute modules
        only those that touch dense layers."""
        c = self.c
        mods = tuple(sorted(c.modules - MOE_ONLY_MODULES))
        return (c.tp, c.cp, c.cp_comm, c.mbs, c.sequence_parallel, c.tp_comm_overlap, c.recompute, mods)

    def gemm_times(self, gpu: GPUSpec, moe_layer: bool) -> tuple[float, float]:
        """Compute time of one layer's forward GEMMs per micro-batch: (all but the routed experts, the routed
        experts). A dense layer's GEMMs at the efficiency of its largest one; an MoE layer's routed experts at
        expert_efficiency, the rest (attention projections, shared experts, router) sized by its h x h GEMMs."""
        lf = self.moe if moe_layer else self.dense
        tp, tokens, peak = self.c.tp, self.tokens, peak_flops(gpu, self.fp8)
        if not (moe_layer and lf.routed):
            cols = lf.largest_gemm_cols / tp
            eff = gemm_efficiency(gpu, tokens * lf.largest_gemm_per_token / tp, self.fp8, tokens, cols, lf.gemm_groups)
            return tokens * lf.gemm / tp / (peak * eff), 0.0
        h = self.model.hidden_size
        eff = gemm_efficiency(gpu, tokens * 2 * h * h / tp, self.fp8, tokens, h / tp)
        t_routed = tokens * lf.routed / tp / (peak * self.expert_efficiency(gpu))
        return tokens * (lf.gemm - lf.routed) / tp / (peak * eff), t_routed

    def expert_efficiency(self, gpu: GPUSpec) -> float:
        """GEMM efficiency of this configuration's routed experts on one GPU: num_experts / ep local experts, each
        a GEMM over the rows routed to it (balanced: tokens x top_k x ep x etp / (tp x num_experts) per micro-batch,
        the EP group's token copies over the experts), fc1 width (mats - 1) x expert_ffn / etp; as many at once as
        the framework runs (compute.expert_gemm_efficiency)."""
        m, c = self.model, self.c
        moe = m.moe
        assert moe is not None
        etp = c.expert_tp
        rows = self.tokens * moe.top_k * c.ep * etp / (c.tp * moe.num_experts)
        mats = 3 if m.activation == "swiglu" else 2
        cols = (mats - 1) * moe.expert_ffn_hidden_size / etp
        local = max(1, moe.num_experts // c.ep)
        depth = moe.expert_ffn_hidden_size / etp  # fc2's reduction depth
        return expert_gemm_efficiency(
            gpu, self.fp8, rows, m.hidden_size, cols, local, self.rt.expert_gemm_streams, depth
        )

    def gemm_streaming(self, gpu: GPUSpec, moe_layer: bool, t_rest: float, t_routed: float) -> tuple[float, float]:
        """Time a layer's GEMMs wait on device memory beyond their compute, (forward, backward) per micro-batch;
        `t_rest` and `t_routed` are the compute times of the layer's other GEMMs and of its routed experts.

        A GEMM is bound by its FLOPs and the bytes it streams (roofline [Williams et al. 2009]; NVIDIA DL
        Performance Guide, 'Matrix Multiplication Background': a GEMM whose arithmetic intensity is below the
        GPU's FLOP/byte ratio is memory-bound), the two combined as compute.roofline_time. Bytes per micro-batch:
        the weights read forward and again by the
        data-gradient GEMM (1 B each under FP8, Transformer Engine's FP8 weight copies), the weight-gradient
        GEMM reading and writing the main gradient it accumulates into (Megatron gradient_accumulation_fusion:
        wgrad_gemm_accum_fp32 into the fp32 main_grad, or bf16 [tensor_parallel/layers.py; TE GroupedLinear
        accumulate_into_main_grad]); for routed experts also their token rows: the fc1 input, its output, the fc2
        input and output, once forward and twice backward. Dense layers carry thousands of rows per weight and
        stay compute-bound; routed experts with few tokens each (many experts, small micro-batches, or experts
        split over TP) are bound by their weights and gradients."""
        m, c = self.model, self.c
        wb = float(FP8_BYTES) if self.fp8 else float(BF16_BYTES)
        gb = float(self.grad_bytes)
        dense_params = m.moe_layer_params - m.moe_expert_params_per_layer if moe_layer else m.dense_layer_params
        w_dense = dense_params / c.tp
        fwd = roofline_time(t_rest, hbm_time(gpu, w_dense * wb)) - t_rest
        bwd = roofline_time(2 * t_rest, hbm_time(gpu, w_dense * (wb + 2 * gb))) - 2 * t_rest
        moe = m.moe if moe_layer else None
        if moe is not None:
            etp = c.expert_tp
            w_exp = m.moe_expert_params_per_layer / (c.ep * etp)
            rows = self.tokens * moe.top_k * etp / c.tp  # routed token copies this GPU's experts process
            mats = 3 if m.activation == "swiglu" else 2
            f = moe.expert_ffn_hidden_size / etp
            act_in = float(FP8_BYTES) if self.fp8 else float(BF16_BYTES)
            row_bytes = m.hidden_size * act_in + (mats - 1) * f * BF16_BYTES + f * act_in + m.hidden_size * BF16_BYTES
            fwd += roofline_time(t_routed, hbm_time(gpu, w_exp * wb + rows * row_bytes)) - t_routed
            bwd += (
                roofline_time(2 * t_routed, hbm_time(gpu, w_exp * (wb + 2 * gb) + 2 * rows * row_bytes)) - 2 * t_routed
            )
        return fwd, bwd


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
    ctx: CostContext, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool, attention_rate: float = 1.0
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
    ctx: CostContext, pool: NodePool, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool, fabric: StageFabric | None = None
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


# The step-time parts a stage reports per micro-batch (StepBreakdown's fields, seconds).
STAGE_PARTS = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "offload", "launch")


def stage_cost(
    ctx: CostContext,
    first: bool,
    last: bool,
    moe_layers: int,
    layers: int,
    pool: NodePool,
    next_pool: NodePool | None,
    fabric: StageFabric | None = None,
) -> StageCost:
    """Costs of a stage of `layers` layers (`moe_layers` of them MoE) on `pool`, sending to `next_pool`; `fabric`:
    what its placement gives its groups where that is worse than the tiers assume (placed_fabric.py)."""
    key = (first, last, moe_layers, layers, pool.name, next_pool.name if next_pool is not None else None)
    if fabric is not None:
        placed_key = (*key, fabric)
        hit = ctx.placed_stage_cache.get(placed_key)
        if hit is None:
            hit = ctx.placed_stage_cache[placed_key] = _stage_cost(
                ctx, first, last, moe_layers, layers, pool, next_pool, fabric
            )
        return hit
    hit = ctx.stage_cache.get(key)
    if hit is None:
        hit = _stage_cost(ctx, first, last, moe_layers, layers, pool, next_pool, None)
        ctx.stage_cache[key] = hit
    return hit


def layout_stages(
    ctx: CostContext, pools: tuple[NodePool, ...], layers: tuple[int, ...], fabric: PlacedFabric | None = None
) -> list[StageCost]:
    """The StageCost of every stage of a layout (pool and layer count per stage; `fabric`: per stage, what its
    placement gives, None where nothing differs from the tiers)."""
    p = len(layers)
    out = []
    start = 0
    for i, (pool, n) in enumerate(zip(pools, layers, strict=True)):
        moe = ctx.moe_count(start, n)
        nxt = pools[i + 1] if i + 1 < p else None
        placed = fabric[i] if fabric is not None else None
        out.append(stage_cost(ctx, i == 0, i == p - 1, moe, n, pool, nxt, placed))
        start += n
    return out


def _layers_time(
    ctx: CostContext,
    pool: NodePool,
    gpu: GPUSpec,
    dense_layers: int,
    moe_layers: int,
    parts: dict[str, float],
    fabric: StageFabric | None,
) -> tuple[float, float, float]:
    """(forward, backward, weight-gradient) time of a stage's layers per micro-batch, adding each part to `parts`.
    Of the exposed communication, EP counts half forward, CP a third (its forward ring of the three passes)."""
    fwd = bwd = wgrad = 0.0
    # A layer's own groups (TP, CP, EP); a placement that moves only the DP groups or the sends leaves it as is.
    touches = fabric is not None and any(x is not None for x in (fabric.tp, fabric.cp, fabric.cp_ring, fabric.ep))
    layer_fabric = fabric if touches else None
    for count, is_moe in ((dense_layers, False), (moe_layers, True)):
        if not count:
            continue
        lc = ctx.layer(pool, gpu, is_moe, layer_fabric)
        parts["forward"] += count * lc.fwd
        parts["backward"] += count * lc.bwd
        parts["recompute"] += count * lc.recompute
        parts["tp_comm"] += count * lc.tp
        parts["cp_comm"] += count * lc.cp
        parts["ep_comm"] += count * lc.ep
        parts["launch"] += count * lc.launch
        fwd += count * (lc.fwd + lc.tp_fwd + lc.ep / 2 + lc.cp / 3 + lc.launch_fwd)
        launch_bwd = lc.launch - lc.launch_fwd
        bwd += count * (lc.bwd + lc.recompute + lc.tp - lc.tp_fwd + lc.ep / 2 + lc.cp * 2 / 3 + launch_bwd)
        wgrad += count * lc.wgrad
    return fwd, bwd, wgrad


def _output_layer_time(ctx: CostContext, gpu: GPUSpec, mtp: int) -> tuple[float, float]:
    """(logits GEMM, softmax / cross-entropy) forward time of the last stage per micro-batch: the GEMM 2*b*s*h*V
    (its backward 2x) and the fp32 softmax/cross-entropy pass (~12 B/logit); each MTP module adds its own logits
    and loss and its 2h -> h projection (a dense GEMM)."""
    model, tokens, tp = ctx.model, ctx.tokens, ctx.c.tp
    fp8_logits = ctx.fp8 and ctx.rt.fp8_output_layer  # Megatron keeps the output layer in BF16 (frameworks.py)
    eff = gemm_efficiency(gpu, tokens * 2 * model.hidden_size * model.vocab_size / tp, fp8_logits)
    t_logit = tokens * 2 * model.hidden_size * model.vocab_size / tp / (peak_flops(gpu, fp8_logits) * eff)
    t_ce = hbm_time(gpu, tokens * model.vocab_size / tp * CROSS_ENTROPY_BYTES_PER_LOGIT)
    if mtp:
        proj = tokens * 2 * 2 * model.hidden_size**2 / tp
        t_proj = proj / (peak_flops(gpu, ctx.fp8) * gemm_efficiency(gpu, proj, ctx.fp8))
        t_logit, t_ce = (1 + mtp) * t_logit + mtp * t_proj, (1 + mtp) * t_ce
    return t_logit, t_ce


def _pp_send_time(ctx: CostContext, pool: NodePool, next_pool: NodePool | None, placed: net.Tier | None) -> float:
    """Exposed pipeline sends per micro-batch and pass: activations b*s*h forward, their gradient backward, per
    boundary and per model chunk [N21 §3.2, §4.1, §2.2.2]. `placed`: the tier the placement gives the sends to
    neighbours on the same pool, where it is worse than the tiers assume."""
    c = ctx.c
    msg = pp_message_bytes(ctx.tokens, ctx.model.hidden_size, c.tp, ctx.rt.pp_scatter_gather)
    cross = next_pool is not None and next_pool.name != pool.name
    next_tiers = ctx.tiers(next_pool) if cross and next_pool is not None else None
    if placed is not None and next_tiers is None:
        return c.vp * net.p2p(placed.bw, placed.network, msg)
    return c.vp * pp_hop(ctx.tiers(pool), next_tiers, c.gpus_per_stage, msg)


def _dp_sync_time(
    ctx: CostContext,
    pool: NodePool,
    dense_total: float,
    expert_p: float,
    layers: int,
    fwd: float,
    bwd: float,
    placed: StageFabric,
) -> tuple[float, float]:
    """(exposed DP sync, exposed ZeRO-3 / FSDP communication) of one step on one stage, seconds; the groups span
    what `placed` gives where its placement says so."""
    c = ctx.c
    dpc, edp = c.dp * c.cp, c.expert_dp
    if not (dpc > 1 or edp > 1):
        return 0.0, 0.0
    tiers = ctx.tiers(pool)
    groups = sharded_groups(
        c,
        tiers,
        dense_total,
        expert_p,
        ctx.grad_bytes,
        ctx.w.fp8_param_gather,
        ctx.rt.replica_reduce_every_microbatch,
    )
    if c.shard_group is None and (placed.dp is not None or placed.edp is not None):
        # The placement's own spans where it is worse than the tiers assume (whole-group sharding only: a shard
        # group's levels are its own)
        groups = replace(
            groups,
            dense_levels=placed.dp if placed.dp is not None else groups.dense_levels,
            expert_levels=placed.edp if placed.edp is not None else groups.expert_levels,
        )
    after_pipeline = c.pp > 1 and ctx.rt.grad_reduce_after_pipeline  # reduced after the last micro-batch
    if c.zero_stage == 3 and not ctx.bf16_optimizer and not after_pipeline:
        # ZeRO-3 / FSDP: gather params forward and backward, reduce-scatter grads, each micro-batch [Z20 §7]
        rt = ctx.rt
        schedule = Zero3Schedule(
            collectives_per_layer=rt.zero3_collectives_per_layer,
            node_aggregation=rt.zero3_node_aggregation,
            overlap=rt.zero3_overlap,
        )
        if not groups.replicated:
            return 0.0, ctx.m * zero3_exposed(groups, schedule, layers, fwd, bwd)
        # Replicas of a shard group all-reduce their gradient shards after every micro-batch (FSDP2) or after the
        # last (MiCS, Megatron-FSDP) [formulas C9]
        last = zero3_exposed(groups, schedule, layers, fwd, bwd, replica_reduce_now=True)
        each = last if groups.replica_every_microbatch else zero3_exposed(groups, schedule, layers, fwd, bwd)
        return 0.0, (ctx.m - 1) * each + last
    chunks = max(1.0, layers / c.vp if c.pp > 1 else layers)
    dp_t = dp_exposed(
        groups, c.zero_stage, c.overlap_grad_reduce, ctx.bf16_optimizer, after_pipeline, chunks, fwd, bwd, ctx.m
    )
    return dp_t, 0.0


def _stage_cost(
    ctx: CostContext,
    first: bool,
    last: bool,
    moe_layers: int,
    layers: int,
    pool: NodePool,
    next_pool: NodePool | None,
    fabric: StageFabric | None,
) -> StageCost:
    model, c = ctx.model, ctx.c
    placed = fabric or NO_FABRIC
    gpu = ctx.gpu(pool)
    # Multi-token prediction runs on the last rank after the decoder layers: each module one more transformer
    # layer (its compute, collectives, parameters and activations), a 2h -> h projection and one more logits and
    # loss pass [MLM multi_token_prediction.py; the layout's 'm' sits in the last stage, pipeline_layout.py].
    mtp = model.mtp_layers if last else 0
    layers += mtp
    moe_layers += mtp if model.mtp_layer_is_moe else 0
    dense_layers = layers - moe_layers
    parts = dict.fromkeys(STAGE_PARTS, 0.0)
    fwd, bwd, wgrad = _layers_time(ctx, pool, gpu, dense_layers, moe_layers, parts, fabric)
    tp = c.tp
    if last:
        t_logit, t_ce = _output_layer_time(ctx, gpu, mtp)
        parts["forward"] += t_logit + t_ce
        parts["backward"] += 2 * t_logit + t_ce
        fwd += t_logit + t_ce
        bwd += 2 * t_logit + t_ce
        wgrad += t_logit
    if c.pp > 1:
        pp_t = _pp_send_time(ctx, pool, next_pool, placed.pp)
        parts["pp_comm"] += 2 * pp_t
        fwd += pp_t
        bwd += pp_t

    # ---- parameters, DP, optimizer -------------------------------------------------------------------------
    dense_p, expert_p, emb_p = stage_params(model, c, dense_layers, moe_layers, first, last)
    if mtp:  # the modules' projections and norms; with pp > 1 the last rank also holds the embedding they read
        dense_p += mtp * model.mtp_extra_params / tp
        if c.pp > 1 and not model.tied_embeddings:
            emb_p += model.vocab_size * model.hidden_size / tp
    if ctx.bf16_optimizer:
        t_acc = bf16_optimizer_accumulate_time(gpu, dense_p + expert_p + emb_p)
        parts["backward"] += t_acc
        bwd += t_acc
    # The states are sharded over dp x cp, the experts' over the expert data-parallel group; with a shard group over
    # 1/replicas of each [formulas C9]
    dpc, edp = shard_ranks(c)
    # DeepSpeed's BF16_Optimizer keeps its states as ZeRO-1 does, with bf16 grads + the full fp32 accumulation
    # buffer (2 + 4 B) [frameworks: bf16_optimizer].
    state_zero, state_grad = (1, 2 + 4) if ctx.bf16_optimizer else (c.zero_stage, ctx.grad_bytes)
    fp8_params, rem = ctx.w.fp8_param_gather, ctx.w.precision_aware_optimizer
    wb, gb, ob = state_bytes_per_param(state_zero, dpc, state_grad, ctx.fp8, fp8_params, rem)
    ewb, egb, eob = state_bytes_per_param(state_zero, edp, state_grad, ctx.fp8, fp8_params, rem)
    dense_total = dense_p + emb_p
    dp_t, zero_t = _dp_sync_time(ctx, pool, dense_total, expert_p, layers, fwd, bwd, placed)
    opt_t = optimizer_step_time(gpu, dense_total, expert_p, c.zero_stage, dpc, edp)

    # ---- memory ---------------------------------------------------------------------------------------------
    act_layer_d = ctx.activation_per_layer(False)
    act_layer_m = ctx.activation_per_layer(True) if moe_layers else 0.0
    acts = dense_layers * act_layer_d + moe_layers * act_layer_m
    if c.offload_layers and layers:
        moved = offloaded_bytes(acts, c.offload_layers, layers)
        acts -= moved
        off_f, off_b = offload_exposed(gpu, moved, fwd, bwd)
        parts["offload"] += off_f + off_b
        fwd += off_f
        bwd += off_b
    sbh = ctx.tokens * model.hidden_size
    if first:  # embedding output (+ dropout mask) per micro-batch in flight [MLM theoretical_memory_usage.py]
        emb_bytes = BF16_BYTES + DROPOUT_MASK_BYTES if model.dropout else BF16_BYTES
        acts += sbh * emb_bytes / (tp if c.sequence_parallel else 1)
    transient = 0.0
    if last:  # fp32 logits + the loss-backward buffer
        transient = ctx.tokens * model.vocab_size / tp * ctx.logit_bytes
    if c.recompute == "full":
        transient = max(transient, ctx.recompute_peak(moe_layers > 0))
    if c.zero_stage == 3:  # unsharded bf16 weights in use and prefetched [LA analysis.py training(); frameworks]
        transient += zero3_transient_bytes(dense_p, expert_p, layers, ctx.rt.zero3_live_layers)
    return StageCost(
        fwd=fwd,
        bwd=bwd,
        wgrad=wgrad,
        parts=parts,
        dp=dp_t,
        zero=zero_t,
        opt=opt_t,
        weights=dense_p * wb + expert_p * ewb + secondary_weight_bytes(dense_total + expert_p, c.secondary_shard_ranks),
        grads=dense_p * gb + expert_p * egb,
        optim=dense_p * ob + expert_p * eob,
        emb=emb_p * (wb + gb + ob),
        transient=transient,
        reserve=ctx.reserve(pool),
        capacity=gpu.memory_bytes,
        act_per_mb=acts,
    )
