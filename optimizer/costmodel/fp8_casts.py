"""HBM traffic of casting GEMM operands to FP8 where the framework runs the casts as their own kernels.

torchao's Float8Linear with dynamic tensorwise scaling (torchtitan model.converters float8) casts each GEMM operand
itself [torchao float8/float8_linear.py matmul_with_hp_or_float8_args: the input to FP8 for the forward GEMM and
again, column-major, for the weight-gradient GEMM; the output gradient for the data-gradient GEMM and, column-major,
for the weight-gradient GEMM; each cast an amax reduction and a scaled copy]. Under torch.compile the forward's
amax fuses into the producing kernel and the two gradient casts share one amax: per input element 3 B forward
(read bf16, write FP8) and 3 B backward; per output-gradient element 2 B amax + 2 x 3 B casts = 8 B. Transformer
Engine fuses its casts into the norm and activation kernels and its cast-transpose (Megatron): no separate
term there (Framework.fp8_cast_bytes)."""

from __future__ import annotations

from optimizer.costmodel.op_sac import block_matmuls
from optimizer.spec.model_spec import ModelSpec


def linear_io_per_token(model: ModelSpec, moe_layer: bool) -> tuple[float, float]:
    """(GEMM input elements, GEMM output elements) per token of one layer's linears before any TP split: the
    attention projections, the dense FFN or the router and shared experts (op_sac.block_matmuls), and an MoE
    layer's routed experts for its top_k token copies."""
    matmuls = block_matmuls(model, moe_layer)
    ins = sum(mm.flops_per_token / (2 * mm.width) for mm in matmuls)
    outs = float(sum(mm.width for mm in matmuls))
    if moe_layer and model.moe is not None:
        moe, h = model.moe, model.hidden_size
        gated = model.activation == "swiglu"
        f = moe.expert_ffn_hidden_size
        ins += moe.top_k * (h + f)
        outs += moe.top_k * ((2 if gated else 1) * f + h)
    return ins, outs
