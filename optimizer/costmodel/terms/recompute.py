"""Forward work that activation recompute repeats before the backward, per layer and micro-batch [K22 §5]."""

from __future__ import annotations

from optimizer.costmodel.compute import LayerFlops, hbm_time
from optimizer.costmodel.constants import BF16_BYTES
from optimizer.costmodel.op_sac import recomputed_flops_per_token
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.model_spec import ModelSpec

# HBM bytes per element of the recomputed pointwise ops (bf16): a norm reads and writes each value (2 + 2); the MLP
# activation reads the fc1 output and writes the fc2 input, SwiGLU reading its two halves (2 + 2 + 2) [K22 §4].
NORM_BYTES_PER_VALUE = 4
SWIGLU_ACT_BYTES = 6
GELU_ACT_BYTES = 4
# The MoE token permutation reads and writes each routed copy on dispatch and again on combine [MLM moe_utils.py
# permute / unpermute].
PERMUTE_ACCESSES = 4


def op_sac_recompute(
    model: ModelSpec, lf: LayerFlops, moe_layer: bool, t_rest: float, t_routed: float, t_ew: float
) -> float:
    """torchtitan's op-level selective recompute: the unsaved matmuls (at the layer's non-routed GEMM time per
    FLOP), the routed experts and every pointwise op [costmodel/op_sac.py]."""
    dense_flops = lf.gemm - lf.routed
    rc = t_ew + (t_routed if moe_layer else 0.0)
    rc += recomputed_flops_per_token(model, moe_layer) * (t_rest / dense_flops if dense_flops else 0.0)
    return rc


def module_recompute(
    gpu: GPUSpec,
    model: ModelSpec,
    lf: LayerFlops,
    moe_layer: bool,
    modules: frozenset[str],
    tokens: float,
    tp: int,
    sequence_parallel: bool,
    flash_attention: bool,
    t_gemm: float,
    t_core: float,
) -> float:
    """Forward work that selective recompute repeats before the backward, per micro-batch: the modules in
    optimizer/spec/recompute_modules.py (Megatron's --recompute-modules). GEMM parts at the layer's GEMM time per
    FLOP; norms and activation functions at HBM speed (costmodel/compute.py elementwise_bytes_per_token)."""
    if not modules:
        return 0.0
    moe = model.moe if moe_layer else None
    sp_div = tp if sequence_parallel else 1
    per_flop = t_gemm / lf.gemm if lf.gemm else 0.0
    rc = 0.0
    if "core_attn" in modules and not flash_attention:
        rc += t_core
    if "layernorm" in modules:  # a norm reads and writes h bf16 values per token
        norms = (1 if model.mla is not None else 0) + (1 if moe is not None else 0)
        rc += hbm_time(gpu, norms * NORM_BYTES_PER_VALUE * model.hidden_size * tokens / sp_div)
    if "mla_up_proj" in modules:
        rc += lf.mla_up * per_flop
    act_bytes = SWIGLU_ACT_BYTES if model.activation == "swiglu" else GELU_ACT_BYTES
    if moe is not None:
        if "moe" in modules:
            rc += lf.mlp * per_flop
            rc += hbm_time(gpu, tokens * (act_bytes * moe.top_k * moe.expert_ffn_hidden_size / tp))
            rc += hbm_time(gpu, tokens * PERMUTE_ACCESSES * moe.top_k * model.hidden_size * BF16_BYTES / sp_div)
        else:
            if "moe_act" in modules:
                rc += hbm_time(gpu, tokens * act_bytes * moe.top_k * moe.expert_ffn_hidden_size / tp)
            if "shared_experts" in modules:
                rc += lf.shared * per_flop
    elif "mlp" in modules:
        rc += lf.mlp * per_flop + hbm_time(gpu, tokens * act_bytes * model.ffn_hidden_size / tp)
    return rc
