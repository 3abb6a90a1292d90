"""A stage's per-GPU memory terms [formulas A]: the parameters it holds (with multi-token prediction's), the bytes
of their weights, gradients and optimizer states after ZeRO sharding, its activations per micro-batch in flight and
its transient buffers. stage.py composes them with the stage's time into a StageCost."""

from __future__ import annotations

from optimizer.costmodel.constants import BF16_BYTES
from optimizer.costmodel.cost_context import CostContext
from optimizer.costmodel.memory import stage_params, state_bytes_per_param
from optimizer.costmodel.terms.data_parallel import secondary_weight_bytes, shard_ranks, zero3_transient_bytes

# A dropout mask, bytes per element [K22 §4 Table 2].
DROPOUT_MASK_BYTES = 1


def stage_param_counts(
    ctx: CostContext, dense_layers: int, moe_layers: int, first: bool, last: bool, mtp: int
) -> tuple[float, float, float]:
    """Parameters one GPU of the stage holds (dense, expert, embedding + LM head; memory.stage_params), with the
    multi-token prediction modules' projections and norms on the last stage; with pp > 1 that rank also holds the
    embedding they read."""
    model, c = ctx.model, ctx.c
    dense_p, expert_p, emb_p = stage_params(model, c, dense_layers, moe_layers, first, last)
    if mtp:
        dense_p += mtp * model.mtp_extra_params / c.tp
        if c.pp > 1 and not model.tied_embeddings:
            emb_p += model.vocab_size * model.hidden_size / c.tp
    return dense_p, expert_p, emb_p


def state_memory(ctx: CostContext, dense_p: float, expert_p: float, emb_p: float) -> tuple[float, float, float, float]:
    """(weights, gradients, optimizer states, embedding states) bytes per GPU. The states are sharded over dp x cp,
    the experts' over the expert data-parallel group; with a shard group over 1/replicas of each [formulas C9];
    hpZ's secondary weight partition on top [formulas C10]. DeepSpeed's BF16_Optimizer keeps its states as ZeRO-1
    does, with bf16 grads + the full fp32 accumulation buffer (2 + 4 B) [frameworks: bf16_optimizer]."""
    c = ctx.c
    dpc, edp = shard_ranks(c)
    state_zero, state_grad = (1, 2 + 4) if ctx.bf16_optimizer else (c.zero_stage, ctx.grad_bytes)
    fp8_params, rem = ctx.w.fp8_param_gather, ctx.w.precision_aware_optimizer
    wb, gb, ob = state_bytes_per_param(state_zero, dpc, state_grad, ctx.fp8, fp8_params, rem)
    ewb, egb, eob = state_bytes_per_param(state_zero, edp, state_grad, ctx.fp8, fp8_params, rem)
    dense_total = dense_p + emb_p
    return (
        dense_p * wb + expert_p * ewb + secondary_weight_bytes(dense_total + expert_p, c.secondary_shard_ranks),
        dense_p * gb + expert_p * egb,
        dense_p * ob + expert_p * eob,
        emb_p * (wb + gb + ob),
    )


def layer_activation_bytes(ctx: CostContext, dense_layers: int, moe_layers: int) -> float:
    """The stage's layers' activations per micro-batch in flight (memory.activation_bytes_per_layer), bytes."""
    act_layer_d = ctx.activation_per_layer(False)
    act_layer_m = ctx.activation_per_layer(True) if moe_layers else 0.0
    return dense_layers * act_layer_d + moe_layers * act_layer_m


def embedding_activation_bytes(ctx: CostContext) -> float:
    """The first stage's embedding output (+ dropout mask) per micro-batch in flight, bytes
    [MLM theoretical_memory_usage.py]."""
    model, c = ctx.model, ctx.c
    sbh = ctx.tokens * model.hidden_size
    emb_bytes = BF16_BYTES + DROPOUT_MASK_BYTES if model.dropout else BF16_BYTES
    return sbh * emb_bytes / (c.tp if c.sequence_parallel else 1)


def transient_bytes(
    ctx: CostContext, last: bool, moe_layers: int, layers: int, dense_p: float, expert_p: float
) -> float:
    """Buffers alive for part of the step, bytes: the last stage's fp32 logits + the loss-backward buffer; under
    full recompute the larger of those and one layer's working set; under ZeRO-3 the unsharded bf16 weights in use
    and prefetched [LA analysis.py training(); frameworks]."""
    c = ctx.c
    transient = 0.0
    if last:
        transient = ctx.tokens * ctx.model.vocab_size / c.tp * ctx.logit_bytes
    if c.recompute == "full":
        transient = max(transient, ctx.recompute_peak(moe_layers > 0))
    if c.zero_stage == 3:
        transient += zero3_transient_bytes(dense_p, expert_p, layers, ctx.rt.zero3_live_layers)
    return transient
