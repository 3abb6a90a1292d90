"""ModelSpec: derived parameter counts, HuggingFace loaders, presets, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.model_loading import load_model_file, load_model_preset, model_from_hf_config, preset_names

# Published parameter counts (billions) from each model's card / paper.
PUBLISHED = {
    "llama-2-7b": 6.74,
    "llama-2-13b": 13.02,
    "llama-2-70b": 68.98,
    "llama-3-8b": 8.03,
    "llama-3-70b": 70.55,
    "llama-3.1-405b": 405.85,
    "gpt-3-175b": 175.0,
    "bloom-176b": 176.25,
    "mixtral-8x7b": 46.7,
    "deepseek-v3": 671.0,
    "nemotron-4-340b": 341.0,
    "qwen3-30b-a3b": 30.5,  # Qwen3 model cards: 30.5B total, 3.3B activated
    "qwen3-235b-a22b": 235.0,  # 235B total, 22B activated
    "qwen3-32b": 32.8,  # Qwen3-32B model card: 32.8B parameters
}


def test_every_required_preset_ships() -> None:
    assert set(PUBLISHED) <= set(preset_names())


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameter_count_matches_publication(name: str) -> None:
    got = load_model_preset(name).num_parameters / 1e9
    assert got == pytest.approx(PUBLISHED[name], rel=0.01)


def test_moe_active_parameters() -> None:
    assert load_model_preset("mixtral-8x7b").num_active_parameters / 1e9 == pytest.approx(12.9, rel=0.01)
    assert load_model_preset("deepseek-v3").num_active_parameters / 1e9 == pytest.approx(37.0, rel=0.02)
    assert load_model_preset("deepseek-v3").num_moe_layers == 58
    assert load_model_preset("qwen3-30b-a3b").num_active_parameters / 1e9 == pytest.approx(3.3, rel=0.02)
    assert load_model_preset("qwen3-235b-a22b").num_active_parameters / 1e9 == pytest.approx(22.0, rel=0.02)


HF_CONFIGS = {
    "mistral": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "hidden_act": "silu",
    },
    "qwen2": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "hidden_act": "silu",
    },
    "qwen3": {
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "vocab_size": 151936,
        "hidden_act": "silu",
    },
    "gpt2": {
        "model_type": "gpt2",
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "vocab_size": 50257,
        "n_positions": 1024,
    },
    "gpt_neox": {
        "model_type": "gpt_neox",
        "hidden_size": 6144,
        "intermediate_size": 24576,
        "num_hidden_layers": 44,
        "num_attention_heads": 64,
        "vocab_size": 50432,
        "hidden_act": "gelu",
    },
    "falcon": {
        "model_type": "falcon",
        "hidden_size": 4544,
        "num_hidden_layers": 32,
        "num_attention_heads": 71,
        "vocab_size": 65024,
        "multi_query": True,
        "new_decoder_architecture": False,
    },
}
# Published sizes: Mistral 7B 7.24B, Qwen2-7B 7.62B, Qwen3-8B 8.19B, Qwen3-30B-A3B 30.5B, GPT-2 124M,
# GPT-NeoX-20B 20.6B, Falcon-7B 7.2B.
HF_EXPECTED = {
    "mistral": 7.24,
    "qwen2": 7.62,
    "qwen3": 8.19,
    "qwen3_moe": 30.5,
    "gpt2": 0.124,
    "gpt_neox": 20.6,
    "falcon": 6.9,
}


@pytest.mark.parametrize("family", sorted(HF_CONFIGS))
def test_hf_config_loaders(family: str) -> None:
    spec = model_from_hf_config(HF_CONFIGS[family])
    assert spec.num_parameters / 1e9 == pytest.approx(HF_EXPECTED[family], rel=0.05)


def test_hf_config_missing_field_is_named() -> None:
    cfg = dict(HF_CONFIGS["mistral"])
    del cfg["intermediate_size"]
    with pytest.raises(DomainError) as exc:
        model_from_hf_config(cfg)
    assert exc.value.field == "config.json.intermediate_size"
    assert "missing" in exc.value.rule


def test_hf_config_unknown_type_lists_known() -> None:
    with pytest.raises(UnknownNameError) as exc:
        model_from_hf_config({"model_type": "t5"})
    assert "llama" in str(exc.value) and "mixtral" in str(exc.value)


@pytest.mark.parametrize(("field", "value"), [("num_layers", 10**12), ("num_layers", 0), ("hidden_size", -4)])
def test_absurd_sizes_rejected(tmp_path: Path, field: str, value: int) -> None:
    doc = {
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 11008,
        "num_attention_heads": 32,
        "vocab_size": 32000,
        field: value,
    }
    path = tmp_path / "model.yaml"
    path.write_text(json.dumps(doc))
    with pytest.raises(DomainError) as exc:
        load_model_file(path)
    assert exc.value.field == f"model.{field}"


def test_gqa_rule_named() -> None:
    with pytest.raises(DomainError) as exc:
        model_from_hf_config({**HF_CONFIGS["mistral"], "num_key_value_heads": 5})
    assert "num_kv_heads=5" in str(exc.value)


def test_unknown_preset_lists_presets() -> None:
    with pytest.raises(UnknownNameError) as exc:
        load_model_preset("llama-9")
    assert "llama-2-70b" in str(exc.value)


def test_yaml_model_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(
        "num_layers: 2\nhidden_size: 64\nffn_hidden_size: 256\nnum_attention_heads: 4\n"
        "vocab_size: 100\nactivation: gelu\n"
    )
    spec = load_model_file(path)
    # 2 layers x (4*64*64 attention + 2*64*256 MLP + 2*64 norms) + 100*64 embedding + 100*64 head + 64 norm
    assert spec.num_parameters == 2 * (4 * 64 * 64 + 2 * 64 * 256 + 2 * 64) + 2 * 100 * 64 + 64
