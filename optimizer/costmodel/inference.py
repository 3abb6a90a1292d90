"""Time to first token, time per output token and memory of one serving configuration [formulas G]."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel import constants
from optimizer.costmodel import network as net
from optimizer.costmodel.compute import (
    gemm_efficiency,
    hbm_time,
    layer_flops,
    mlp_width_and_permutation,
    overlapped,
    peak_flops,
)
from optimizer.costmodel.constants import (
    CUDA_GRAPHS_BYTES,
    FP8_CAST_KERNELS_PER_LAYER,
    KERNEL_LAUNCH_S,
    KERNELS_PER_LAYER,
)
from optimizer.costmodel.memory import reserve_bytes, stage_params
from optimizer.costmodel.moe_serving import routed_load_imbalance
from optimizer.costmodel.result import (
    MFU_INFERENCE,
    Estimate,
    MemoryBreakdown,
    StageEstimate,
    StepBreakdown,
    memory_overrun_gb,
    memory_shortfall,
)
from optimizer.costmodel.serving_engines import EngineLimits, workload_limits
from optimizer.costmodel.speculative import tokens_per_step
from optimizer.frameworks.validation import Layout
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import BYTES, InferenceWorkload

GB = 1e9


def kv_bytes_per_token_per_layer(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> float:
    """KV cache bytes of one token in one layer on one GPU.

    2 * max(n_kv/t, 1) * d_h * B: every TP rank holds at least one KV head [formulas A6; LA]. MLA caches the
    compressed latent and the RoPE key once per token, replicated across TP [DeepSeek-V2 paper §2.1.2].
    """
    if model.mla is not None:
        return (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * kv_dtype_bytes
    return 2 * max(model.kv_heads / tp, 1.0) * model.head_size * kv_dtype_bytes


def serving_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    pool: NodePool,
    layers: int,
    moe_layers: int,
    first: bool,
    last: bool,
) -> tuple[float, float, float, float, float, float]:
    """Bytes per GPU of a serving stage: (weights, embedding/head, KV cache, prefill transient, reserve, capacity).

    KV for batch x (prompt + output) tokens [formulas A6]; the prefill working set is the widest intermediate
    (MLP up/gate) of the batch's prompt tokens; the reserve adds CUDA graphs [A7; VL]."""
    dense_p, expert_p, emb_p = stage_params(model, c, layers - moe_layers, moe_layers, first, last)
    kv = (
        w.batch
        * (w.prompt_len + w.output_len)
        * layers
        * kv_bytes_per_token_per_layer(model, c.tp, BYTES[w.kv_cache_dtype])
    )
    width = (
        model.ffn_hidden_size
        if model.moe is None
        else max(model.ffn_hidden_size, model.moe.top_k * model.moe.expert_ffn_hidden_size)
    )
    transient = w.batch * w.prompt_len * (2 * model.hidden_size + 3 * width / c.tp) * 2
    capacity = cluster.gpu_of(pool).memory_bytes
    return (
        (dense_p + expert_p) * w.weight_bytes,
        emb_p * w.embedding_bytes,
        kv,
        transient,
        reserve_bytes(capacity, CUDA_GRAPHS_BYTES, cluster.calibration_of(pool).memory_reserve),
        capacity,
    )


def _experts_touched(model: ModelSpec, tokens: float) -> float:
    """Expected distinct routed experts a batch of tokens activates: E(1 - (1 - k/E)^tokens) (derived; uniform
    routing). At small batch only the active experts' weights are read [formulas G]."""
    moe = model.moe
    if moe is None:
        return 0.0
    miss: float = (1.0 - moe.top_k / moe.num_experts) ** max(tokens, 1.0)
    return moe.num_experts * (1.0 - miss)


@dataclass(frozen=True)
class StepWork:
    """The work of one forward iteration of a serving engine."""

    gemm_tokens: float
    """Rows of every GEMM: prefill tokens plus one per decoding sequence."""
    attn_pairs: float
    """(query, key) pairs the attention computes: b P^2 / 2 for a causal prefill, b x context for decode."""
    kv_read_tokens: float
    """Cached tokens decode attention reads from the KV cache."""
    head_rows: float
    """Sequences whose last position goes through the LM head."""
    graphs: bool
    """Replayed from CUDA graphs (or launched asynchronously under a busy GPU): no launch cost."""

    @staticmethod
    def prefill(batch: float, prompt: float) -> StepWork:
        return StepWork(batch * prompt, batch * prompt * prompt / 2, 0.0, batch, False)

    @staticmethod
    def decode(seqs: float, ctx: float, graphs: bool = True) -> StepWork:
        return StepWork(seqs, seqs * ctx, seqs * ctx, seqs, graphs)

    @staticmethod
    def engine_decode(limits: EngineLimits, seqs: float, ctx: float, drafts: int = 0) -> StepWork:
        """One decode iteration of `seqs` sequences on a rank as the engine runs it: from a CUDA graph when the
        batch is within the engine's capture limit (EngineLimits.graph_max_batch), else kernel by kernel. With
        `drafts` speculative tokens the target verifies drafts + 1 positions per sequence, reading its context once
        (costmodel/speculative.py)."""
        q = 1 + drafts
        return StepWork(seqs * q, seqs * q * ctx, seqs * ctx, seqs * q, limits.decode_graphs(seqs))

    def __add__(self, other: StepWork) -> StepWork:
        return StepWork(
            self.gemm_tokens + other.gemm_tokens,
            self.attn_pairs + other.attn_pairs,
            self.kv_read_tokens + other.kv_read_tokens,
            self.head_rows + other.head_rows,
            self.graphs and other.graphs,
        )

    def scaled(self, f: float) -> StepWork:
        return StepWork(
            self.gemm_tokens * f, self.attn_pairs * f, self.kv_read_tokens * f, self.head_rows * f, self.graphs
        )


def serving_elementwise_bytes_per_token(model: ModelSpec, moe_layer: bool, engine: str) -> tuple[float, float]:
    """HBM bytes per token of a serving engine's standalone memory-bound kernels in one layer: (replicated over
    TP, split by TP).

    The engines fuse each residual add into the following RMSNorm: one kernel reads the input and the residual and
    writes both back, 8h bytes per norm, two per layer [vLLM csrc/layernorm_kernels.cu fused_add_rms_norm; SGLang
    sgl-kernel fused_add_rmsnorm; TensorRT-LLM's RMSNorm with residual]. vLLM and SGLang run the gated activation
    as its own kernel, reading 2f and writing f (6f bytes) [vLLM csrc/activation_kernels.cu silu_and_mul];
    TensorRT fuses pointwise layers into the neighbouring GEMM's epilogue [TensorRT developer guide, 'Layer
    Fusion'], so TensorRT-LLM has none. An MoE layer also permutes its tokens to the experts and back."""
    width, permutation = mlp_width_and_permutation(model, moe_layer)
    gated = model.activation == "swiglu"
    sharded = 0.0 if engine == "trtllm" else (6.0 if gated else 4.0) * width
    return 16.0 * model.hidden_size + permutation, sharded


def stage_time(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    pool: NodePool,
    start: int,
    layers: int,
    work: StepWork,
    last: bool,
    busiest: StepWork | None = None,
) -> tuple[float, dict[str, float]]:
    """Seconds for one forward iteration through the stage's layers, and its parts. `work` is one rank's mean work;
    under attention data parallelism `busiest` is the work of the rank the others wait for (its prompts are not
    split across ranks: costmodel/moe_serving.py), while the shared routed experts see every rank's tokens."""
    own = busiest if busiest is not None else work
    gpu = cluster.compute_gpu(pool)
    fp8 = w.precision == "fp8"
    wbytes = w.weight_bytes
    tokens = own.gemm_tokens
    kvb = BYTES[w.kv_cache_dtype]
    tp = c.tp
    tiers = net.cluster_tiers(cluster, pool)
    lv = net.group_levels(tiers, tp, 1)
    parts = {"forward": 0.0, "tp_comm": 0.0, "ep_comm": 0.0, "launch": 0.0}
    for is_moe in (False, True):
        moe_count = model.moe_prefix[start + layers] - model.moe_prefix[start]
        count = moe_count if is_moe else layers - moe_count
        if not count:
            continue
        if is_moe and model.moe is not None and (c.ep > 1 or c.attention_dp):
            moe_parts = _shared_expert_layer_time(model, cluster, w, c, pool, work, own)
            for k, v in moe_parts.items():
                parts[k] += count * v
            continue
        lf = layer_flops(model, is_moe)
        eff = gemm_efficiency(
            gpu,
            tokens * lf.largest_gemm_per_token / tp,
            fp8,
            tokens,
            lf.largest_gemm_cols / tp,
            lf.gemm_groups,
        )
        gemm_flops_t = tokens * lf.gemm / tp / (peak_flops(gpu, fp8) * eff)
        attn_flops_t = 0.0
        # Decode attention of an MLA model runs absorbed (W_UK folded into the query, W_UV into the output): scores
        # and values over the latent, 2a(r + d_rope) + 2a r per cached token [DeepSeek-V2 §2.1.2; FlashMLA];
        # prefill attends uncompressed heads.
        decode_pairs = own.kv_read_tokens
        per_ctx = lf.attn_per_ctx
        if model.mla is not None:
            r = model.mla.kv_lora_rank
            absorbed = (
                2 * model.num_attention_heads * (r + model.mla.qk_rope_head_dim) + 2 * model.num_attention_heads * r
            )
            attn_flops_t += decode_pairs * absorbed / tp / (peak_flops(gpu, False) * eff)
            attn_flops_t += (own.attn_pairs - decode_pairs) * per_ctx / tp / (peak_flops(gpu, False) * eff)
        else:
            attn_flops_t += own.attn_pairs * per_ctx / tp / (peak_flops(gpu, False) * eff)
        # Weights read once per forward; MoE reads only the experts the batch touches.
        if is_moe and model.moe is not None:
            # Experts tensor-sharded over the replica's tp GPUs (EP and attention DP price in
            # _shared_expert_layer_time).
            touched = _experts_touched(model, tokens)
            dense_part = model.moe_layer_params - model.moe_expert_params_per_layer
            # Redundant replicas (EPLB) split a hot expert's tokens, so each touched expert's copies are all read.
            copies = c.expert_copies(model.moe.num_experts)
            weight_params = dense_part / tp + model.moe_expert_params_per_layer * copies * touched / (
                model.moe.num_experts * c.expert_tp * c.ep
            )
        else:
            weight_params = model.dense_layer_params / tp
        kv_read = own.kv_read_tokens * kv_bytes_per_token_per_layer(model, tp, kvb)
        repl, shard = serving_elementwise_bytes_per_token(model, is_moe, w.engine)
        # Paged decode attention gathers KV blocks below streaming bandwidth [DECODE_ATTENTION_HBM_SHARE]. Under
        # two-batch overlap each half-batch runs the whole layer, so the layer's weights stream twice [LMSYS
        # large-scale EP blog: with TBO the GEMMs run at half the batch].
        weight_reads = 2 if c.ep_comm_overlap and model.moe is not None else 1
        # Roofline per kernel, the kernels one after another on the stream: the GEMMs against their weight reads,
        # the attention against its KV reads, the memory-bound elementwise kernels [Williams et al. 2009; per-operator
        # roofline as in LLM-Viewer, Yuan et al. 2024, arXiv 2402.16363]. A large decode batch turns the GEMMs
        # compute-bound while the attention stays bound by its KV reads: the two add, they do not hide each other.
        gemm_t = max(gemm_flops_t, hbm_time(gpu, weight_reads * weight_params * wbytes))
        attn_t = max(attn_flops_t, hbm_time(gpu, kv_read / constants.DECODE_ATTENTION_HBM_SHARE))
        layer_t = gemm_t + attn_t + hbm_time(gpu, tokens * (repl + shard / tp))
        tp_t = 2 * net.all_reduce(lv, tokens * model.hidden_size * 2) if tp > 1 else 0.0  # [formulas G]
        # Decode steps within the engine's capture limit replay CUDA graphs: launches ~free [VL optimization].
        # Otherwise (prefill, eager decode past the capture limit) the host launches kernel by kernel.
        kernels = KERNELS_PER_LAYER + (FP8_CAST_KERNELS_PER_LAYER if fp8 else 0)
        launch = 0.0 if own.graphs else kernels * KERNEL_LAUNCH_S
        parts["forward"] += count * layer_t
        parts["tp_comm"] += count * tp_t
        parts["launch"] += count * launch
    if last:  # LM head for the last token of each sequence, a 16-bit GEMM (InferenceWorkload.embedding_bytes)
        parts["forward"] += max(
            own.head_rows * 2 * model.hidden_size * model.vocab_size / tp / (peak_flops(gpu, False) * 0.5),
            hbm_time(gpu, model.vocab_size * model.hidden_size * w.embedding_bytes / tp),
        )
    return sum(parts.values()), parts


def _shared_expert_layer_time(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    pool: NodePool,
    mean: StepWork,
    own: StepWork,
) -> dict[str, float]:
    """Parts of one MoE layer whose routed experts the stage's GPUs share (EP, or experts tensor-sharded under
    attention DP): the waited-for rank's attention, shared experts and router on its own tokens (`own`), the routed
    experts on the busiest EP rank for every rank's tokens (dp x `mean`), and the dispatch and combine as the engine
    runs them [costmodel/moe_serving.py]."""
    assert model.moe is not None
    moe = model.moe
    gpu = cluster.compute_gpu(pool)
    fp8 = w.precision == "fp8"
    wbytes = w.weight_bytes
    tp, h, k = c.tp, model.hidden_size, moe.top_k
    tiers = net.cluster_tiers(cluster, pool)
    lf = layer_flops(model, True)
    tokens = own.gemm_tokens
    # Two-batch overlap runs each half-batch through the layer: weights stream twice [LMSYS large-scale EP blog].
    weight_reads = 2 if c.ep_comm_overlap else 1
    # The rank's own part: attention projections and core, shared experts, router, elementwise kernels.
    # GEMM efficiency as stage_time rates a layer (its largest GEMM, grouped over the experts).
    eff = gemm_efficiency(
        gpu, tokens * lf.largest_gemm_per_token / tp, fp8, tokens, lf.largest_gemm_cols / tp, lf.gemm_groups
    )
    peak, peak16 = peak_flops(gpu, fp8), peak_flops(gpu, False)
    rank_gemm_t = tokens * (lf.gemm - lf.routed) / tp / (peak * eff)
    decode_pairs = own.kv_read_tokens
    if model.mla is not None:  # absorbed decode attention over the latent (as in stage_time)
        r = model.mla.kv_lora_rank
        absorbed = 2 * model.num_attention_heads * (r + model.mla.qk_rope_head_dim) + 2 * model.num_attention_heads * r
        attn_flops_t = decode_pairs * absorbed / tp / (peak16 * eff)
        attn_flops_t += (own.attn_pairs - decode_pairs) * lf.attn_per_ctx / tp / (peak16 * eff)
    else:
        attn_flops_t = own.attn_pairs * lf.attn_per_ctx / tp / (peak16 * eff)
    dense_part = model.moe_layer_params - model.moe_expert_params_per_layer
    kv_read = decode_pairs * kv_bytes_per_token_per_layer(model, tp, BYTES[w.kv_cache_dtype])
    repl, shard = serving_elementwise_bytes_per_token(model, True, w.engine)
    rank_t = (
        max(rank_gemm_t, hbm_time(gpu, weight_reads * dense_part / tp * wbytes))
        + max(attn_flops_t, hbm_time(gpu, kv_read / constants.DECODE_ATTENTION_HBM_SHARE))
        + hbm_time(gpu, tokens * (repl + shard / tp))
    )
    # The routed experts: every attention rank's tokens, the busiest EP rank's share of the pairs.
    pooled = mean.gemm_tokens * (c.dp if c.attention_dp else 1)
    etp = c.expert_tp
    imbalance = routed_load_imbalance(moe, pooled, c.ep, c.redundant_experts)
    pairs = pooled * k / c.ep * imbalance
    routed_flops = pairs * lf.routed / k / etp
    copies = c.expert_copies(moe.num_experts)
    rows = pairs / k  # token-equivalents of the busiest EP rank
    eff_r = gemm_efficiency(
        gpu, rows * lf.largest_gemm_per_token / etp, fp8, rows, lf.largest_gemm_cols / etp, lf.gemm_groups
    )
    touched = _experts_touched(model, pooled) / moe.num_experts
    routed_params = model.moe_expert_params_per_layer * copies / moe.num_experts * touched / (c.ep * etp)
    routed_t = max(routed_flops / (peak * eff_r), hbm_time(gpu, weight_reads * routed_params * wbytes))
    layer_t = rank_t + routed_t
    tp_t = 2 * net.all_reduce(net.group_levels(tiers, tp, 1), tokens * h * 2) if tp > 1 else 0.0  # [formulas G]
    act = 1 if fp8 else 2  # dispatched activations in FP8 under FP8 serving [deepseek-ai/DeepEP README]
    if c.attention_dp and (c.ep == 1 or w.engine == "trtllm"):
        # All-gather every rank's tokens (padded to the busiest rank's count) to every rank, reduce-scatter the
        # outputs back (BF16): TensorRT-LLM without MNNVL, and tensor-sharded experts in every engine.
        lv = net.group_levels(tiers, c.dp, tp)
        padded = tokens * c.dp
        comm_t = net.all_gather(lv, padded * h * act) + net.reduce_scatter(lv, padded * h * 2)
    else:
        # All-to-all: each token to its top_k experts' ranks and back; the busiest rank sends its own tokens' copies
        # and receives its share of the pairs.
        lv = net.group_levels(tiers, c.ep, etp)
        routed = k * h * max(tokens, pooled / max(1, c.ep) * imbalance)
        deepep = deepep_serving_a2a(lv, routed, act, w.engine, decode=own.gemm_tokens <= own.head_rows)
        comm_t = deepep if deepep is not None else net.all_to_all(lv, routed * act) + net.all_to_all(lv, routed * 2)
    if c.ep_comm_overlap and comm_t > 0:
        # Two-batch overlap: one micro-batch's dispatch/combine under the other's compute; the layer takes the
        # longer of the two [SGLang --enable-two-batch-overlap; LMSYS large-scale EP blog, 2025-05].
        comm_t = overlapped(comm_t, max(0.0, comm_t - layer_t))
    kernels = KERNELS_PER_LAYER + (FP8_CAST_KERNELS_PER_LAYER if fp8 else 0)
    return {
        "forward": layer_t,
        "tp_comm": tp_t,
        "ep_comm": comm_t,
        "launch": 0.0 if own.graphs else kernels * KERNEL_LAUNCH_S,
    }


def replica_limits(
    cluster: ClusterSpec, w: InferenceWorkload, c: ParallelConfig, pools: list[NodePool]
) -> EngineLimits:
    """The engine limits of one replica (its smallest GPU decides), read the same way by the fixed-batch estimate,
    the request-rate load (serving_load.ReplicaLoad) and the layout search (search/serving_model.py)."""
    gpu = min((cluster.gpu_of(p) for p in pools), key=lambda g: g.memory_bytes)
    return workload_limits(w, gpu, c.tp, wide_ep=c.dp > 1 and c.ep > 1)


def _stage_estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: InferenceWorkload,
    c: ParallelConfig,
    i: int,
    pool: NodePool,
    start: int,
    layers: int,
    t_pre: float,
    t_dec: float,
) -> StageEstimate:
    """Stage i's memory (serving_memory) and times: `layers` layers from layer `start` on `pool`, prefill `t_pre`
    and decode step `t_dec` seconds."""
    gpu = cluster.gpu_of(pool)
    moe = sum(1 for j in range(start, start + layers) if model.is_moe_layer(j))
    weights, emb, kv, transient, reserve, capacity = serving_memory(
        model, cluster, w, c, pool, layers, moe, i == 0, i == c.pp - 1
    )
    total = weights + emb + kv + transient + reserve
    return StageEstimate(
        index=i,
        pool=pool.name,
        gpu=gpu.name,
        layers=layers,
        memory_gb=MemoryBreakdown(
            weights=weights / GB,
            gradients=0.0,
            optimizer=0.0,
            embedding_lm_head=emb / GB,
            activations=0.0,
            kv_cache=kv / GB,
            transient=transient / GB,
            reserve=reserve / GB,
            total=total / GB,
            capacity=capacity / GB,
        ),
        fits=total <= capacity,
        time_s=t_dec,
        forward_s=t_pre,
        backward_s=0.0,
    )


def estimate_inference(
    model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, c: ParallelConfig, layout: Layout
) -> Estimate:
    """TTFT (prefill of the whole batch), TPOT (one decode step at the mean context) and memory per stage. Each
    iteration is the engine's step (EngineLimits): its host time and, past the CUDA-graph capture limit, its kernel
    launches, as on the request-rate path (serving_load.ReplicaLoad.iteration_s)."""
    pools, layer_counts = layout.stage_pools, layout.stage_layers
    limits = replica_limits(cluster, w, c, list(pools))
    ctx_mean = w.prompt_len + w.output_len / 2
    per_step = tokens_per_step(w.spec_tokens, w.acceptance_rate)
    steps = w.output_len / per_step  # decode iterations per sequence
    p = c.pp
    mb = w.batch / p if w.batch >= p and p > 1 else float(w.batch)  # micro-batches keep every stage busy
    prefill, decode, stage_out = [], [], []
    bd = StepBreakdown()
    start = 0
    for i, (pool, layers) in enumerate(zip(pools, layer_counts, strict=True)):
        last = i == p - 1
        t_pre, parts_pre = stage_time(
            model, cluster, w, c, pool, start, layers, StepWork.prefill(w.batch, w.prompt_len), last
        )
        t_dec, parts_dec = stage_time(
            model, cluster, w, c, pool, start, layers, StepWork.engine_decode(limits, mb, ctx_mean, w.spec_tokens), last
        )
        if last and w.spec_tokens:
            # The k draft steps: one layer and the shared LM head each (costmodel/speculative.py).
            t_draft, parts_draft = stage_time(
                model, cluster, w, c, pool, start + layers - 1, 1, StepWork.engine_decode(limits, mb, ctx_mean), True
            )
            t_dec += w.spec_tokens * t_draft
            parts_dec = {k: v + w.spec_tokens * parts_draft.get(k, 0.0) for k, v in parts_dec.items()}
        prefill.append(t_pre)
        decode.append(t_dec)
        # The step is the prefill (once) and output_len decode iterations: both in the breakdown [issue 48 item 5:
        # leaving the prefill out made the shares sum to 64%].
        for k, v in parts_dec.items():
            setattr(bd, k, getattr(bd, k) + v * steps + parts_pre.get(k, 0.0))
        stage_out.append(_stage_estimate(model, cluster, w, c, i, pool, start, layers, t_pre, t_dec))
        start += layers
    hop = 0.0
    if p > 1:  # one activation hop per stage boundary [formulas G: PP adds a hop per boundary]
        tier = net.cluster_tiers(cluster, pools[0])
        nb = net.neighbour_tier(tier, c.tp)
        hop = net.p2p(nb.bw, nb.network, mb * model.hidden_size * 2)
    # The prefill is one engine iteration: it pays the engine's host time once.
    ttft = sum(prefill) + (p - 1) * hop + limits.host_s
    # Decode: a token passes every stage; with >= p micro-batches the stages work concurrently and the cycle is
    # bounded by p x the slowest stage [formulas G; N21 §2.2]. Every iteration pays the engine's host time.
    tpot = sum(decode) + (p - 1) * hop
    if p > 1 and w.batch >= p:
        tpot = max(tpot, p * max(decode))
    tpot += limits.host_s
    bd.pp_comm = (p - 1) * hop * (steps + 1)
    bd.launch += limits.host_s * (steps + 1)
    total_time = ttft + steps * tpot
    tpot /= per_step  # per output token: an iteration emits per_step tokens per sequence (speculative decoding)
    # What the stages' terms leave of the step: pipeline stages waiting for the slowest (p x the slowest stage
    # above their sum) and overlapped parts the terms do not split.
    bd.bubble = max(0.0, total_time - sum(float(v) for v in bd.model_dump().values()))
    out_tokens_per_s = c.dp * w.batch / tpot
    reason = memory_shortfall(stage_out)
    gen_flops = 2 * model.num_active_parameters * c.dp * w.batch * (w.prompt_len + w.output_len)
    peak_sum = sum(cluster.gpu_of(pl).bf16_tflops * 1e12 * c.gpus_per_stage for pl in pools)
    mfu = gen_flops / (total_time * peak_sum)
    return Estimate(
        mode="inference",
        feasible=reason is None,
        reason=reason,
        gpus=c.gpus,
        step_time_s=total_time,
        tokens_per_s=out_tokens_per_s,
        mfu=mfu,
        hfu=mfu,
        mfu_convention=MFU_INFERENCE,
        microbatches=max(1, min(p, w.batch)),
        stages=stage_out,
        breakdown=bd,
        peak_memory_gb=max(s.memory_gb.total for s in stage_out),
        memory_overrun_gb=memory_overrun_gb(stage_out),
        ttft_s=ttft,
        tpot_s=tpot,
        notes=["TTFT is the prefill of the whole batch; TPOT is one decode step at the mean context length."],
    )


def deepep_serving_a2a(
    levels: tuple[net.Level, ...], routed: float, act: float, engine: str, decode: bool
) -> float | None:
    """Dispatch + combine time of one MoE layer under DeepEP as SGLang (--moe-a2a-backend deepep, --deepep-mode
    auto) and vLLM (--all2all-backend deepep_high_throughput / deepep_low_latency) run it when the EP group spans
    nodes; None where DeepEP is not what runs (one node: the NVLink all-to-all; TensorRT-LLM).

    `routed`: bytes per activation element x copies the busiest rank moves (k x hidden x tokens); `act`: bytes per
    dispatched element (FP8 1, BF16 2); the combine returns BF16.
    - Decode iterations use the low-latency kernels: pure RDMA with NVLink peer access off (NVSHMEM_DISABLE_P2P=1),
      every routed copy through the NIC, intra-node ones included: 39-46 GB/s of a 400 Gb/s CX7 at EP 8-256 (the NIC
      efficiency the tiers use) [deepseek-ai/DeepEP README, "Low-latency kernels with pure RDMA"].
    - Prefill (extend) iterations use the normal kernels: a token crosses the network once per destination node
      and NVLink forwards it to its experts [same README, "Normal kernels with NVLink and RDMA forwarding"]; priced
      as the plain all-to-all for now (see below)."""
    if engine not in ("sglang", "vllm"):
        return None
    network = [lv for lv in levels if lv.network]
    if not network:
        return None
    if decode:
        nic = min(lv.bw for lv in network)
        return routed * act / nic + routed * 2 / nic
    # Prefill: the normal kernels' once-per-node sends (deepep_network_share) are NOT applied: on the in-sample
    # SGLang EP32 prefill rows they move the error from -21% to +35% (the layer's compute side is then too fast),
    # so the plain all-to-all stands until that side is found.
    return None
