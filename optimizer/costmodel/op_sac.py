"""torchtitan's per-op selective activation checkpointing (activation_checkpoint.mode selective, the op policy):
what a checkpointed transformer block keeps for its backward and what the backward recomputes.

The policy [torchtitan b5bcd76 torchtitan/distributed/activation_checkpoint.py SelectiveAC._get_custom_policy;
the save set _get_default_save_ops: torch._functorch.partitioners.get_default_op_list().compute_intensive_ops,
aten.linear, the SDPA / flex attention kernels, aten.max, reduce_scatter and all_to_all] wraps each block in one
checkpoint and, in forward order, saves the output of every odd-numbered mm / linear and recomputes the even ones;
attention kernel outputs and reduce-scatter / all-to-all results are saved; everything else (norms, rotary
embedding, activation functions, residual adds, all-gathers) is recomputed. torchao's float8 linears reach the
policy as aten.mm on Float8TrainingTensor arguments (float8_linear.py matmul_with_hp_or_float8_args calls
torch.mm; the checkpoint's dispatch mode runs before the subclass), so FP8 counts the same. The routed experts'
grouped GEMM (aten._grouped_mm) is in neither list: it is recomputed whole."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.spec.model_spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Matmul:
    """One mm / linear of a block's forward: its output width per token and how TP splits it."""

    width: int
    """Output features per token before any TP split."""
    column_parallel: bool
    """True: the output is split over TP ranks (ColwiseParallel); False: the full width on every rank (a
    RowwiseParallel partial sum before its reduce-scatter, or a replicated projection)."""
    flops_per_token: float
    """Forward FLOPs per token before the TP split."""


def block_matmuls(model: ModelSpec, moe_layer: bool) -> tuple[Matmul, ...]:
    """The block's mm / linear calls in forward order, as torchtitan's models issue them: attention wq, wk, wv
    (MLA: wq_a, wq_b, wkv_a, wkv_b), wo; then the dense FFN w1, w3, w2 (GeLU: w1, w2), or for an MoE layer the
    router gate and the shared experts' w1, w3, w2 (the routed experts are one grouped GEMM, not an mm)."""
    h = model.hidden_size
    out: list[Matmul] = []
    if model.mla is not None:
        m, a = model.mla, model.num_attention_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out.append(Matmul(m.q_lora_rank, False, 2.0 * h * m.q_lora_rank))
            out.append(Matmul(a * qk, True, 2.0 * m.q_lora_rank * a * qk))
        else:
            out.append(Matmul(a * qk, True, 2.0 * h * a * qk))
        out.append(Matmul(m.kv_lora_rank + m.qk_rope_head_dim, False, 2.0 * h * (m.kv_lora_rank + m.qk_rope_head_dim)))
        wkv_b = a * (m.qk_nope_head_dim + m.v_head_dim)
        out.append(Matmul(wkv_b, True, 2.0 * m.kv_lora_rank * wkv_b))
        out.append(Matmul(h, False, 2.0 * a * m.v_head_dim * h))
    else:
        q, kv = model.q_dim, model.kv_dim
        out += [Matmul(q, True, 2.0 * h * q), Matmul(kv, True, 2.0 * h * kv), Matmul(kv, True, 2.0 * h * kv)]
        out.append(Matmul(h, False, 2.0 * q * h))
    gated = model.activation == "swiglu"
    if moe_layer and model.moe is not None:
        out.append(Matmul(model.moe.num_experts, False, 2.0 * h * model.moe.num_experts))
        ffn = model.moe.shared_ffn
    else:
        ffn = model.ffn_hidden_size
    if ffn:
        out.append(Matmul(ffn, True, 2.0 * h * ffn))
        if gated:
            out.append(Matmul(ffn, True, 2.0 * h * ffn))
        out.append(Matmul(h, False, 2.0 * ffn * h))
    return tuple(out)


def saved_matmuls(model: ModelSpec, moe_layer: bool) -> tuple[tuple[Matmul, bool], ...]:
    """Each matmul with whether the policy saves its output: every odd-numbered one (1st, 3rd, ...)."""
    return tuple((mm, i % 2 == 0) for i, mm in enumerate(block_matmuls(model, moe_layer)))


def saved_bytes_per_token(model: ModelSpec, tp: int, sequence_parallel: bool, moe_layer: bool) -> float:
    """Bytes one GPU keeps per token of a micro-batch for one block's backward (tokens counted before the SP split):
    the block input (the checkpoint's own), the saved matmul outputs (bf16; a column-parallel one split by TP, a
    row-parallel partial sum whole), the attention output and its log-sum-exp (fp32 per head), with TP the two
    reduce-scatter results, for an MoE layer the dispatched and combined tokens (all-to-all results)."""
    h, t = model.hidden_size, tp
    sp_div = t if sequence_parallel else 1
    saved = 2.0 * h / sp_div
    for mm, keep in saved_matmuls(model, moe_layer):
        if keep:
            saved += 2.0 * mm.width / (t if mm.column_parallel else 1)
    v_dim = model.mla.v_head_dim * model.num_attention_heads if model.mla is not None else model.q_dim
    saved += (2.0 * v_dim + 4.0 * model.num_attention_heads) / t
    if t > 1:
        saved += 2 * 2.0 * h / sp_div
    if moe_layer and model.moe is not None:
        saved += 2 * 2.0 * model.moe.top_k * h / sp_div
    return saved


def recomputed_flops_per_token(model: ModelSpec, moe_layer: bool) -> float:
    """Forward FLOPs per token of the unsaved mms, which the backward repeats (before the TP split). An MoE layer
    also repeats its routed experts' grouped GEMM whole (not counted here: the caller prices it at the experts'
    own rate)."""
    return sum(mm.flops_per_token for mm, keep in saved_matmuls(model, moe_layer) if not keep)
