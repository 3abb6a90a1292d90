"""What Megatron-LM's own code makes of a meshplan export (run under .frameworks/megatron, Python 3.11).

stdin: one payload {"argv": [...], "env": {...}, "world_size": N, "gpu": "H100"} or a list of them. For each, the
environment is set (WORLD_SIZE, RANK=0, LOCAL_RANK=0, the export's env and nothing left from the one before), then,
as pretrain_gpt.py's __main__ does at core_v0.19.0: megatron.training.arguments.parse_args() on exactly the export's
tokens, validate_args(args), and megatron.training.argument_utils.gpt_config_from_args(args) (which calls
core_transformer_config_from_args); the vocabulary Megatron builds is the one core/tokenizers/utils/
build_tokenizer.py's _set_padded_vocab_size keeps (an explicit --padded-vocab-size) or vocab_size_with_padding of
--vocab-size; the pipeline layout is the one TransformerConfig resolves (PipelineParallelLayerLayout).

Stood in (the GPU runtime only): torch.cuda device queries (a Hopper, Ampere or Blackwell device capability), the
Triton kernels module megatron/core/transformer/moe/ops/paged_stash.py (it imports triton unguarded; no GPU here),
Transformer Engine's fused RoPE kernel (rope_utils.fused_apply_rotary_pos_emb, None without TE), and TE's version
(megatron.core.utils.get_te_version reads 0.0.0 without TE; the pinned release's uv.lock names the TE it is built
with). Python: the release asks for >= 3.12 (pyproject.toml requires-python) and the only torch this machine installs
is for 3.11, so typing.override (3.12) is typing_extensions.override, its backport.

stdout, last line: {"ok": true, "result": {...}} for one payload; for a list {"ok": true, "result": {"results":
[{"ok": ..., "result" | "error"}, ...]}}. A refusal by argparse (SystemExit), an assertion or a ValueError of
validate_args or of the config classes is {"ok": false, "error": what Megatron said}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import typing_extensions

SRC = Path(os.environ.get("PYTHONPATH", "src").split(os.pathsep)[0])
# Device capability (major, minor) by GPU family [NVIDIA CUDA C Programming Guide, compute capabilities:
# A100 8.0, H100 / H200 9.0, B200 / GB200 10.0].
CAPABILITY = {"A100": (8, 0), "H100": (9, 0), "H200": (9, 0), "B200": (10, 0), "GB200": (10, 0)}
ENV_KEYS: set[str] = set()
_DEVICE: list[tuple[int, int]] = [(9, 0)]


def _stand_in_gpu_runtime() -> None:
    """The GPU runtime Megatron queries on import and in validate_args, and nothing else."""
    typing.override = typing_extensions.override  # type: ignore[attr-defined]
    name = "megatron.core.transformer.moe.ops.paged_stash"
    kernels = types.ModuleType(name)
    source = (SRC / "megatron/core/transformer/moe/ops/paged_stash.py").read_text()
    kernels.GLOBAL_BLOCK_SIZE = int(re.search(r"^GLOBAL_BLOCK_SIZE = (\d+)", source, re.M).group(1))  # type: ignore[union-attr,attr-defined]

    def _no_gpu(*_a: object, **_k: object) -> None:
        raise RuntimeError("Triton kernel stood in: no GPU")

    kernels.paged_stash_copy_kernel = _no_gpu  # type: ignore[attr-defined]
    kernels.paged_stash_pop_kernel = _no_gpu  # type: ignore[attr-defined]
    sys.modules[name] = kernels

    import torch

    def capability(*_a: object, **_k: object) -> tuple[int, int]:
        return _DEVICE[0]

    def properties(*_a: object, **_k: object) -> types.SimpleNamespace:
        major, minor = _DEVICE[0]
        return types.SimpleNamespace(major=major, minor=minor, name="stood-in GPU", multi_processor_count=132)

    torch.cuda.get_device_capability = capability  # type: ignore[assignment]
    torch.cuda.get_device_properties = properties  # type: ignore[assignment]
    torch.cuda.device_count = lambda: 8  # type: ignore[assignment]


def _te_version() -> str:
    """The Transformer Engine the pinned release is built with (uv.lock's transformer-engine version)."""
    lock = (SRC / "uv.lock").read_text()
    found = re.search(r'name = "transformer-engine"\nversion = "([^"+]+)', lock)
    assert found, "uv.lock names no transformer-engine"
    return found.group(1)


def _set_env(payload: dict[str, Any]) -> None:
    for k in ENV_KEYS:
        os.environ.pop(k, None)
    env = {"WORLD_SIZE": str(payload["world_size"]), "RANK": "0", "LOCAL_RANK": "0", **payload.get("env", {})}
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    for k, v in env.items():
        os.environ[k] = str(v)
    ENV_KEYS.update(env)
    _DEVICE[0] = CAPABILITY[payload.get("gpu", "H100")]


def _layout(config: Any) -> list[list[int]] | None:
    """Transformer layers per (virtual stage, pipeline rank) as the config resolved the layout, or None."""
    layout = getattr(config, "pipeline_model_parallel_layout", None)
    if layout is None:
        return None
    stages = layout.layout  # [pp][vp] lists of LayerType
    return [[sum(1 for t in chunk if t.name == "decoder") for chunk in rank] for rank in stages]


def _padded_vocab(args: Any) -> int | None:
    from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding

    if args.padded_vocab_size is not None:  # _set_padded_vocab_size keeps it (the tokenizer's length is not read)
        return int(args.padded_vocab_size)
    if args.vocab_size is None:
        return None
    return int(vocab_size_with_padding(args.vocab_size, args, logging_enabled=False))


def _fields(args: Any, model_cfg: Any) -> dict[str, Any]:
    c = model_cfg.transformer
    act = getattr(c.activation_func, "__name__", str(c.activation_func))
    out: dict[str, Any] = {
        "config_class": type(c).__name__,
        "num_layers": c.num_layers,
        "hidden_size": c.hidden_size,
        "ffn_hidden_size": c.ffn_hidden_size,
        "num_attention_heads": c.num_attention_heads,
        "num_query_groups": c.num_query_groups,
        "kv_channels": c.kv_channels,
        "normalization": c.normalization,
        "layernorm_epsilon": c.layernorm_epsilon,
        "layernorm_zero_centered_gamma": c.layernorm_zero_centered_gamma,
        "gated_linear_unit": c.gated_linear_unit,
        "activation": act,
        "position_embedding_type": model_cfg.position_embedding_type,
        "rotary_base": model_cfg.rotary_base,
        "rotary_percent": model_cfg.rotary_percent,
        "rope_scaling": model_cfg.rope_scaling,
        "rope_scaling_factor": model_cfg.rope_scaling_factor,
        "max_sequence_length": model_cfg.seq_length,
        "add_bias_linear": c.add_bias_linear,
        "add_qkv_bias": c.add_qkv_bias,
        "qk_layernorm": c.qk_layernorm,
        "share_embeddings_and_output_weights": model_cfg.share_embeddings_and_output_weights,
        "vocab_size": model_cfg.vocab_size,
        "should_pad_vocab": model_cfg.should_pad_vocab,
        "padded_vocab_size": _padded_vocab(args),
        "tokenizer_type": args.tokenizer_type,
        "tokenizer_model": args.tokenizer_model,
        "hidden_dropout": c.hidden_dropout,
        "attention_dropout": c.attention_dropout,
        "num_moe_experts": c.num_moe_experts,
        "moe_router_topk": c.moe_router_topk,
        "moe_ffn_hidden_size": c.moe_ffn_hidden_size,
        "moe_shared_expert_intermediate_size": c.moe_shared_expert_intermediate_size,
        "moe_layer_freq": c.moe_layer_freq,
        "moe_router_score_function": c.moe_router_score_function,
        "moe_router_pre_softmax": c.moe_router_pre_softmax,
        "moe_router_enable_expert_bias": c.moe_router_enable_expert_bias,
        "moe_router_topk_scaling_factor": c.moe_router_topk_scaling_factor,
        "moe_router_load_balancing_type": c.moe_router_load_balancing_type,
        "moe_aux_loss_coeff": c.moe_aux_loss_coeff,
        "moe_router_num_groups": c.moe_router_num_groups,
        "moe_router_group_topk": c.moe_router_group_topk,
        "moe_grouped_gemm": c.moe_grouped_gemm,
        "moe_token_dispatcher_type": c.moe_token_dispatcher_type,
        "mtp_num_layers": c.mtp_num_layers,
        "multi_latent_attention": c.multi_latent_attention,
        "tp": c.tensor_model_parallel_size,
        "pp": c.pipeline_model_parallel_size,
        "cp": c.context_parallel_size,
        "ep": c.expert_model_parallel_size,
        "etp": c.expert_tensor_parallel_size,
        "vp": args.virtual_pipeline_model_parallel_size,
        "dp": args.data_parallel_size,
        "sequence_parallel": c.sequence_parallel,
        "stage_layers": _layout(c),
        "num_layers_per_virtual_pipeline_stage": args.num_layers_per_virtual_pipeline_stage,
        "recompute_granularity": c.recompute_granularity,
        "recompute_method": c.recompute_method,
        "recompute_num_layers": c.recompute_num_layers,
        "recompute_modules": c.recompute_modules,
        "use_distributed_optimizer": args.use_distributed_optimizer,
        "bf16": c.bf16,
        "fp16": c.fp16,
        "fp8": c.fp8,
        "micro_batch_size": args.micro_batch_size,
        "global_batch_size": args.global_batch_size,
        "seq_length": args.seq_length,
    }
    if c.multi_latent_attention:
        out |= {
            "q_lora_rank": c.q_lora_rank,
            "kv_lora_rank": c.kv_lora_rank,
            "qk_head_dim": c.qk_head_dim,
            "qk_pos_emb_head_dim": c.qk_pos_emb_head_dim,
            "v_head_dim": c.v_head_dim,
            "rope_type": c.rope_type,
            "mla_rotary_base": c.rotary_base,
            "rotary_scaling_factor": c.rotary_scaling_factor,
            "original_max_position_embeddings": c.original_max_position_embeddings,
            "beta_fast": c.beta_fast,
            "beta_slow": c.beta_slow,
            "mscale": c.mscale,
            "mscale_all_dim": c.mscale_all_dim,
        }
    return out


def _one(payload: dict[str, Any]) -> dict[str, Any]:
    from megatron.training import global_vars
    from megatron.training.argument_utils import gpt_config_from_args
    from megatron.training.arguments import parse_args, validate_args

    _set_env(payload)
    argv = [a for a in payload["argv"] if a not in ("pretrain_gpt.py",)]
    sys.argv = ["pretrain_gpt.py", *argv]
    said = io.StringIO()
    global_vars._GLOBAL_ARGS = None  # one process checks many exports
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})  # pretrain_gpt.py's args_defaults
            model_cfg = gpt_config_from_args(args)
    except SystemExit as exc:
        errors = [line for line in said.getvalue().splitlines() if ": error: " in line]
        return {"ok": False, "error": f"argparse (exit {exc.code}): {' '.join(errors) or said.getvalue()[-2000:]}"}
    except (AssertionError, ValueError, TypeError, RuntimeError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "result": _fields(args, model_cfg)}


def main() -> None:
    payload = json.load(sys.stdin)
    _stand_in_gpu_runtime()
    import megatron.training.arguments  # noqa: F401  (import before the TE version is stood in)
    from megatron.core import utils as core_utils
    from packaging.version import Version

    core_utils._te_version = Version(_te_version())
    # TE's fused RoPE kernel (TransformerConfig.__post_init__ refuses apply_rope_fusion, on by default, without it)
    from megatron.core.models.common.embeddings import rope_utils

    def _fused_rope(*_a: object, **_k: object) -> None:
        raise RuntimeError("TE fused RoPE kernel stood in: no GPU")

    if rope_utils.fused_apply_rotary_pos_emb is None:
        rope_utils.fused_apply_rotary_pos_emb = _fused_rope
    if isinstance(payload, list):
        print(json.dumps({"ok": True, "result": {"results": [_one(p) for p in payload]}}))
        return
    print(json.dumps(_one(payload)))


if __name__ == "__main__":
    main()
