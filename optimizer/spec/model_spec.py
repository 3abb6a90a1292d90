"""Transformer architecture: the shapes that decide memory, FLOPs and communication.

Parameter counting follows the HuggingFace module layout of each family (q/k/v/o projections, gated or plain MLP,
norms, embedding and LM head), so that presets reproduce the published parameter counts (tests check this).
"""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.errors import DomainError

Activation = Literal["gelu", "swiglu", "squared_relu"]
Norm = Literal["layernorm", "rmsnorm"]
# Where a model's positions come from: rotary (RoPE), a learned absolute table (GPT-2 / GPT-3), or ALiBi's
# attention biases (BLOOM, Press et al. 2021, arXiv:2108.12409).
PositionEmbedding = Literal["rope", "learned", "alibi"]
# Hugging Face rope_scaling types read (transformers modeling_rope_utils.py: "llama3" (Llama 3.1), "yarn"
# (DeepSeek-V3)).
RopeScalingType = Literal["llama3", "yarn"]
# MoE router score functions and load balancing as Megatron-LM names them (TransformerConfig
# moe_router_score_function, moe_router_load_balancing_type; Megatron-LM core_v0.19.0 transformer_config.py).
ScoreFunction = Literal["softmax", "sigmoid"]
LoadBalancing = Literal["aux_loss", "seq_aux_loss", "none"]

# Sanity ceilings: far above any model in existence, low enough to reject typos such as 10^12 layers.
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_VOCAB = 20_000_000
MAX_HEADS = 100_000
MAX_EXPERTS = 100_000


class RopeScaling(BaseModel):
    """RoPE frequency scaling for a longer context (Hugging Face config.json `rope_scaling`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: RopeScalingType = Field(description="Scaling rule: llama3 (Llama 3.1) or yarn (DeepSeek-V3).")
    factor: float = Field(gt=0, le=10_000, description="Context extension factor (dimensionless).")
    original_max_position_embeddings: int = Field(
        ge=1, le=10_000_000, description="Context length (tokens) the unscaled RoPE was trained at."
    )
    low_freq_factor: float | None = Field(default=None, gt=0, description="llama3: low-frequency wavelength divisor.")
    high_freq_factor: float | None = Field(default=None, gt=0, description="llama3: high-frequency divisor.")
    beta_fast: float | None = Field(default=None, gt=0, description="yarn: fast correction bound (rotations).")
    beta_slow: float | None = Field(default=None, gt=0, description="yarn: slow correction bound (rotations).")
    mscale: float | None = Field(default=None, ge=0, description="yarn: attention temperature scale.")
    mscale_all_dim: float | None = Field(default=None, ge=0, description="yarn: mscale over all dimensions.")


class RouterSpec(BaseModel):
    """How an MoE router scores and balances experts (no parameters of its own beyond the gate the count holds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score_function: ScoreFunction = Field(
        default="softmax", description="Expert scores: softmax (Mixtral, Qwen) or sigmoid (DeepSeek-V3 scoring_func)."
    )
    pre_softmax: bool = Field(
        default=False,
        description="Softmax over all experts before top-k, the k probabilities not renormalised (HF norm_topk_prob "
        "false; Megatron --moe-router-pre-softmax). False: softmax over the k chosen logits (Mixtral, Qwen3-MoE).",
    )
    expert_bias: bool = Field(
        default=False, description="Auxiliary-loss-free balancing: a per-expert bias on the scores (DeepSeek-V3)."
    )
    topk_scaling_factor: float | None = Field(
        default=None, gt=0, description="Routed-expert weights scaled by this (HF routed_scaling_factor); None: 1."
    )
    load_balancing: LoadBalancing = Field(
        default="aux_loss", description="Balancing loss: per batch (aux_loss), per sequence (seq_aux_loss), none."
    )
    aux_loss_coeff: float = Field(default=0.0, ge=0, le=1_000, description="Balancing-loss coefficient (unitless).")


class MoESpec(BaseModel):
    """Mixture-of-experts feed-forward layers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_experts: int = Field(ge=1, le=MAX_EXPERTS, description="Routed experts per MoE layer.")
    top_k: int = Field(ge=1, le=MAX_EXPERTS, description="Experts each token is routed to.")
    expert_ffn_hidden_size: int = Field(ge=1, le=MAX_HIDDEN * 8, description="FFN width of one expert.")
    num_shared_experts: int = Field(default=0, ge=0, le=1024, description="Always-active shared experts.")
    shared_expert_ffn_hidden_size: int | None = Field(
        default=None,
        ge=1,
        description="FFN width of the shared expert block; default expert width x shared count.",
    )
    first_k_dense: int = Field(default=0, ge=0, description="Leading layers that keep a dense FFN (DeepSeek).")
    layer_freq: int = Field(default=1, ge=1, description="Every layer_freq-th layer after the dense ones is MoE.")
    num_groups: int | None = Field(
        default=None,
        ge=1,
        le=MAX_EXPERTS,
        description="Group-limited routing: the experts form this many equal groups (HF n_group; Megatron "
        "--moe-router-num-groups). None: every token may pick any expert.",
    )
    group_topk: int | None = Field(
        default=None,
        ge=1,
        le=MAX_EXPERTS,
        description="Groups each token picks its experts from (HF topk_group; Megatron --moe-router-group-topk).",
    )
    router: RouterSpec = Field(default_factory=RouterSpec, description="Expert scoring and load balancing.")

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.num_experts:
            raise DomainError("moe.top_k", f"top_k={self.top_k} exceeds num_experts={self.num_experts}")
        if (self.num_groups is None) != (self.group_topk is None):
            raise DomainError("moe.num_groups", "group-limited routing needs both num_groups and group_topk")
        if self.num_groups is not None and self.group_topk is not None:
            if self.num_experts % self.num_groups:
                raise DomainError(
                    "moe.num_groups", f"num_groups={self.num_groups} must divide num_experts={self.num_experts}"
                )
            if self.group_topk > self.num_groups:
                raise DomainError(
                    "moe.group_topk", f"group_topk={self.group_topk} exceeds num_groups={self.num_groups}"
                )
        return self

    @property
    def shared_ffn(self) -> int:
        """Total FFN width of the shared experts."""
        if self.shared_expert_ffn_hidden_size is not None:
            return self.shared_expert_ffn_hidden_size
        return self.num_shared_experts * self.expert_ffn_hidden_size


class MLASpec(BaseModel):
    """DeepSeek multi-head latent attention (low-rank, compressed KV cache)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    q_lora_rank: int | None = Field(default=None, ge=1, description="Rank of the query down-projection.")
    kv_lora_rank: int = Field(ge=1, description="Rank of the joint KV compression (cached per token).")
    qk_nope_head_dim: int = Field(ge=1, description="Per-head query/key dimension without RoPE.")
    qk_rope_head_dim: int = Field(ge=0, description="Per-head decoupled RoPE dimension (cached once per token).")
    v_head_dim: int = Field(ge=1, description="Per-head value dimension.")


class ModelSpec(BaseModel):
    """A decoder-only transformer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="custom", min_length=1, max_length=128, description="Display name.")
    num_layers: int = Field(ge=1, le=MAX_LAYERS, description="Transformer layers.")
    hidden_size: int = Field(ge=1, le=MAX_HIDDEN, description="Model width h.")
    ffn_hidden_size: int = Field(ge=1, le=MAX_HIDDEN * 8, description="Dense FFN width f.")
    num_attention_heads: int = Field(ge=1, le=MAX_HEADS, description="Query heads a.")
    num_kv_heads: int | None = Field(default=None, ge=1, le=MAX_HEADS, description="KV heads (GQA); None = a.")
    head_dim: int | None = Field(default=None, ge=1, le=65_536, description="Per-head size; None = h / a.")
    vocab_size: int = Field(ge=1, le=MAX_VOCAB, description="Vocabulary size V.")
    activation: Activation = Field(default="swiglu", description="MLP activation.")
    norm: Norm = Field(default="rmsnorm", description="Normalisation layer type.")
    tied_embeddings: bool = Field(default=False, description="LM head shares the input embedding matrix.")
    linear_bias: bool = Field(default=False, description="Linear layers carry biases (GPT-2, BLOOM, NeoX).")
    dropout: bool = Field(default=False, description="Dropout in training (stores 1-byte masks per element).")
    learned_positions: int = Field(default=0, ge=0, le=10_000_000, description="Learned position embeddings.")
    # What a launch needs beyond the shapes; none of these enters the cost or the parameter count (q/k norm weights
    # and QKV biases are O(layers x heads x d_h): under 0.01% of any preset).
    position_embedding: PositionEmbedding | None = Field(
        default=None, description="Position encoding; None: learned when learned_positions > 0, else rope."
    )
    rope_theta: float = Field(
        default=10_000.0, gt=0, le=1e12, description="RoPE base (HF rope_theta; 10000 is HF's and Megatron's default)."
    )
    rope_scaling: RopeScaling | None = Field(default=None, description="RoPE frequency scaling, if any.")
    rotary_fraction: float = Field(
        default=1.0, gt=0, le=1, description="Share of each head's dimensions RoPE rotates (HF partial_rotary_factor)."
    )
    qkv_bias: bool = Field(
        default=False, description="Query, key and value projections carry biases where other linears do not (Qwen2)."
    )
    qk_norm: bool = Field(
        default=False,
        description="A norm on queries and keys (Qwen3 q_norm / k_norm; MLA: on the q and kv latents, DeepSeek).",
    )
    norm_eps: float = Field(default=1e-5, gt=0, le=1, description="Epsilon of every norm (HF rms_norm_eps).")
    moe: MoESpec | None = Field(default=None, description="Mixture-of-experts FFN, if any.")
    mla: MLASpec | None = Field(default=None, description="Multi-head latent attention, if used.")
    mtp_layers: int = Field(
        default=0,
        ge=0,
        le=16,
        description=(
            "Multi-token prediction modules trained with the model (DeepSeek-V3 report §2.2; Megatron "
            "--mtp-num-layers): each a transformer layer of the model's last-layer kind, two norms and a 2h -> h "
            "projection, sharing the embedding and the output head; each adds a logits and loss pass."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        kv = self.kv_heads
        if kv > self.num_attention_heads:
            raise DomainError(
                "model.num_kv_heads",
                f"num_kv_heads={kv} exceeds num_attention_heads={self.num_attention_heads}",
            )
        if self.num_attention_heads % kv:
            raise DomainError(
                "model.num_kv_heads",
                f"num_kv_heads={kv} does not divide num_attention_heads={self.num_attention_heads}",
            )
        if self.head_dim is None and self.mla is None and self.hidden_size % self.num_attention_heads:
            raise DomainError(
                "model.hidden_size",
                f"hidden_size={self.hidden_size} is not a multiple of num_attention_heads="
                f"{self.num_attention_heads}; set head_dim",
            )
        if self.moe is not None and self.moe.first_k_dense > self.num_layers:
            raise DomainError("model.moe.first_k_dense", "first_k_dense exceeds num_layers")
        if (self.position_embedding == "learned") != (self.learned_positions > 0) and self.position_embedding:
            raise DomainError(
                "model.position_embedding",
                f"{self.position_embedding} positions with learned_positions={self.learned_positions}: learned "
                "positions need learned_positions > 0, and only they do",
            )
        if self.rope_scaling is not None and self.positions != "rope":
            raise DomainError("model.rope_scaling", f"scales RoPE; this model's positions are {self.positions}")
        return self

    @property
    def positions(self) -> PositionEmbedding:
        """The position encoding: the field, else learned where the model has a learned table, else RoPE."""
        if self.position_embedding is not None:
            return self.position_embedding
        return "learned" if self.learned_positions > 0 else "rope"

    # ---- derived shapes -------------------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """KV heads (equal to query heads without GQA)."""
        return self.num_kv_heads or self.num_attention_heads

    @property
    def head_size(self) -> int:
        """Per-head size d_h."""
        return self.head_dim or max(1, self.hidden_size // self.num_attention_heads)

    @property
    def q_dim(self) -> int:
        """Query projection width q = a * d_h (MLA: a * (nope + rope))."""
        if self.mla is not None:
            return self.num_attention_heads * (self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        return self.num_attention_heads * self.head_size

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) = n_kv * d_h; MLA: the per-head value width times heads."""
        if self.mla is not None:
            return self.num_attention_heads * self.mla.v_head_dim
        return self.kv_heads * self.head_size

    def heads_per_tp_rank(self, tp: int) -> tuple[int, int]:
        """(query heads, KV heads) one TP rank holds; MLA keeps a KV head per query head."""
        kv = self.num_attention_heads if self.mla is not None else self.kv_heads
        return self.num_attention_heads // tp, max(1, kv // tp)

    def cp_splits_heads(self, tp: int, cp: int) -> bool:
        """Whether all-to-all context parallelism can hand each of cp ranks whole heads: cp divides a TP rank's
        query and KV heads [TE context_parallel.py AttnFuncWithCPAndQKVOA2A: 'requires num_heads % cp_size == 0
        for Q, K, V']."""
        q, kv = self.heads_per_tp_rank(tp)
        return q % cp == 0 and kv % cp == 0

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer `index` (0-based) has an MoE FFN."""
        moe = self.moe
        if moe is None or index < moe.first_k_dense:
            return False
        return (index - moe.first_k_dense) % moe.layer_freq == 0

    @cached_property
    def moe_prefix(self) -> tuple[int, ...]:
        """MoE layers among the first i layers, for i = 0 .. num_layers."""
        out = [0]
        for i in range(self.num_layers):
            out.append(out[-1] + (1 if self.is_moe_layer(i) else 0))
        return tuple(out)

    @cached_property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return sum(1 for i in range(self.num_layers) if self.is_moe_layer(i))

    # ---- parameter counts -----------------------------------------------------------------------------------
    @property
    def _mlp_matrices(self) -> int:
        """Weight matrices per FFN: 3 for a gated (SwiGLU) MLP, 2 otherwise."""
        return 3 if self.activation == "swiglu" else 2

    @cached_property
    def attention_params(self) -> int:
        """Parameters of one attention block (projections, biases)."""
        h = self.hidden_size
        if self.mla is not None:
            m, a = self.mla, self.num_attention_heads
            qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * qk_head if m.q_lora_rank else h * a * qk_head
            kv_down = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv_up = m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
            out = a * m.v_head_dim * h
            return q + kv_down + kv_up + out
        q, kv = self.q_dim, self.kv_heads * self.head_size
        params = h * q + 2 * h * kv + q * h
        if self.linear_bias:
            params += q + 2 * kv + h
        return params

    def _mlp_params(self, width: int) -> int:
        h = self.hidden_size
        params = self._mlp_matrices * h * width
        if self.linear_bias:
            params += width * (self._mlp_matrices - 1) + h
        return params

    @property
    def _norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    @cached_property
    def dense_layer_params(self) -> int:
        """Parameters of one layer with a dense FFN."""
        return self.attention_params + self._mlp_params(self.ffn_hidden_size) + 2 * self._norm_params

    @cached_property
    def moe_expert_params_per_layer(self) -> int:
        """Routed-expert parameters of one MoE layer (sharded by EP)."""
        if self.moe is None:
            return 0
        return self.moe.num_experts * self._mlp_params(self.moe.expert_ffn_hidden_size)

    @cached_property
    def moe_layer_params(self) -> int:
        """Parameters of one MoE layer: attention, router, routed and shared experts, norms."""
        if self.moe is None:
            return self.dense_layer_params
        shared = self._mlp_params(self.moe.shared_ffn) if self.moe.shared_ffn else 0
        router = self.hidden_size * self.moe.num_experts
        return self.attention_params + router + shared + self.moe_expert_params_per_layer + 2 * self._norm_params

    @cached_property
    def embedding_params(self) -> int:
        """Input embedding (plus learned positions)."""
        return self.vocab_size * self.hidden_size + self.learned_positions * self.hidden_size

    @cached_property
    def lm_head_params(self) -> int:
        """Output projection (0 when tied) plus the final norm."""
        head = 0 if self.tied_embeddings else self.vocab_size * self.hidden_size
        return head + self._norm_params

    @cached_property
    def num_parameters(self) -> int:
        """Total parameters."""
        moe_layers = self.num_moe_layers
        dense_layers = self.num_layers - moe_layers
        return (
            dense_layers * self.dense_layer_params
            + moe_layers * self.moe_layer_params
            + self.embedding_params
            + self.lm_head_params
        )

    @cached_property
    def mtp_layer_is_moe(self) -> bool:
        """An MTP module's transformer layer takes the spec of the model's last layer (Megatron
        get_gpt_mtp_block_spec; DeepSeek-V3's MTP modules are MoE layers)."""
        return self.is_moe_layer(self.num_layers - 1)

    @cached_property
    def mtp_extra_params(self) -> int:
        """Parameters of one MTP module beside its transformer layer: the 2h -> h projection of the concatenated
        hidden state and next-token embedding, and the two norms before it (DeepSeek-V3 report eq. 21)."""
        return 2 * self.hidden_size * self.hidden_size + 2 * self._norm_params

    @cached_property
    def num_active_parameters(self) -> int:
        """Parameters touched per token (MoE: only top_k routed experts)."""
        if self.moe is None:
            return self.num_parameters
        inactive = self.moe_expert_params_per_layer * (self.moe.num_experts - self.moe.top_k) // self.moe.num_experts
        return self.num_parameters - self.num_moe_layers * inactive
