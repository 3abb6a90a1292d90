"""Build a ModelSpec from a HuggingFace `config.json` (no network), from YAML, or from a shipped preset."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.json_booleans import refuse_booleans
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.yaml_documents import document_mapping, read_document, shown_path

Config = dict[str, Any]


def _req(cfg: Config, *keys: str) -> Any:
    """The first present key among `keys`; a DomainError naming the first key when none is present."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    raise DomainError(f"config.json.{keys[0]}", "required field is missing")


def _opt(cfg: Config, key: str, default: Any) -> Any:
    value = cfg.get(key)
    return default if value is None else value


def _activation(act: str) -> str:
    act = act.lower()
    if act in ("silu", "swiglu", "swish"):
        return "swiglu"
    if act in ("relu2", "squared_relu", "squared-relu"):
        return "squared_relu"
    if act.startswith("gelu"):
        return "gelu"
    raise DomainError("config.json.hidden_act", f"unsupported activation {act!r}; supported: silu, gelu*, relu2")


def _rope_scaling(cfg: Config) -> Config | None:
    """config.json `rope_scaling` as RopeScaling fields: Llama 3.1's llama3 and DeepSeek-V3's yarn (key `rope_type`,
    older configs `type`) [transformers modeling_rope_utils.py _compute_llama3_parameters, _compute_yarn_parameters];
    none, or linear / dynamic (not read), is None."""
    raw = cfg.get("rope_scaling")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DomainError("config.json.rope_scaling", f"must be an object (got {type(raw).__name__})")
    kind = raw.get("rope_type", raw.get("type"))
    if kind not in ("llama3", "yarn"):
        raise DomainError(
            "config.json.rope_scaling.rope_type", f"unsupported RoPE scaling {kind!r}; supported: llama3, yarn"
        )
    keys = ["factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor", "beta_fast"]
    keys += ["beta_slow", "mscale", "mscale_all_dim"]
    out: Config = {"type": kind}
    for key in keys:
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise DomainError(f"config.json.rope_scaling.{key}", f"must be a number (got {type(value).__name__})")
        out[key] = value
    return {k: v for k, v in out.items() if v is not None}


def _rope(cfg: Config) -> Config:
    """RoPE base and scaling, rotated share, norm epsilon (HF rope_theta default 10000: LlamaConfig)."""
    return {
        "rope_theta": _opt(cfg, "rope_theta", 10000.0),
        "rope_scaling": _rope_scaling(cfg),
        "rotary_fraction": _opt(cfg, "partial_rotary_factor", 1.0),
        "norm_eps": _opt(cfg, "rms_norm_eps", 1e-5),
    }


def _router(cfg: Config, renormalised_default: bool, coeff_key: str) -> Config:
    """The router as HF MoE configs describe it: softmax unless scoring_func says sigmoid; probabilities over the
    chosen k (norm_topk_prob, or Mixtral's softmax of the top-k) or over all experts (pre-softmax); DeepSeek-V3's
    noaux_tc expert bias, routed_scaling_factor, and sequence-wise auxiliary loss (seq_aux)
    [transformers MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock; deepseek-ai/DeepSeek-V3 modeling_deepseek.py
    MoEGate]."""
    sigmoid = _opt(cfg, "scoring_func", "softmax") == "sigmoid"
    renormalised = bool(_opt(cfg, "norm_topk_prob", renormalised_default))
    scaling = cfg.get("routed_scaling_factor")
    return {
        "score_function": "sigmoid" if sigmoid else "softmax",
        "pre_softmax": not sigmoid and not renormalised,
        "expert_bias": _opt(cfg, "topk_method", "") == "noaux_tc",
        "topk_scaling_factor": None if scaling in (None, 1, 1.0) else scaling,
        "load_balancing": "seq_aux_loss" if cfg.get("seq_aux") else "aux_loss",
        "aux_loss_coeff": _opt(cfg, coeff_key, 0.0),
    }


def _llama_like(cfg: Config) -> Config:
    heads = _req(cfg, "num_attention_heads")
    return {
        **_rope(cfg),
        # Qwen2's q/k/v projections always carry biases (transformers Qwen2Attention: bias=True; o_proj none);
        # Qwen3 normalises queries and keys per head (Qwen3Attention q_norm, k_norm).
        "qkv_bias": cfg.get("model_type") == "qwen2",
        "qk_norm": cfg.get("model_type") in ("qwen3", "qwen3_moe"),
        "num_layers": _req(cfg, "num_hidden_layers"),
        "hidden_size": _req(cfg, "hidden_size"),
        "ffn_hidden_size": _req(cfg, "intermediate_size"),
        "num_attention_heads": heads,
        "num_kv_heads": _opt(cfg, "num_key_value_heads", heads),
        "head_dim": cfg.get("head_dim"),
        "vocab_size": _req(cfg, "vocab_size"),
        "activation": _activation(_opt(cfg, "hidden_act", "silu")),
        "norm": "rmsnorm",
        "tied_embeddings": bool(_opt(cfg, "tie_word_embeddings", False)),
    }


def _mixtral(cfg: Config) -> Config:
    spec = _llama_like(cfg)
    spec["moe"] = {
        "num_experts": _req(cfg, "num_local_experts"),
        "top_k": _req(cfg, "num_experts_per_tok"),
        "expert_ffn_hidden_size": _req(cfg, "intermediate_size"),
        # softmax of the top-k logits = the top-k of the softmax renormalised (MixtralSparseMoeBlock)
        "router": _router(cfg, True, "router_aux_loss_coef"),
    }
    return spec


def _qwen_moe(cfg: Config) -> Config:
    spec = _llama_like({**cfg, "intermediate_size": _opt(cfg, "intermediate_size", cfg.get("moe_intermediate_size"))})
    shared = int(_opt(cfg, "shared_expert_intermediate_size", 0))
    only_dense = list(_opt(cfg, "mlp_only_layers", []))
    spec["moe"] = {
        "num_experts": _req(cfg, "num_experts"),
        "top_k": _req(cfg, "num_experts_per_tok"),
        "expert_ffn_hidden_size": _req(cfg, "moe_intermediate_size"),
        "num_shared_experts": 1 if shared else 0,
        "shared_expert_ffn_hidden_size": shared or None,
        "first_k_dense": len(only_dense),
        "layer_freq": _opt(cfg, "decoder_sparse_step", 1),
        "router": _router(cfg, False, "router_aux_loss_coef"),  # Qwen2MoeConfig / Qwen3MoeConfig norm_topk_prob=False
    }
    return spec


def _deepseek(cfg: Config) -> Config:
    spec = _llama_like(cfg)
    spec["moe"] = {
        "num_experts": _req(cfg, "n_routed_experts"),
        "top_k": _req(cfg, "num_experts_per_tok"),
        "expert_ffn_hidden_size": _req(cfg, "moe_intermediate_size"),
        "num_shared_experts": _opt(cfg, "n_shared_experts", 0),
        "first_k_dense": _opt(cfg, "first_k_dense_replace", 0),
        "layer_freq": _opt(cfg, "moe_layer_freq", 1),
        # Group-limited routing (DeepSeek-V3: n_group 8, topk_group 4; a group per node of the EP group).
        "num_groups": _opt(cfg, "n_group", None),
        "group_topk": _opt(cfg, "topk_group", None),
        "router": _router(cfg, False, "aux_loss_alpha"),
    }
    spec["mla"] = {
        "q_lora_rank": cfg.get("q_lora_rank"),
        "kv_lora_rank": _req(cfg, "kv_lora_rank"),
        "qk_nope_head_dim": _req(cfg, "qk_nope_head_dim"),
        "qk_rope_head_dim": _req(cfg, "qk_rope_head_dim"),
        "v_head_dim": _req(cfg, "v_head_dim"),
    }
    spec["head_dim"] = None
    spec["qk_norm"] = True  # q_a_layernorm and kv_a_layernorm on the latents (modeling_deepseek.py; counted in MLA)
    return spec


def _gpt2(cfg: Config) -> Config:
    h = _req(cfg, "n_embd", "hidden_size")
    return {
        "num_layers": _req(cfg, "n_layer", "num_hidden_layers"),
        "hidden_size": h,
        "ffn_hidden_size": _opt(cfg, "n_inner", 4 * h),
        "num_attention_heads": _req(cfg, "n_head", "num_attention_heads"),
        "vocab_size": _req(cfg, "vocab_size"),
        "activation": "gelu",
        "norm": "layernorm",
        "tied_embeddings": bool(_opt(cfg, "tie_word_embeddings", True)),
        "linear_bias": True,
        "dropout": float(_opt(cfg, "resid_pdrop", 0.1)) > 0,
        "learned_positions": _req(cfg, "n_positions", "max_position_embeddings"),
        "norm_eps": _opt(cfg, "layer_norm_epsilon", 1e-5),
    }


def _gpt_neox(cfg: Config) -> Config:
    h = _req(cfg, "hidden_size")
    return {
        "num_layers": _req(cfg, "num_hidden_layers"),
        "hidden_size": h,
        "ffn_hidden_size": _opt(cfg, "intermediate_size", 4 * h),
        "num_attention_heads": _req(cfg, "num_attention_heads"),
        "vocab_size": _req(cfg, "vocab_size"),
        "activation": _activation(_opt(cfg, "hidden_act", "gelu")),
        "norm": "layernorm",
        "tied_embeddings": bool(_opt(cfg, "tie_word_embeddings", False)),
        "linear_bias": True,
        # GPTNeoXConfig defaults: rotary_pct 0.25, rotary_emb_base 10000, layer_norm_eps 1e-5
        "rope_theta": _opt(cfg, "rotary_emb_base", _opt(cfg, "rope_theta", 10000.0)),
        "rotary_fraction": _opt(cfg, "rotary_pct", 0.25),
        "norm_eps": _opt(cfg, "layer_norm_eps", 1e-5),
    }


def _falcon(cfg: Config) -> Config:
    h = _req(cfg, "hidden_size")
    heads = _req(cfg, "num_attention_heads", "n_head")
    if cfg.get("new_decoder_architecture"):
        kv = _opt(cfg, "num_kv_heads", heads)
    elif cfg.get("multi_query", True):
        kv = 1
    else:
        kv = heads
    return {
        "num_layers": _req(cfg, "num_hidden_layers", "n_layer"),
        "hidden_size": h,
        "ffn_hidden_size": _opt(cfg, "ffn_hidden_size", 4 * h),
        "num_attention_heads": heads,
        "num_kv_heads": kv,
        "vocab_size": _req(cfg, "vocab_size"),
        "activation": "gelu",
        "norm": "layernorm",
        "tied_embeddings": bool(_opt(cfg, "tie_word_embeddings", True)),
        "linear_bias": bool(_opt(cfg, "bias", False)),
        "position_embedding": "alibi" if cfg.get("alibi") else "rope",  # FalconConfig alibi=False, rope_theta 10000
        "rope_theta": _opt(cfg, "rope_theta", 10000.0),
        "norm_eps": _opt(cfg, "layer_norm_epsilon", 1e-5),
    }


def _bloom(cfg: Config) -> Config:
    h = _req(cfg, "hidden_size", "n_embed")
    return {
        "num_layers": _req(cfg, "n_layer", "num_hidden_layers"),
        "hidden_size": h,
        "ffn_hidden_size": 4 * h,
        "num_attention_heads": _req(cfg, "n_head", "num_attention_heads"),
        "vocab_size": _req(cfg, "vocab_size"),
        "activation": "gelu",
        "norm": "layernorm",
        "tied_embeddings": True,
        "linear_bias": True,
        "dropout": float(_opt(cfg, "hidden_dropout", 0.0)) > 0,
        "position_embedding": "alibi",  # BloomAttention's alibi biases; no position table
        "norm_eps": _opt(cfg, "layer_norm_epsilon", 1e-5),
    }


def _nemotron(cfg: Config) -> Config:
    spec = _llama_like({**cfg, "hidden_act": _opt(cfg, "hidden_act", "relu2")})
    spec["norm"] = "layernorm"
    # NemotronConfig defaults: partial_rotary_factor 0.5, norm_eps 1e-5 (transformers configuration_nemotron.py)
    spec["rotary_fraction"] = _opt(cfg, "partial_rotary_factor", 0.5)
    spec["norm_eps"] = _opt(cfg, "norm_eps", 1e-5)
    return spec


HF_LOADERS: dict[str, Callable[[Config], Config]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "bloom": _bloom,
    "nemotron": _nemotron,
}


# The config.json keys the loaders read, by the type each must have (checked before any arithmetic on them, so
# that `n_embd: {}` or `resid_pdrop: "high"` is an error naming the key, not a traceback).
# Longest --model reference: Linux's PATH_MAX (limits.h), the longest path a file system call accepts.
MAX_REF_CHARS = 4096

_INT_KEYS = frozenset(
    [
        "decoder_sparse_step",
        "first_k_dense_replace",
        "head_dim",
        "hidden_size",
        "intermediate_size",
        "kv_lora_rank",
        "max_position_embeddings",
        "moe_intermediate_size",
        "moe_layer_freq",
        "n_embd",
        "n_group",
        "n_embed",
        "n_head",
        "n_inner",
        "n_layer",
        "n_positions",
        "n_routed_experts",
        "n_shared_experts",
        "num_attention_heads",
        "num_experts",
        "num_experts_per_tok",
        "num_hidden_layers",
        "num_key_value_heads",
        "num_kv_heads",
        "num_local_experts",
        "q_lora_rank",
        "qk_nope_head_dim",
        "topk_group",
        "qk_rope_head_dim",
        "shared_expert_intermediate_size",
        "v_head_dim",
        "vocab_size",
    ]
)
_NUMBER_KEYS = frozenset(
    [
        "aux_loss_alpha",
        "hidden_dropout",
        "layer_norm_eps",
        "layer_norm_epsilon",
        "norm_eps",
        "partial_rotary_factor",
        "resid_pdrop",
        "rms_norm_eps",
        "rope_theta",
        "rotary_emb_base",
        "rotary_pct",
        "routed_scaling_factor",
        "router_aux_loss_coef",
    ]
)
_STR_KEYS = frozenset(("hidden_act", "model_type", "_name_or_path", "scoring_func", "topk_method"))
_BOOL_KEYS = frozenset(
    ("alibi", "bias", "multi_query", "new_decoder_architecture", "norm_topk_prob", "seq_aux", "tie_word_embeddings")
)
_INT_LIST_KEYS = frozenset(("mlp_only_layers",))


def _check_types(cfg: Config) -> None:
    """Each key the loaders read has the JSON type they expect; a DomainError naming the first that does not."""
    for key, value in cfg.items():
        if value is None:
            continue
        if key in _INT_KEYS and (isinstance(value, bool) or not isinstance(value, int)):
            raise DomainError(f"config.json.{key}", f"must be an integer (got {type(value).__name__})")
        if key in _NUMBER_KEYS and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise DomainError(f"config.json.{key}", f"must be a number (got {type(value).__name__})")
        if key in _STR_KEYS and not isinstance(value, str):
            raise DomainError(f"config.json.{key}", f"must be a string (got {type(value).__name__})")
        if key in _BOOL_KEYS and not isinstance(value, bool):
            raise DomainError(f"config.json.{key}", f"must be true or false (got {type(value).__name__})")
        if key in _INT_LIST_KEYS and (
            not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value)
        ):
            raise DomainError(f"config.json.{key}", "must be a list of integers")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15:
            raise DomainError(
                f"config.json.{key}", f"must be at most 10^15 in magnitude (got {len(str(value))} digits)"
            )


def model_from_hf_config(cfg: Config, name: str | None = None) -> ModelSpec:
    """A ModelSpec from the dict of a HuggingFace `config.json`."""
    if not isinstance(cfg, dict):
        raise DomainError("config.json", "must be a JSON object")
    _check_types(cfg)
    model_type = cfg.get("model_type")
    if model_type is None:
        raise DomainError("config.json.model_type", "required field is missing")
    loader = HF_LOADERS.get(str(model_type))
    if loader is None:
        raise UnknownNameError("config.json.model_type", str(model_type), HF_LOADERS)
    fields = loader(cfg)
    fields["name"] = name or str(cfg.get("_name_or_path") or model_type)
    return build_model(fields)


def build_model(fields: Config, prefix: str = "model") -> ModelSpec:
    """Validate a field dict into a ModelSpec, turning pydantic errors into a DomainError naming the field (a
    boolean or a string where a number goes is refused, not read as 1 or 16)."""
    refuse_booleans(ModelSpec, fields, prefix)
    try:
        return ModelSpec.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, prefix) from None


def load_model_file(path: Path) -> ModelSpec:
    """Load `config.json` (HuggingFace format) or a YAML/JSON file of ModelSpec fields."""
    data = document_mapping(
        read_document(path, "model"),
        "model",
        str(path),
        "of model fields",
        "JSON" if path.suffix == ".json" else "YAML",
    )
    if "model_type" in data:
        return model_from_hf_config(data, name=path.stem if path.stem != "config" else None)
    return build_model(data)


def preset_names() -> list[str]:
    """Names of the shipped model presets."""
    folder = resources.files("optimizer.spec") / "presets" / "models"
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith((".json", ".yaml")))


def load_model_preset(name: str) -> ModelSpec:
    """A shipped preset by name (an UnknownNameError lists the known ones)."""
    folder = resources.files("optimizer.spec") / "presets" / "models"
    for suffix in (".json", ".yaml"):
        res = folder / f"{name.lower()}{suffix}"
        if res.is_file():
            text = res.read_text()
            data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
            if "model_type" in data:
                return model_from_hf_config(data, name=name.lower())
            return build_model({"name": name.lower(), **data})
    raise UnknownNameError("model", name, preset_names())


def resolve_model(ref: str) -> ModelSpec:
    """A preset name or a path to config.json / model.yaml."""
    if len(ref) > MAX_REF_CHARS:
        raise DomainError(
            "model", f"must be a preset name or a file path of at most {MAX_REF_CHARS} characters (got {len(ref)})"
        )
    path = Path(ref)
    try:
        exists = path.exists()
    except OSError as exc:  # a name too long for the file system
        raise DomainError("model", f"cannot read {shown_path(ref)}: {exc.strerror}") from None
    if path.suffix in (".json", ".yaml", ".yml") or exists:
        if not exists:
            raise DomainError("model", f"file {shown_path(ref)} does not exist")
        if path.is_dir():  # a Hugging Face model directory: its config.json [issue 48 §10]
            if not (path / "config.json").is_file():
                raise DomainError("model", f"directory {shown_path(ref)} has no config.json (a Hugging Face model)")
            return load_model_file(path / "config.json").model_copy(update={"name": path.resolve().name[:128]})
        return load_model_file(path)
    return load_model_preset(ref)
