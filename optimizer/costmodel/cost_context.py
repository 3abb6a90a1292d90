"""The cost context: what every stage of one estimate shares (the model, cluster, workload and configuration, the
framework's runtime and release terms) and its caches (per-pool GPU, tiers and reserve, per-layer costs, stage
costs), with the GEMM times and streaming one layer's cost reads (layer_cost.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import (
    expert_gemm_efficiency,
    gemm_efficiency,
    hbm_time,
    layer_flops,
    peak_flops,
    roofline_time,
)
from optimizer.costmodel.constants import BF16_BYTES, FP8_BYTES, TORCHAO_ROWWISE_FP8_RATE
from optimizer.costmodel.framework_runtime import runtime
from optimizer.costmodel.layer_cost import LayerCost, layer_cost
from optimizer.costmodel.memory import (
    LOGIT_BYTES,
    UNFUSED_LOGIT_BYTES,
    activation_bytes_per_layer,
    training_reserve_bytes,
)
from optimizer.costmodel.placed_fabric import StageFabric
from optimizer.frameworks.capabilities import framework
from optimizer.frameworks.releases import release_attention_kernel, release_compute_factor, release_fp8_recipe
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec, has_flash_attention
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.recompute_modules import MOE_ONLY_MODULES
from optimizer.spec.workload import TrainingWorkload


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
