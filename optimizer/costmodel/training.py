"""Step time and memory of one training configuration [formulas A-D]."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

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
    overlapped,
    peak_flops,
    roofline_time,
)
from optimizer.costmodel.constants import (
    ADAM_BYTES_PER_PARAM,
    FRAMEWORK_FACTOR,
    FRAMEWORK_FACTOR_DEFAULT,
    MOE_EAGER_HOST_S,
    OVERLAP_COMPUTE_SLOWDOWN,
    PCIE_EFFICIENCY,
)
from optimizer.costmodel.ep_dispatch import deepep_network_share
from optimizer.costmodel.fp8_casts import linear_io_per_token
from optimizer.costmodel.framework_runtime import runtime
from optimizer.costmodel.memory import (
    LOGIT_BYTES,
    UNFUSED_LOGIT_BYTES,
    activation_bytes_per_layer,
    inflight_microbatches,
    stage_params,
    state_bytes_per_param,
    training_reserve_bytes,
)
from optimizer.costmodel.op_sac import recomputed_flops_per_token
from optimizer.costmodel.result import Estimate, MemoryBreakdown, StageEstimate, StepBreakdown
from optimizer.frameworks.capabilities import framework
from optimizer.frameworks.validation import Layout
from optimizer.spec.cluster_spec import PCIE_GBYTES_PER_S, ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec, has_flash_attention
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.recompute_modules import MOE_ONLY_MODULES
from optimizer.spec.workload import TrainingWorkload

GB = 1e9


@dataclass(slots=True)
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


@dataclass(slots=True)
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
        self.attention_kernel = w.attention_kernel or self.fw.attention_kernel
        self.eager_moe = (w.cuda_graphs or "none") != "full_iteration"
        self.logit_bytes = self.rt.logit_bytes
        if w.fused_loss is not None:
            self.logit_bytes = LOGIT_BYTES if w.fused_loss else UNFUSED_LOGIT_BYTES
        facts = pools if pools is not None else PoolFacts()
        self._tiers, self._gpus, self._reserve = facts.tiers, facts.gpus, facts.reserve
        self._layer_cache: dict[tuple[str, bool], LayerCost] = {}
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
        g = self._gpus.get(pool.name)
        if g is None:
            g = self._gpus[pool.name] = self.cluster.compute_gpu(pool)
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

    def layer(self, pool: NodePool, gpu: GPUSpec, moe_layer: bool) -> LayerCost:
        key = (pool.name, moe_layer)
        hit = self._layer_cache.get(key)
        if hit is None:
            memo = self._dense_memo if not moe_layer else None
            shared = (pool.name, *self.dense_layer_key()) if memo is not None else None
            hit = memo.get(shared) if memo is not None and shared is not None else None
            if hit is None:
                hit = self._layer_cost(pool, gpu, self.moe if moe_layer else self.dense, moe_layer)
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

    def _layer_cost(self, pool: NodePool, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool) -> LayerCost:
        m, c, w = self.model, self.c, self.w
        tp, tokens = c.tp, self.tokens
        rows, cols = tokens, lf.largest_gemm_cols / tp
        eff16 = gemm_efficiency(gpu, tokens * lf.largest_gemm_per_token / tp, False, rows, cols, lf.gemm_groups)
        t_rest, t_routed = self.gemm_times(gpu, moe_layer)
        t_gemm = t_rest + t_routed
        attn_flops = tokens * lf.attn_per_ctx * w.seq_len * self.causal / tp
        t_attn = attn_flops / (peak_flops(gpu, False) * eff16)
        t_attn_bwd = 2.0 * t_attn  # explicit softmax: the two score GEMMs backward, as dense GEMMs
        if w.flash_attention:  # the fused kernel's own efficiency; backward recomputes the scores: 2.5x the FLOPs
            fa_fwd, fa_bwd = flash_efficiency(self.attention_kernel, gpu.family)
            gen = attention_generation(self.attention_kernel, gpu.family)
            length = flash_length_factor(gen, w.seq_len, c.cp, c.cp_comm)
            fa_fwd, fa_bwd = fa_fwd * length, fa_bwd * length
            t_attn = attn_flops / (peak_flops(gpu, False) * fa_fwd)
            t_attn_bwd = 2.5 * attn_flops / (peak_flops(gpu, False) * fa_bwd)
        repl, shard = elementwise_bytes_per_token(m, moe_layer, m.dropout)
        ew = tokens * (repl / (tp if c.sequence_parallel else 1) + shard / tp)
        softmax = 0.0
        if not w.flash_attention:  # scale-mask-softmax (4 B/elt) and dropout (5 B/elt) over a*s^2*b [K22 §4]
            softmax = tokens * m.num_attention_heads * w.seq_len / tp * (9 if m.dropout else 4)
        t_ew = hbm_time(gpu, ew)
        t_soft = hbm_time(gpu, softmax)
        stream_fwd, stream_bwd = self.gemm_streaming(gpu, moe_layer, t_gemm - t_routed, t_routed)
        cast_in, cast_grad = self.rt.fp8_cast_bytes if self.fp8 else (0.0, 0.0)
        if cast_in or cast_grad:  # FP8 operand casts as their own kernels (costmodel/fp8_casts.py)
            ins, outs = linear_io_per_token(m, moe_layer)
            stream_fwd += hbm_time(gpu, tokens * ins * cast_in / 2 / tp)
            stream_bwd += hbm_time(gpu, tokens * (ins * cast_in / 2 + outs * cast_grad) / tp)
        fwd = t_gemm + stream_fwd + t_attn + t_ew + t_soft
        # Backward: 2x the GEMM FLOPs (dgrad + wgrad) [formulas B]; flash attention's backward recomputes the
        # scores, 2.5x its forward [FlashAttention-2 paper §3.1.2 FLOP count]; memory-bound kernels ~2x.
        bwd = 2 * t_gemm + stream_bwd + t_attn_bwd + 2 * (t_ew + t_soft)
        moe = m.moe if moe_layer else None
        full = c.recompute == "full"
        op_sac = c.recompute == "selective" and self.rt.selective_recompute == "every_other_matmul"
        if full:
            rc = fwd
        elif op_sac:  # torchtitan: the unsaved mms, the routed experts and every pointwise op [costmodel/op_sac.py]
            dense_flops = lf.gemm - lf.routed
            rc = t_ew + (t_routed if moe_layer else 0.0)
            rc += recomputed_flops_per_token(m, moe_layer) * (t_rest / dense_flops if dense_flops else 0.0)
        else:
            rc = self._module_recompute(gpu, lf, moe_layer, t_gemm, t_attn + t_soft)

        tiers = self.tiers(pool)
        # TP: 2 all-reduces forward, 2 backward, 2 more with full recompute, each of b*s*h activations [S19 §3];
        # with SP each becomes reduce-scatter + all-gather of the same volume [K22 §4.2.2].
        tp_exposed = tp_fwd = 0.0
        if tp > 1:
            lv = net.group_levels(tiers, tp, 1)
            msg = tokens * m.hidden_size * 2
            one = 2 * net.all_gather(lv, msg) if c.sequence_parallel else net.all_reduce(lv, msg)
            # An MoE layer whose experts are not tensor-parallel (etp = 1) has no TP collective around its MLP:
            # the sequence-parallel shards are dispatched by the all-to-all instead [MLM moe token_dispatcher.py].
            per_layer = 1 if moe is not None and c.expert_tp == 1 else 2
            n_fwd = per_layer
            n_bwd = float(per_layer + (per_layer if c.recompute == "full" else 0))
            # A checkpointed MLP (dense, or an MoE layer with tensor-parallel experts) gathers its input again.
            if op_sac:  # all-gathers are not in torchtitan's save set: the recompute gathers each input again
                n_bwd += per_layer / 2
            elif ("mlp" in c.modules and moe is None) or ("moe" in c.modules and per_layer == 2 and moe is not None):
                n_bwd += 1
            # Overlap hides TP traffic under the GEMMs, one chunk of tp left exposed (derived from [NB]), only when the
            # group sits in one NVLink domain: Transformer Engine's userbuffers (Megatron --tp-comm-overlap) and
            # torchtitan's async TP use node-local symmetric memory [frameworks/capabilities.py]. A group that spans
            # PCIe or the NICs pays every collective in full on the tiers it crosses.
            if c.tp_comm_overlap and tp_in_nvlink_domain(lv):
                share = self.rt.tp_overlap_share  # what the framework's overlap hides of what could hide
                f_all, b_all = n_fwd * one, n_bwd * one
                f_min, b_min = max(f_all / tp, f_all - t_gemm), max(b_all / tp, b_all - 2 * t_gemm)
                tp_fwd = overlapped(f_all, f_all - share * (f_all - f_min))
                tp_bwd = overlapped(b_all, b_all - share * (b_all - b_min))
            else:
                tp_fwd, tp_bwd = n_fwd * one, n_bwd * one
            tp_exposed = tp_fwd + tp_bwd
        # CP ring attention: K and V blocks of s/c tokens pass c-1 hops forward, twice that backward, hidden
        # behind the attention core when it is longer [formulas C5; NB hybrid-context-parallel].
        cp_exposed = 0.0
        if c.cp > 1:
            cp_exposed = self._cp_comm(tiers, t_attn, t_attn_bwd)
        # EP: dispatch + combine all-to-all forward and again backward, top_k copies of each token [formulas C6].
        ep_raw = 0.0
        if c.ep > 1 and moe_layer and m.moe is not None:
            # The expert grid is ordered etp - ep - expert-dp, so an EP group's ranks lie etp apart
            # [MLM parallel_state.py: expert RankGenerator(tp=etp, ep, dp, cp=1, order 'tp-cp-ep-dp-pp')].
            lv = net.group_levels(tiers, c.ep, c.expert_tp)
            per_rank = m.moe.top_k * tokens / (tp if c.sequence_parallel else 1) * m.hidden_size * 2
            # Hierarchical dispatch (DeepEP / HybridEP) sends a token once per destination node over the network
            # and forwards it over NVLink there [costmodel/ep_dispatch.py].
            scale = 1.0
            if c.ep_dispatch == "deepep":
                scale = deepep_network_share(m.moe, prod(x.members for x in lv if x.network))
            # A recomputed MoE layer (full recompute, or the moe module) dispatches and combines its tokens again
            # before its backward: the checkpointed forward includes the token dispatcher [MLM transformer_layer.py
            # full recompute checkpoints the whole layer; moe_layer.py moe_layer_recompute].
            again = c.recompute == "full" or "moe" in c.modules
            ep_raw = (6 if again else 4) * net.all_to_all(lv, per_rank, scale)
        # An eager MoE layer: after the dispatcher's device-to-host sync the GPU runs only what the host has issued
        # since, so the host's issue time for the rest of the layer is exposed where the routed experts' GEMMs
        # are shorter [constants.MOE_EAGER_HOST_S]. Full-iteration CUDA graphs replay it without the host.
        launch_f = launch_b = 0.0
        if moe is not None and self.eager_moe:
            launch_f = max(0.0, MOE_EAGER_HOST_S / 3 - t_routed)
            launch_b = max(0.0, 2 * MOE_EAGER_HOST_S / 3 - 2 * t_routed)
        ep_exposed = ep_raw
        if ep_raw and c.ep_comm_overlap:
            # Combined 1F1B merges the forward of one micro-batch with the backward of the previous: the forward's
            # dispatch + combine run under the backward's compute and the backward's under the forward's ['Overlaps
            # All-to-All with computation by merging FWD-BWD passes of adjacent microbatches', MLM moe/README.md];
            # what exceeds that compute stays exposed. The host-launch gaps of an eager layer count too: the copy
            # engines and NICs run while the SMs wait for the host.
            half = ep_raw / 2
            window_b, window_f = bwd + launch_b, fwd + launch_f
            ep_exposed = overlapped(half, max(0.0, half - window_b)) + overlapped(half, max(0.0, half - window_f))
        launch = launch_f + launch_b
        return LayerCost(fwd, bwd, t_gemm, rc, tp_exposed, cp_exposed, ep_exposed, tp_fwd, launch, launch_f)

    def _cp_comm(self, tiers: tuple[net.Tier, ...], t_attn: float, t_attn_bwd: float) -> float:
        """Context-parallel communication of one layer per micro-batch, forward and backward, by kind
        (ParallelConfig.cp_comm). CP ranks lie tp apart (rank order tp - cp - dp).
        - p2p: K and V blocks of s/cp tokens pass cp - 1 hops forward, twice that backward (K, V and their
          gradients), hidden behind the attention steps when those are longer [formulas C5; NB
          hybrid-context-parallel; TE AttnFuncWithCPAndKVP2P].
        - allgather: K and V gathered before the attention, exposed; the backward gathers them again and
          reduce-scatters their gradients [TE AttnFuncWithCPAndKVAllGather: 'KV all-gather between CP ranks is
          exposed'; Llama 3 report §3.3.2].
        - a2a: all-to-alls of Q, K, V before and of the output after the attention, and of their gradients in the
          backward, exposed [TE AttnFuncWithCPAndQKVOA2A; DeepSpeed-Ulysses, Jacobs et al. 2023].
        A fully recomputed layer runs its forward communication again."""
        m, c, w, tp = self.model, self.c, self.w, self.c.tp
        local = c.mbs * (w.seq_len / c.cp) * 2 / tp  # bytes per unit of width of this rank's tokens (bf16)
        again = 1 if c.recompute == "full" else 0
        if c.cp_comm == "p2p":
            tier = net.neighbour_tier(tiers, tp)
            ring = (c.cp - 1) * net.p2p(tier.bw, tier.network, local * 2 * m.kv_dim)
            fwd = overlapped(ring, max(0.0, ring - t_attn))
            return (1 + again) * fwd + overlapped(2 * ring, max(0.0, 2 * ring - t_attn_bwd))
        lv = net.group_levels(tiers, c.cp, tp)
        if c.cp_comm == "allgather":
            gather = net.all_gather(lv, c.cp * local * 2 * m.kv_dim)
            return (1 + again) * gather + 2 * gather
        qkv = net.all_to_all(lv, local * (m.q_dim + 2 * m.kv_dim))
        out = net.all_to_all(lv, local * m.q_dim)
        return (1 + again) * (qkv + out) + (qkv + out)

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
        wb = 1.0 if self.fp8 else 2.0
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
            act_in = 1.0 if self.fp8 else 2.0
            row_bytes = m.hidden_size * act_in + (mats - 1) * f * 2 + f * act_in + m.hidden_size * 2
            fwd += roofline_time(t_routed, hbm_time(gpu, w_exp * wb + rows * row_bytes)) - t_routed
            bwd += (
                roofline_time(2 * t_routed, hbm_time(gpu, w_exp * (wb + 2 * gb) + 2 * rows * row_bytes)) - 2 * t_routed
            )
        return fwd, bwd

    def _module_recompute(self, gpu: GPUSpec, lf: LayerFlops, moe_layer: bool, t_gemm: float, t_core: float) -> float:
        """Forward work that selective recompute repeats before the backward, per micro-batch: the modules in
        optimizer/spec/recompute_modules.py (Megatron's --recompute-modules). GEMM parts at the layer's GEMM time per
        FLOP; norms and activation functions at HBM speed (costmodel/compute.py elementwise_bytes_per_token)."""
        m, c, mods = self.model, self.c, self.c.modules
        if not mods:
            return 0.0
        moe = m.moe if moe_layer else None
        tokens, tp = self.tokens, c.tp
        sp_div = tp if c.sequence_parallel else 1
        per_flop = t_gemm / lf.gemm if lf.gemm else 0.0
        rc = 0.0
        if "core_attn" in mods and not self.w.flash_attention:
            rc += t_core
        if "layernorm" in mods:  # a norm reads and writes h bf16 values per token
            norms = (1 if m.mla is not None else 0) + (1 if moe is not None else 0)
            rc += hbm_time(gpu, norms * 4 * m.hidden_size * tokens / sp_div)
        if "mla_up_proj" in mods:
            rc += lf.mla_up * per_flop
        act_bytes = 6 if m.activation == "swiglu" else 4  # reads the fc1 output, writes the fc2 input
        if moe is not None:
            if "moe" in mods:
                rc += lf.mlp * per_flop
                rc += hbm_time(gpu, tokens * (act_bytes * moe.top_k * moe.expert_ffn_hidden_size / tp))
                rc += hbm_time(gpu, tokens * 4 * moe.top_k * m.hidden_size * 2 / sp_div)  # permutation
            else:
                if "moe_act" in mods:
                    rc += hbm_time(gpu, tokens * act_bytes * moe.top_k * moe.expert_ffn_hidden_size / tp)
                if "shared_experts" in mods:
                    rc += lf.shared * per_flop
        elif "mlp" in mods:
            rc += lf.mlp * per_flop + hbm_time(gpu, tokens * act_bytes * m.ffn_hidden_size / tp)
        return rc


def host_gbytes_per_s(gpu: GPUSpec) -> float:
    """GPU <-> host memory bandwidth per direction: the GPU's own host link (NVLink-C2C), else its PCIe
    generation at the copy efficiency measured for PCIe [cluster_spec PCIE_GBYTES_PER_S; constants]."""
    if gpu.host_gbytes_per_s:
        return gpu.host_gbytes_per_s
    return PCIE_GBYTES_PER_S[gpu.pcie_gen] * PCIE_EFFICIENCY


def tp_in_nvlink_domain(levels: tuple[net.Level, ...]) -> bool:
    """Whether a TP group's levels are one NVLink domain (no PCIe, no NIC between its members)."""
    return len(levels) == 1 and levels[0].name == "nvlink"


def zero3_exposed(
    ctx: CostContext,
    lv_d: tuple[net.Level, ...],
    lv_e: tuple[net.Level, ...],
    dense_params: float,
    expert_params: float,
    layers: int,
    fwd: float,
    bwd: float,
    dpc: int,
    edp: int,
) -> float:
    """Exposed ZeRO-3 / FSDP communication of one micro-batch on one stage, seconds.

    Per layer and pass the framework issues `zero3_collectives_per_layer` all-gathers of the layer's bf16 weights,
    FP8 under FP8 primary weights (Megatron-FSDP with --fp8-param-gather all-gathers the FP8 parameters [MLM
    README 'FP8 Primary Weights'], as the distributed optimizer's gather below does), and as many
    reduce-scatters of its gradients in backward, each paying its ring latency over all dp ranks
    [NC tuning.cc]. The next layer's gathers are prefetched under the current layer's compute, so a layer costs
    max(compute, comm); the first gather of the forward and the last reduce-scatter of the backward have nothing
    to hide under [DeepSpeed partitioned_param_coordinator.py; FSDP2 implicit prefetch]. Of the overlappable part
    only the framework's `zero3_overlap` share hides (DeepSpeed calibrated on Narayanan 2021 Table 2); the
    recompute forward reuses the backward's gather.
    """
    n = max(1, layers)
    k = ctx.rt.zero3_collectives_per_layer
    if not ctx.rt.zero3_node_aggregation:  # each rank's whole volume over its own NIC (see Framework)
        lv_d, lv_e = _flat(lv_d), _flat(lv_e)
    # Bytes per parameter: the gathers move the primary weights (bf16, or FP8 under fp8_param_gather), the
    # reduce-scatters the gradients at their own width (grad_dtype), whatever the weights are stored in.
    wbytes = 1.0 if ctx.w.fp8_param_gather else 2.0
    bytes_per_param = {"ag": wbytes, "rs": float(ctx.grad_bytes)}

    def per_layer(f: str) -> float:
        fn = net.all_gather  # reduce-scatter costs the same [NT]
        d_piece, e_piece = dense_params * bytes_per_param[f] / (n * k), expert_params * bytes_per_param[f] / (n * k)
        t = fn(lv_d, d_piece) if dpc > 1 else 0.0
        if edp > 1 and expert_params:
            t += fn(lv_e, e_piece)
        return k * t

    gather, reduce = per_layer("ag"), per_layer("rs")
    eta = ctx.rt.zero3_overlap

    def exposed(comm: float, compute: float) -> float:
        # What the framework's schedule leaves unhidden, but never less than the compute the hidden part slows.
        return max(0.0, comm - compute) + max(1.0 - eta, OVERLAP_COMPUTE_SLOWDOWN) * min(comm, compute)

    return gather + reduce + n * (exposed(gather, fwd / n) + exposed(gather + reduce, bwd / n))


def _flat(levels: tuple[net.Level, ...]) -> tuple[net.Level, ...]:
    """A group's levels as one level at its slowest tier's bandwidth (no aggregation by inner levels)."""
    if not levels:
        return levels
    slow = min(levels, key=lambda lv: lv.bw)
    members = 1
    for lv in levels:
        members *= lv.members
    return (net.Level(members, slow.bw, any(lv.network for lv in levels), slow.name),)


def stage_cost(
    ctx: CostContext, first: bool, last: bool, moe_layers: int, layers: int, pool: NodePool, next_pool: NodePool | None
) -> StageCost:
    """Costs of a stage of `layers` layers (`moe_layers` of them MoE) on `pool`, sending to `next_pool`."""
    key = (first, last, moe_layers, layers, pool.name, next_pool.name if next_pool is not None else None)
    hit = ctx.stage_cache.get(key)
    if hit is None:
        hit = _stage_cost(ctx, first, last, moe_layers, layers, pool, next_pool)
        ctx.stage_cache[key] = hit
    return hit


def _stage_cost(
    ctx: CostContext, first: bool, last: bool, moe_layers: int, layers: int, pool: NodePool, next_pool: NodePool | None
) -> StageCost:
    model, c = ctx.model, ctx.c
    m = ctx.m
    gpu = ctx.gpu(pool)
    # Multi-token prediction runs on the last rank after the decoder layers: each module one more transformer
    # layer (its compute, collectives, parameters and activations), a 2h -> h projection and one more logits and
    # loss pass [MLM multi_token_prediction.py; the layout's 'm' sits in the last stage, pipeline_layout.py].
    mtp = model.mtp_layers if last else 0
    layers += mtp
    moe_layers += mtp if model.mtp_layer_is_moe else 0
    dense_layers = layers - moe_layers
    parts = {
        "forward": 0.0,
        "backward": 0.0,
        "recompute": 0.0,
        "tp_comm": 0.0,
        "cp_comm": 0.0,
        "ep_comm": 0.0,
        "pp_comm": 0.0,
        "offload": 0.0,
        "launch": 0.0,
    }
    fwd = bwd = wgrad = tp_fwd = 0.0
    for count, is_moe in ((dense_layers, False), (moe_layers, True)):
        if not count:
            continue
        lc = ctx.layer(pool, gpu, is_moe)
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
        tp_fwd += count * lc.tp_fwd
    tokens, tp = ctx.tokens, c.tp
    if last:  # logits GEMM 2*b*s*h*V, backward 2x, and the fp32 softmax/cross-entropy pass (~12 B/logit)
        fp8_logits = ctx.fp8 and ctx.rt.fp8_output_layer  # Megatron keeps the output layer in BF16 (frameworks.py)
        eff = gemm_efficiency(gpu, tokens * 2 * model.hidden_size * model.vocab_size / tp, fp8_logits)
        t_logit = tokens * 2 * model.hidden_size * model.vocab_size / tp / (peak_flops(gpu, fp8_logits) * eff)
        t_ce = hbm_time(gpu, tokens * model.vocab_size / tp * 12)
        if mtp:  # each MTP module: its own logits and loss, and the 2h -> h projection (a dense GEMM)
            proj = tokens * 2 * 2 * model.hidden_size**2 / tp
            t_proj = proj / (peak_flops(gpu, ctx.fp8) * gemm_efficiency(gpu, proj, ctx.fp8))
            t_logit, t_ce = (1 + mtp) * t_logit + mtp * t_proj, (1 + mtp) * t_ce
        parts["forward"] += t_logit + t_ce
        parts["backward"] += 2 * t_logit + t_ce
        fwd += t_logit + t_ce
        bwd += 2 * t_logit + t_ce
        wgrad += t_logit
    # PP: activations b*s*h forward, their gradient backward, per micro-batch per boundary and per model chunk;
    # with the scatter/gather optimisation each TP rank sends 1/tp of it [N21 §3.2, §4.1, §2.2.2].
    tiers = ctx.tiers(pool)
    if c.pp > 1:
        msg = tokens * model.hidden_size * 2 / (tp if ctx.rt.pp_scatter_gather else 1)
        if next_pool is not None and next_pool.name != pool.name:
            nic = min(ctx.tiers(pool)[-1].bw, ctx.tiers(next_pool)[-1].bw)
            hop = net.p2p(nic, True, msg)
        else:
            tier = net.neighbour_tier(tiers, c.gpus_per_stage)
            hop = net.p2p(tier.bw, tier.network, msg)
        pp_t = c.vp * hop
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
        # After every micro-batch's backward: zero the bf16 grads (2 B), autograd accumulates into them (read
        # 2 + 2, write 2), then fp32 += bf16 (read 2 + 4, write 4): 18 B per parameter of HBM traffic outside
        # the GEMMs (Megatron fuses the accumulation into the wgrad GEMM) [frameworks: bf16_optimizer].
        t_acc = hbm_time(gpu, (dense_p + expert_p + emb_p) * 18)
        parts["backward"] += t_acc
        bwd += t_acc
    dpc = c.dp * c.cp
    edp = c.expert_dp  # experts' gradients and optimizer states are sharded over the expert data-parallel group
    # DeepSpeed's BF16_Optimizer keeps its states as ZeRO-1 does, with bf16 grads + the full fp32 accumulation
    # buffer (2 + 4 B) [frameworks: bf16_optimizer].
    state_zero, state_grad = (1, 2 + 4) if ctx.bf16_optimizer else (c.zero_stage, ctx.grad_bytes)
    fp8_params = ctx.w.fp8_param_gather
    wb, gb, ob = state_bytes_per_param(state_zero, dpc, state_grad, ctx.fp8, fp8_params)
    ewb, egb, eob = state_bytes_per_param(state_zero, edp, state_grad, ctx.fp8, fp8_params)
    dp_t = zero_t = 0.0
    dense_total = dense_p + emb_p
    if dpc > 1 or edp > 1:
        lv_d = net.group_levels(tiers, dpc, tp)
        lv_e = net.group_levels(tiers, edp, c.expert_tp * c.ep)
        g_d, g_e = dense_total * ctx.grad_bytes, expert_p * ctx.grad_bytes
        # Parameters all-gather in bf16, or as FP8 with FP8 primary weights [MLM --fp8-param-gather]
        p_d, p_e = dense_total * (1 if fp8_params else 2), expert_p * (1 if fp8_params else 2)

        def coll(kind: str) -> float:
            f = net.all_reduce if kind == "ar" else net.all_gather
            g = f(lv_d, g_d) if dpc > 1 else 0.0
            g += f(lv_e, g_e) if edp > 1 and expert_p else 0.0
            return g

        def gather() -> float:
            t = net.all_gather(lv_d, p_d) if dpc > 1 else 0.0
            return t + (net.all_gather(lv_e, p_e) if edp > 1 and expert_p else 0.0)

        chunk = max(1.0, layers / c.vp if c.pp > 1 else layers)
        # Overlapped reductions run under the last micro-batch's backward, bucket by bucket; one bucket stays
        # exposed [NB communication-overlap]. ZeRO-2 reduces every micro-batch [DeepSpeed #2252].
        last_bwd = bwd
        if ctx.bf16_optimizer:  # bf16 all-reduce of the fp32 buffer after the flush + all-gather [frameworks]
            dp_t = net.all_reduce(lv_d, dense_total * 2) + gather()
        elif c.pp > 1 and ctx.rt.grad_reduce_after_pipeline:  # reduced after the last micro-batch [frameworks]
            dp_t = coll("ar") if c.zero_stage == 0 else coll("rs") + gather()
        elif c.zero_stage == 0:
            full = coll("ar")
            dp_t = overlapped(full, max(full / chunk, full - last_bwd)) if c.overlap_grad_reduce else full
        elif c.zero_stage == 1:
            full = coll("rs")
            dp_t = overlapped(full, max(full / chunk, full - last_bwd)) if c.overlap_grad_reduce else full
            ag = gather()  # updated bf16 params, overlapped with the next forward
            dp_t += overlapped(ag, max(ag / chunk, ag - fwd)) if c.overlap_grad_reduce else ag
        elif c.zero_stage == 2:
            rs = coll("rs")
            dp_t = m * overlapped(rs, max(rs / chunk, rs - bwd)) + gather()
        else:  # ZeRO-3 / FSDP: gather params forward and backward, reduce-scatter grads, each micro-batch [Z20 §7]
            zero_t = m * zero3_exposed(ctx, lv_d, lv_e, dense_total, expert_p, layers, fwd, bwd, dpc, edp)
    opt_params = (dense_total if c.zero_stage == 0 else dense_total / dpc) + (
        expert_p if c.zero_stage == 0 else expert_p / edp
    )
    opt_t = hbm_time(gpu, opt_params * ADAM_BYTES_PER_PARAM)

    # ---- memory ---------------------------------------------------------------------------------------------
    act_layer_d = ctx.activation_per_layer(False)
    act_layer_m = ctx.activation_per_layer(True) if moe_layers else 0.0
    acts = dense_layers * act_layer_d + moe_layers * act_layer_m
    if c.offload_layers and layers:
        # The first offload_layers layers' activations go to host memory while the forward runs on and come back
        # under the backward; at most layers - offload_layers layers' sets stay on the GPU [TE cpu_offloading.rst
        # 'Default Offloading Scheduling'; Megatron --cpu-offloading-num-layers]. The copies use the copy engines;
        # what the pass's compute cannot cover is exposed.
        moved = acts * c.offload_layers / layers
        acts -= moved
        copy = moved / (host_gbytes_per_s(gpu) * 1e9)
        off_f, off_b = max(0.0, copy - fwd), max(0.0, copy - bwd)
        parts["offload"] += off_f + off_b
        fwd += off_f
        bwd += off_b
    sbh = tokens * model.hidden_size
    if first:  # embedding output (+ dropout mask) per micro-batch in flight [MLM theoretical_memory_usage.py]
        acts += sbh * (3 if model.dropout else 2) / (tp if c.sequence_parallel else 1)
    transient = 0.0
    if last:  # fp32 logits + the loss-backward buffer
        transient = tokens * model.vocab_size / tp * ctx.logit_bytes
    if c.recompute == "full":
        transient = max(transient, ctx.recompute_peak(moe_layers > 0))
    if c.zero_stage == 3:  # unsharded bf16 weights in use and prefetched [LA analysis.py training(); frameworks]
        per_layer = (dense_p + expert_p) / max(1, layers)  # stage_params are per TP/EP rank, not yet DP-sharded
        transient += ctx.rt.zero3_live_layers * per_layer * 2
    weights = dense_p * wb + expert_p * ewb
    grads = dense_p * gb + expert_p * egb
    optim = dense_p * ob + expert_p * eob
    emb = emb_p * (wb + gb + ob)
    capacity = gpu.memory_bytes
    return StageCost(
        fwd,
        bwd,
        wgrad,
        parts,
        dp_t,
        zero_t,
        opt_t,
        weights,
        grads,
        optim,
        emb,
        transient,
        ctx.reserve(pool),
        capacity,
        acts,
    )


def pipeline_time(c: ParallelConfig, m: int, stages: list[StageCost]) -> tuple[float, float]:
    """(pipeline time, steady-state part) of one step.

    1F1B/GPipe, unbalanced stages: sum of stage times + (m-1) x the slowest [A22 §5 eq. 2]. Interleaved: the
    fill/drain shrinks by v [N21 §2.2.2]. ZB-H1: each stage's share of the fill/drain is (F+B-W) instead of
    (F+B+W) [Q23 §3]; with t = F+B (B including W) and w = W that is u = t - 2w, and the fill is the sum of u
    over the stages other than the one with the largest u.
    """
    times = [s.time for s in stages]
    slow = max(times)
    steady = m * slow
    if c.schedule == "interleaved-1f1b":
        fill = (sum(times) - slow) / c.vp
    elif c.schedule == "zb-h1":
        u = [s.time - 2 * s.wgrad for s in stages]
        fill = sum(u) - max(u)
    else:
        fill = sum(times) - slow
    return steady + fill, steady


def step_time(c: ParallelConfig, m: int, stages: list[StageCost]) -> tuple[float, list[float]]:
    """Step time and each stage's finishing time.

    Later stages finish their last backward earlier (cool-down), so their DP sync and optimizer step start
    earlier: stage i gains the backward time of the stages before it, over v chunks [MLM schedules.py].
    """
    t_pipe, _ = pipeline_time(c, m, stages)
    ends = []
    slack = 0.0
    for s in stages:
        ends.append(t_pipe - slack + s.end)
        slack += s.bwd / c.vp
    return max(ends), ends


def estimate_training(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, c: ParallelConfig, layout: Layout
) -> Estimate:
    """Estimate one training step."""
    m = layout.microbatches
    ctx = CostContext(model, cluster, w, c, m)
    stages = layout_stages(ctx, layout.stage_pools, layout.stage_layers)
    step, ends = step_time(c, m, stages)
    crit = max(range(c.pp), key=lambda i: ends[i])
    slow = max(range(c.pp), key=lambda i: stages[i].time)
    bd = StepBreakdown(**{k: m * v for k, v in stages[slow].parts.items()})
    bd.dp_comm = stages[crit].dp
    bd.zero_gather = stages[crit].zero
    bd.optimizer = stages[crit].opt
    accounted = bd.forward + bd.backward + bd.recompute + bd.tp_comm + bd.cp_comm + bd.ep_comm + bd.pp_comm
    accounted += bd.offload + bd.launch
    bd.bubble = max(0.0, step - accounted - bd.dp_comm - bd.zero_gather - bd.optimizer)

    tokens = w.global_batch_size * w.seq_len
    model_flops, hw_flops = _step_flops(model, ctx.w, c)
    peak_sum = sum(cluster.gpu_of(p).bf16_tflops * 1e12 * c.gpus_per_stage for p in layout.stage_pools)
    stage_out = []
    for i, s in enumerate(stages):
        pool = layout.stage_pools[i]
        acts = inflight_microbatches(c, i, m, layout.stage_layers[i]) * s.act_per_mb
        total = s.static + acts
        mem = MemoryBreakdown.model_construct(
            weights=s.weights / GB,
            gradients=s.grads / GB,
            optimizer=s.optim / GB,
            embedding_lm_head=s.emb / GB,
            activations=acts / GB,
            kv_cache=0.0,
            transient=s.transient / GB,
            reserve=s.reserve / GB,
            total=total / GB,
            capacity=s.capacity / GB,
        )
        stage_out.append(
            StageEstimate.model_construct(
                index=i,
                pool=pool.name,
                gpu=cluster.gpu_of(pool).name,
                layers=layout.stage_layers[i],
                memory_gb=mem,
                fits=total <= s.capacity,
                time_s=m * s.time,
                forward_s=s.fwd,
                backward_s=s.bwd,
            )
        )
    over = [s for s in stage_out if not s.fits]
    reason = None
    if over:
        worst = max(over, key=lambda s: s.memory_gb.total / s.memory_gb.capacity)
        reason = (
            f"stage {worst.index} needs {worst.memory_gb.total:.1f} GB per GPU; {worst.gpu} has "
            f"{worst.memory_gb.capacity:.1f} GB"
        )
    return Estimate(
        mode="training",
        feasible=not over,
        reason=reason,
        gpus=c.gpus,
        step_time_s=step,
        tokens_per_s=tokens / step,
        mfu=model_flops / (step * peak_sum),
        hfu=hw_flops / (step * peak_sum),
        microbatches=m,
        stages=stage_out,
        breakdown=bd,
        peak_memory_gb=max(s.memory_gb.total for s in stage_out),
        notes=_notes(cluster, layout, bd.launch),
    )


def layout_stages(ctx: CostContext, pools: tuple[NodePool, ...], layers: tuple[int, ...]) -> list[StageCost]:
    """The StageCost of every stage of a layout (pool and layer count per stage)."""
    p = len(layers)
    out = []
    start = 0
    for i, (pool, n) in enumerate(zip(pools, layers, strict=True)):
        moe = ctx.moe_count(start, n)
        nxt = pools[i + 1] if i + 1 < p else None
        out.append(stage_cost(ctx, i == 0, i == p - 1, moe, n, pool, nxt))
        start += n
    return out


def _step_flops(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> tuple[float, float]:
    """Model FLOPs (forward + 2x backward, full attention as Megatron-Core counts it) and hardware FLOPs (with
    the recompute forward) per step [MLM training.py num_floating_point_operations; K22 App. A]."""
    s = w.seq_len
    dense, moe = layer_flops(model, False), layer_flops(model, True)
    n_moe = model.num_moe_layers
    n_dense = model.num_layers - n_moe
    layer_fwd = n_dense * (dense.gemm + dense.attn_per_ctx * s) + n_moe * (moe.gemm + moe.attn_per_ctx * s)
    logits = 2 * model.hidden_size * model.vocab_size
    if model.mtp_layers:  # each MTP module: a layer, its projection and its logits [MLM num_floating_point_operations]
        mtp = moe if model.mtp_layer_is_moe else dense
        layer_fwd += model.mtp_layers * (mtp.gemm + mtp.attn_per_ctx * s + 2 * 2 * model.hidden_size**2)
        logits *= 1 + model.mtp_layers
    tokens = w.global_batch_size * s
    model_flops = 3 * tokens * (layer_fwd + logits)
    extra = 0.0
    if c.recompute == "full":
        extra = tokens * layer_fwd
    else:
        mods = c.modules
        if "core_attn" in mods and not w.flash_attention:
            extra += tokens * (n_dense * dense.attn_per_ctx + n_moe * moe.attn_per_ctx) * s
        if "mla_up_proj" in mods:
            extra += tokens * (n_dense * dense.mla_up + n_moe * moe.mla_up)
        if "mlp" in mods:
            extra += tokens * n_dense * dense.mlp
        if "moe" in mods:
            extra += tokens * n_moe * moe.mlp
        elif "shared_experts" in mods:
            extra += tokens * n_moe * moe.shared
    return model_flops, model_flops + extra


def _notes(cluster: ClusterSpec, layout: Layout, launch_s: float) -> list[str]:
    notes = ["MFU counts model FLOPs as Megatron-Core does (full s^2 attention, no recompute), against BF16 peak."]
    if launch_s > 0:
        notes.append(
            f"MoE layers run eagerly: {launch_s:.2f} s of the step waits on the host's kernel launches after each "
            "dispatcher sync; full-iteration CUDA graphs (cuda_graphs full_iteration, with padded expert capacity) "
            "remove it."
        )
    gpus = {cluster.gpu_of(p).name: cluster.gpu_of(p) for p in layout.stage_pools}.values()
    fams = {g.family for g in gpus}
    for g in gpus:
        if not has_flash_attention(g):
            notes.append(
                f"{g.name} has no FlashAttention kernel (flash-attn does not run on {g.family}): attention is "
                "priced as the unfused scale-mask-softmax path Megatron-LM and DeepSpeed run there."
            )
    if fams - set(FRAMEWORK_FACTOR):
        notes.append(
            f"GPU families {sorted(fams - set(FRAMEWORK_FACTOR))} use the default framework efficiency "
            f"({FRAMEWORK_FACTOR_DEFAULT}; no factor fitted to their own runs)."
        )
    return notes
