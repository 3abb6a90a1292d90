"""Megatron-Core's selective recompute modules (`--recompute-granularity selective --recompute-modules ...`): the
names, which models each applies to, and the set the planner searches. One source of truth for the memory model
(costmodel/memory.py), the time model (costmodel/training.py), validation, the search and the exports.

What each module drops and recomputes, read from Megatron-LM d98e8a6 (TransformerConfig.recompute_modules):
- core_attn: the attention core (normal checkpoint; the default set). With flash attention it saves nothing.
- layernorm: the outputs of input_layernorm and pre_mlp_layernorm where they are separate modules
  (transformer_layer.py: skipped when the norm is an IdentityOp, i.e. fused into TE's LayerNormLinear, as in
  dense GQA layers; MLA attention and MoE layers keep separate norms). Output-discarding; under FP8 the following
  GEMMs save their original input instead of an FP8 copy (set_save_original_input), so that copy goes too.
- mla_up_proj: MLA's Q/K/V up-projections and RoPE (multi_latent_attention.py qkv_up_checkpoint): Q, K and V are
  discarded after the core attention and recomputed from the compressed latents. Output-discarding.
- moe_act: the routed experts' activation function (moe/experts.py activation_checkpoint; needs grouped GEMM):
  the fc2 input is discarded and recomputed from the fc1 output. Output-discarding.
- mlp: the dense MLP of non-MoE layers (normal checkpoint; transformer_layer.py: `if not self.is_moe_layer`).
- moe: the whole MoE layer incl. its token dispatch (moe_layer.py moe_layer_recompute; normal checkpoint).
- shared_experts: the shared experts of MoE layers (moe_layer.py shared_experts_recompute).
"""

from __future__ import annotations

from typing import Literal

from optimizer.spec.model_spec import ModelSpec

RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe", "shared_experts"]
RECOMPUTE_MODULES: tuple[RecomputeModule, ...] = (
    "core_attn",
    "layernorm",
    "mla_up_proj",
    "moe_act",
    "mlp",
    "moe",
    "shared_experts",
)
DEFAULT_MODULES: tuple[RecomputeModule, ...] = ("core_attn",)
"""Megatron's default when --recompute-modules is not given (TransformerConfig.__post_init__)."""
MOE_ONLY_MODULES: frozenset[str] = frozenset({"moe_act", "moe", "shared_experts"})
"""Modules that act on MoE layers only: a dense layer's cost does not depend on them."""


def module_rule(module: str, model: ModelSpec) -> str | None:
    """Why `module` cannot apply to `model` (Megatron's own assertions), or None."""
    if module == "mla_up_proj" and model.mla is None:
        return "mla_up_proj needs multi-latent attention (TransformerConfig: 'only supported with MLA')"
    if module in ("moe_act", "moe") and model.moe is None:
        return f"{module} needs an MoE model"
    if module == "shared_experts" and (model.moe is None or not model.moe.shared_ffn):
        return "shared_experts needs an MoE model with shared experts"
    return None


def searched_modules(model: ModelSpec) -> tuple[RecomputeModule, ...] | None:
    """The selective set the planner searches beside none and full, or None for none.

    Declared-space restriction (labelled): one set, the output-discarding modules that apply to the model
    (layernorm where the norms are separate, mla_up_proj, moe_act), plus mlp when an MoE model also has dense
    layers. They recompute memory-bound kernels or the small up-projections and free the largest per-token
    activations of MLA and fine-grained MoE layers; NVIDIA's published MoE recipes use subsets of exactly these
    (Megatron-Bridge perf_recipes: DeepSeek-V3 H100 ['mla_up_proj', 'mlp'], B200 ['mla_up_proj', 'layernorm',
    'moe_act'], GB300 BF16 ['moe_act']). Dense GQA models keep fused norms, so no module frees anything there that
    is not already covered by none / full; other sets are reached by pinning recompute_modules."""
    if model.moe is None and model.mla is None:
        return None
    mods: list[RecomputeModule] = ["layernorm"]
    if model.mla is not None:
        mods.append("mla_up_proj")
    if model.moe is not None:
        mods.append("moe_act")
        if model.moe.first_k_dense or model.moe.layer_freq > 1:
            mods.append("mlp")
    return tuple(sorted(mods, key=RECOMPUTE_MODULES.index))


def normalise(modules: tuple[str, ...] | list[str]) -> tuple[RecomputeModule, ...]:
    """Unique modules in the canonical order (the order of RECOMPUTE_MODULES)."""
    return tuple(m for m in RECOMPUTE_MODULES if m in modules)
