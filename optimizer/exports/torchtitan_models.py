"""torchtitan's registered model flavors, by their dimensions: the [model] section of a torchtitan export names the
flavor whose shape is the planned ModelSpec's (tests/frameworks/test_torchtitan.py checks this table against the
pinned release's own registry, torchtitan.protocols.train_spec.get_train_spec(name).model_args)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.spec.model_spec import ModelSpec

TITAN_RELEASE = "0.2.2"
"""The torchtitan release the export targets: the newest on PyPI whose ConfigManager reads a TOML job file
(torchtitan 0.2.2 torchtitan/config/manager.py _maybe_load_toml, `--job.config_file`; 0.3.0 takes
`--module` / `--config` registry functions only)."""


@dataclass(frozen=True, slots=True)
class Flavor:
    """One registered flavor: torchtitan's model name and flavor key, and the shape it builds."""

    name: str
    flavor: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn: int
    """Dense FFN width as torchtitan builds it (llama3: multiple_of x ceil(multiplier x 8 dim / 3 / multiple_of);
    qwen3: hidden_dim)."""
    vocab: int
    head_dim: int | None = None
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0


# torchtitan 0.2.2 torchtitan/models/llama3/__init__.py llama3_args (vocab_size: TransformerModelArgs default 128256)
# and torchtitan/models/qwen3/__init__.py qwen3_args (vocab_size 151936, head_dim 128, moe_inter_dim, MoEArgs).
FLAVORS: tuple[Flavor, ...] = (
    Flavor("llama3", "8B", 4096, 32, 32, 8, 14336, 128256),
    Flavor("llama3", "70B", 8192, 80, 64, 8, 28672, 128256),
    Flavor("llama3", "405B", 16384, 126, 128, 8, 53248, 128256),
    Flavor("qwen3", "0.6B", 1024, 28, 16, 8, 3072, 151936, head_dim=128),
    Flavor("qwen3", "1.7B", 2048, 28, 16, 8, 6144, 151936, head_dim=128),
    Flavor("qwen3", "4B", 2560, 36, 32, 8, 9728, 151936, head_dim=128),
    Flavor("qwen3", "8B", 4096, 36, 32, 8, 12288, 151936, head_dim=128),
    Flavor("qwen3", "14B", 5120, 40, 40, 8, 17408, 151936, head_dim=128),
    Flavor("qwen3", "32B", 5120, 64, 64, 8, 25600, 151936, head_dim=128),
    Flavor("qwen3", "30B-A3B", 2048, 48, 32, 4, 6144, 151936, head_dim=128, experts=128, top_k=8, expert_ffn=768),
    Flavor("qwen3", "235B-A22B", 4096, 94, 64, 4, 12288, 151936, head_dim=128, experts=128, top_k=8, expert_ffn=1536),
)


def shape(model: ModelSpec) -> tuple[int, ...]:
    """The dimensions a flavor must match: width, layers, heads, KV heads, FFN, vocabulary, head size, experts."""
    moe = model.moe
    head_dim = model.head_dim if model.head_dim is not None else model.hidden_size // model.num_attention_heads
    return (
        model.hidden_size,
        model.num_layers,
        model.num_attention_heads,
        model.num_kv_heads or model.num_attention_heads,
        model.ffn_hidden_size,
        model.vocab_size,
        head_dim,
        moe.num_experts if moe else 0,
        moe.top_k if moe else 0,
        moe.expert_ffn_hidden_size if moe else 0,
    )


def flavor_shape(f: Flavor) -> tuple[int, ...]:
    return (
        f.dim,
        f.n_layers,
        f.n_heads,
        f.n_kv_heads,
        f.ffn,
        f.vocab,
        f.head_dim if f.head_dim is not None else f.dim // f.n_heads,
        f.experts,
        f.top_k,
        f.expert_ffn,
    )


def registered_flavor(model: ModelSpec) -> Flavor | None:
    """The registered flavor with the planned model's shape, if any (MLA and shared experts are never matched)."""
    if model.mla is not None or (model.moe is not None and model.moe.num_shared_experts):
        return None
    want = shape(model)
    return next((f for f in FLAVORS if flavor_shape(f) == want), None)


def family(model: ModelSpec) -> str:
    """torchtitan's model (train spec) whose code builds this architecture: qwen3 for MoE or a head size apart from
    width / heads (Qwen3ModelArgs.head_dim), deepseek_v3 for MLA, else llama3."""
    if model.mla is not None:
        return "deepseek_v3"
    if model.moe is not None or (
        model.head_dim is not None and model.head_dim * model.num_attention_heads != model.hidden_size
    ):
        return "qwen3"
    return "llama3"


def flavor_args(model: ModelSpec) -> str:
    """The model args to register as a new flavor, in torchtitan's own field names."""
    h = model.hidden_size
    kv = model.num_kv_heads or model.num_attention_heads
    fields = [
        f"dim={h}",
        f"n_layers={model.num_layers}",
        f"n_heads={model.num_attention_heads}",
        f"n_kv_heads={kv}",
        f"vocab_size={model.vocab_size}",
    ]
    if family(model) == "llama3":
        fields.append(
            f"ffn_dim_multiplier={model.ffn_hidden_size / (8 * h / 3):.4f}, multiple_of=256 (FFN "
            f"{model.ffn_hidden_size})"
        )
    else:
        fields.append(f"hidden_dim={model.ffn_hidden_size}")
        if model.head_dim is not None:
            fields.append(f"head_dim={model.head_dim}")
    if model.moe is not None:
        fields.append(
            f"moe_inter_dim={model.moe.expert_ffn_hidden_size}, moe_args=MoEArgs(num_experts="
            f"{model.moe.num_experts}, top_k={model.moe.top_k}, num_shared_experts="
            f"{model.moe.num_shared_experts})"
        )
    return ", ".join(fields)
