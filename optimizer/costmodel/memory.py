"""Per-GPU memory terms [formulas A]."""

from __future__ import annotations

from optimizer.costmodel.constants import CUDA_CONTEXT_BYTES, FRAGMENTATION_FRACTION, TRAINING_SLACK_CAP_BYTES
from optimizer.costmodel.op_sac import saved_bytes_per_token
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import rank_chunks
from optimizer.spec.stage_layers import chunk_inflight_counts


def stage_params(
    model: ModelSpec, c: ParallelConfig, dense_layers: int, moe_layers: int, first: bool, last: bool
) -> tuple[float, float, float]:
    """Parameters one GPU of a stage holds: (dense layer params, expert params, embedding + LM head params).

    Dense weights are split by TP; routed experts by EP x ETP (the expert tensor-parallel degree, tp unless set)
    [MLM theoretical_memory_usage.py, parallel_state.py expert grid; LA], with a serving engine's redundant
    replicas on top ((E + R) / E of them, ParallelConfig.redundant_experts). The first stage
    holds the embedding, the last the LM head; tied embeddings are duplicated on the last stage when pp > 1 [A5].
    """
    expert = float(moe_layers * model.moe_expert_params_per_layer)
    if model.moe is not None:
        expert *= c.expert_copies(model.moe.num_experts)
    dense = dense_layers * model.dense_layer_params + moe_layers * (
        model.moe_layer_params - model.moe_expert_params_per_layer
    )
    emb = 0.0
    if first:
        emb += model.embedding_params
    if last:
        emb += model.lm_head_params
        if model.tied_embeddings and c.pp > 1:
            emb += model.vocab_size * model.hidden_size
    return dense / c.tp, expert / (c.expert_tp * c.ep), emb / c.tp


def state_bytes_per_param(
    zero_stage: int, shards: int, grad_bytes: int, fp8: bool, fp8_params: bool = False, remainders: bool = False
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter after ZeRO sharding over `shards` ranks.

    bf16 weights 2 B, main grads 4 B (fp32, Megatron) or 2 B, fp32 master + Adam m + v 12 B [Z20 §3.1; MLM
    dist_optimizer.md: 18 B/param plain, 6 + 12/d with the distributed optimizer]. FP8 training keeps an extra
    1-byte FP8 copy of each weight [TE fp8_primer]. With FP8 primary weights (`fp8_params`, Megatron
    --fp8-param-gather) there is no bf16 copy: the FP8 weight and the transposed FP8 copy TE keeps for the
    backward's data-gradient GEMM, 1 + 1 B (TE Float8Tensor rowwise and columnwise data; MXFP8 the same bytes
    plus a scale per 32) [MLM README 'FP8 Primary Weights'; TE quantized_model_init]. With Megatron's
    precision-aware optimizer (`remainders`) TE FusedAdam keeps the fp32 master weight as the 16 bits the bf16
    weight lacks, an int16 per parameter: 2 + 8 B of optimizer state [TE d0067d0 optimizers/fused_adam.py
    _initialize_state: torch.zeros_like(param, dtype=torch.int16) when store_param_remainders; MLM d98e8a6
    optimizer/__init__.py passes OptimizerConfig.store_param_remainders, default True].
    """
    w = 2.0 + (1.0 if fp8 else 0.0)
    if fp8_params:
        w = 2.0
    g = float(grad_bytes)
    o = 10.0 if remainders else 12.0
    if zero_stage >= 1:
        o /= shards
    if zero_stage >= 2:
        g /= shards
    if zero_stage >= 3:
        w /= shards
    return w, g, o


def activation_bytes_per_layer(
    model: ModelSpec,
    c: ParallelConfig,
    seq: int,
    moe_layer: bool,
    flash: bool,
    fp8: bool = False,
    selective: str = "modules",
) -> float:
    """Activation bytes one layer stores per micro-batch on one GPU [K22 §4 Table 2, generalised to GQA/SwiGLU/MoE].

    Replicated across TP unless sequence parallel: norm inputs 4sbh, QKV and MLP inputs 2sbh each, dropout masks
    2sbh. Split by TP: Q, K, V 2sb(q+2kv), attention output 2sbq, MLP 4sbf (GeLU) or 6sbf (SwiGLU), and without
    flash attention the softmax 2as^2b (+3as^2b with dropout); flash keeps 4asb of softmax statistics.
    Selective recompute drops what its modules discard (core_attn: the s^2 terms [K22 §5]; the others as
    optimizer/spec/recompute_modules.py reads them from Megatron); full recompute keeps only the layer input 2sbh.

    FP8 (Transformer Engine, as Megatron-Core builds the layer: LayerNormLinear for QKV and fc1, Linear for the
    projection and fc2) saves each GEMM input for its weight gradient as one FP8 copy, 1 byte per element: the QKV
    and fc1 inputs (the normalised activations, rowwise with SP for the backward all-gather, else columnwise
    only: layernorm_linear.py `ln_out.update_usage(rowwise_usage=False)`) and the fc2 input (the activation
    output, whose bf16 tensor is then freed: linear.py 'Discard row-wise data'); the projection's FP8 input is
    kept next to the attention output that flash attention saves in bf16 for its own backward (+1sbq); the fc1
    output (the activation function's input) stays bf16 [TE d0067d0 transformer_engine/pytorch/module].

    `selective` is the framework's meaning of recompute=selective (Framework.selective_recompute): "modules" as
    above, "every_other_matmul" torchtitan's per-op policy (costmodel/op_sac.py).
    """
    b, s, h, t = c.mbs, seq / c.cp, model.hidden_size, c.tp
    sbh = s * b * h
    sp_div = t if c.sequence_parallel else 1
    if c.recompute == "full":
        return 2 * sbh / sp_div
    if c.recompute == "selective" and selective == "every_other_matmul":
        return s * b * saved_bytes_per_token(model, t, c.sequence_parallel, moe_layer)
    mods = c.modules  # selective recompute modules [optimizer/spec/recompute_modules.py]
    moe = model.moe if moe_layer else None
    gemm_in = 1 if fp8 else 2  # bytes per element of a saved GEMM input
    # Replicated over TP unless SP: the two norm inputs (the residual stream), the norm outputs that feed the
    # attention and MLP GEMMs, dropout masks, and for MoE the permuted tokens (top_k copies).
    attn_in = mlp_in = gemm_in * sbh
    if "layernorm" in mods:  # separate norms only: MLA's input norm, an MoE layer's pre-MLP norm
        attn_in = 0.0 if model.mla is not None else attn_in
        mlp_in = 0.0 if moe is not None else mlp_in
    if "mlp" in mods and moe is None:  # the dense MLP checkpointed from its input (the residual)
        mlp_in = 0.0
    replicated = 4 * sbh + attn_in + mlp_in + (2 * sbh if model.dropout else 0)
    fc1_out = 4 if model.activation == "swiglu" else 2  # bf16 activation-function input, per element of width
    if moe is not None:
        routed = (fc1_out + (0 if "moe_act" in mods else gemm_in)) * s * b * moe.top_k * moe.expert_ffn_hidden_size
        shared = 0.0 if "shared_experts" in mods else (fc1_out + gemm_in) * s * b * moe.shared_ffn
        # The routed experts' fc1 input: the top_k permuted copies of each token, kept as the grouped GEMM's
        # saved input, one FP8 byte under FP8 (TE GroupedLinear saves the quantized input, columnwise only;
        # Megatron keeps that default unless expert fc1 offloading is on [MLM d98e8a6 moe/experts.py
        # set_save_original_input; TE d0067d0 pytorch/module/grouped_linear.py]), else bf16.
        permuted = gemm_in * moe.top_k * sbh
        if "moe" in mods:  # the whole MoE layer checkpointed from its input
            routed = shared = permuted = 0.0
        replicated += permuted
        mlp = routed + shared
    else:
        mlp = 0.0 if "mlp" in mods else (fc1_out + gemm_in) * s * b * model.ffn_hidden_size
    qkv = 0.0 if "mla_up_proj" in mods and model.mla is not None else 2 * s * b * (model.q_dim + 2 * model.kv_dim)
    attn_out = 2 + (1 if fp8 else 0)
    split = qkv + attn_out * s * b * model.q_dim + mlp
    a = model.num_attention_heads
    if flash:
        split += 4 * a * s * b
    elif "core_attn" not in mods:
        split += (5 if model.dropout else 2) * a * s * s * b
    return replicated / sp_div + split / t


def inflight_microbatches(c: ParallelConfig, stage: int, m: int, layers: int | None = None) -> float:
    """Micro-batches whose activations stage `stage` holds at its peak, in units of its full layer set.

    GPipe: all m [N21 §2.2.1]. 1F1B and ZB-H1: min(p - r, m) [MLM schedules.py; Q23]. Interleaved: the warm-up
    of (p - r - 1)*2 + (v - 1)*p chunks plus the one in flight [MLM schedules.py]; each chunk holds its share of
    the rank's `layers` (split by pipeline_layout.rank_chunks; 1/v each when v divides them, which for stage 0 gives
    p(1 + (p-1)/(pv)) [K22 §4.2.3]).
    """
    p, v = c.pp, c.vp
    if c.schedule == "gpipe":
        return float(m)
    if c.ep_comm_overlap and p == 1:  # combined 1F1B: the next micro-batch's forward runs beside this backward
        return float(min(2, m))
    if c.schedule == "interleaved-1f1b":
        # EP overlap adds one warm-up micro-batch [MLM schedules.py get_pp_rank_microbatches]
        counts = chunk_inflight_counts(p, v, stage, m, extra=1 if c.ep_comm_overlap else 0)
        if not layers:
            return sum(counts) / v
        chunks = rank_chunks(c.pipeline_layout, p, v, stage, layers)
        return sum(n * x for n, x in zip(counts, chunks, strict=True)) / layers
    return float(min(p - stage, m))


# The last stage's logits per token and vocabulary entry: fp32 logits and the loss-backward buffer (4 + 2 bytes)
# [MLM; LA get_loss_bwd_memory]. Megatron's fused vocab-parallel cross entropy (and Megatron-DeepSpeed's copy).
LOGIT_BYTES = 4 + 2
# torchtitan's loss is the unfused torch cross entropy on an fp32 upcast (components/loss.py cross_entropy_loss:
# F.cross_entropy(pred.float(), ...)): the bf16 logits (2) beside their fp32 copy (4) and log_softmax's fp32
# output (4) in forward; in backward the saved output, its gradient and the input gradient, all fp32 (12), the
# bf16 logits freed before (trainer.py `del pred`). The larger of the two peaks.
UNFUSED_LOGIT_BYTES = 4 + 4 + 4


def reserve_bytes(capacity_bytes: float, extra: float = 0.0, slack: float = FRAGMENTATION_FRACTION) -> float:
    """CUDA context + communicator buffers + allocator slack [A7]; `slack` is a pool's calibrated fraction."""
    return CUDA_CONTEXT_BYTES + slack * capacity_bytes + extra


def training_reserve_bytes(capacity_bytes: float, slack: float = FRAGMENTATION_FRACTION) -> float:
    """reserve_bytes of a training run: the default slack stops at TRAINING_SLACK_CAP_BYTES (expandable segments);
    a pool's fitted fraction applies as fitted."""
    if slack == FRAGMENTATION_FRACTION:
        return CUDA_CONTEXT_BYTES + min(slack * capacity_bytes, TRAINING_SLACK_CAP_BYTES)
    return reserve_bytes(capacity_bytes, slack=slack)
