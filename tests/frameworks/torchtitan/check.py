"""Runs torchtitan 0.2.2's own config manager on an exported job TOML (stdin: {"toml": ..., "world_size": N}) and
prints what torchtitan made of it: its ParallelDims for the world size, the FSDP reshard policy, the pipeline schedule
and the stage split, activation checkpointing, float8, compile, async TP, batch, precision, the model flavor and, from
its model registry, that flavor's args with the FFN width of the block it builds (on the meta device).

Stood in: torchtitan.models.moe.kernels, a Triton GPU kernel module (`import triton`; no Triton on a CPU-only
machine), which the config module reaches through the float8 converter's imports."""

from __future__ import annotations

import json
import math
import sys
import tempfile
import types
import warnings
from typing import Any


def _stand_in_gpu_kernels() -> None:
    kernels = types.ModuleType("torchtitan.models.moe.kernels")

    def generate_permute_indices(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the Triton kernel is stood in on this CPU-only machine")

    kernels.generate_permute_indices = generate_permute_indices  # type: ignore[attr-defined]
    sys.modules[kernels.__name__] = kernels


def _stages(cfg: Any, n_layers: int) -> list[list[str]] | None:
    """The module names per model part as torchtitan 0.2.2 distributed/pipeline_parallel.py pipeline_llm derives
    them (its own get_schedule_class and generate_llm_fqn_per_model_part; the branch on layers_per_stage as there)."""
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class
    from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part

    par = cfg.parallelism
    if par.pipeline_parallel_degree == 1:
        return None
    single = issubclass(get_schedule_class(par.pipeline_parallel_schedule), PipelineScheduleSingle)
    first, last = par.pipeline_parallel_first_stage_less_layers, par.pipeline_parallel_last_stage_less_layers
    if par.module_fqns_per_model_part is not None:
        parts = par.module_fqns_per_model_part
    else:
        if par.pipeline_parallel_layers_per_stage is not None:
            stages = math.ceil((n_layers + first + last) / par.pipeline_parallel_layers_per_stage)
        else:
            stages = par.pipeline_parallel_degree * (1 if single else 2)
        parts = generate_llm_fqn_per_model_part(stages, n_layers, first, last)
    per_rank, rem = divmod(len(parts), par.pipeline_parallel_degree)
    if rem or (single and per_rank != 1) or (not single and per_rank < 2):
        raise ValueError(
            f"{len(parts)} model parts do not fit {par.pipeline_parallel_schedule} on "
            f"{par.pipeline_parallel_degree} ranks (pipeline_llm)"
        )
    return parts


def _model(cfg: Any) -> dict[str, Any]:
    import torch
    from torchtitan.protocols.train_spec import get_train_spec

    spec = get_train_spec(cfg.model.name)
    if cfg.model.flavor not in spec.model_args:
        return {"registered": False}
    args = spec.model_args[cfg.model.flavor]
    one = type(args)(**{**args.__dict__, "n_layers": 1})  # one block of the flavor, on the meta device
    with torch.device("meta"):
        block = spec.model_cls(one).layers["0"]
    ffn = getattr(block, "feed_forward", None)
    moe = getattr(block, "moe", None)
    out = {
        "registered": True,
        "dim": args.dim,
        "n_layers": args.n_layers,
        "n_heads": args.n_heads,
        "n_kv_heads": args.n_kv_heads or args.n_heads,
        "head_dim": getattr(args, "head_dim", args.dim // args.n_heads),
        "vocab": args.vocab_size,
        "rope_theta": args.rope_theta,
        # an all-MoE block builds no dense FFN: the registry's dense width (Qwen3ModelArgs.hidden_dim) stands
        "ffn": ffn.w1.weight.shape[0] if ffn is not None else getattr(args, "hidden_dim", None),
        "experts": 0,
    }
    if moe is not None:
        out.update(experts=args.moe_args.num_experts, top_k=args.moe_args.top_k, expert_ffn=args.moe_inter_dim)
    return out


def parse(toml: str, world_size: int) -> dict[str, Any]:
    _stand_in_gpu_kernels()
    from torchtitan.config import ConfigManager
    from torchtitan.distributed import ParallelDims

    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(toml)
    with warnings.catch_warnings():
        # tyro only warns when a TOML value is outside the field's Literal type; torchtitan would run with it
        warnings.simplefilter("error", UserWarning)
        cfg = ConfigManager().parse_args(["--job.config_file", f.name])
    par = cfg.parallelism
    dims = ParallelDims(
        dp_replicate=par.data_parallel_replicate_degree,
        dp_shard=par.data_parallel_shard_degree,
        cp=par.context_parallel_degree,
        tp=par.tensor_parallel_degree,
        pp=par.pipeline_parallel_degree,
        ep=par.expert_parallel_degree,
        etp=par.expert_tensor_parallel_degree,
        world_size=world_size,
    )
    model = _model(cfg)
    stages = _stages(cfg, model["n_layers"]) if model["registered"] else None
    ac = cfg.activation_checkpoint
    return {
        "dp_replicate": dims.dp_replicate,
        "dp_shard": dims.dp_shard,
        "tp": dims.tp,
        "pp": dims.pp,
        "cp": dims.cp,
        "ep": dims.ep,
        "etp": dims.etp,
        "fsdp_enabled": dims.fsdp_enabled,
        "ddp": dims.dp_replicate_enabled and not dims.fsdp_enabled,
        "ddp_alone": dims.dp_replicate == world_size,
        "seq_len_divisor": dims.seq_len_divisor,
        "reshard": par.fsdp_reshard_after_forward,
        "schedule": par.pipeline_parallel_schedule,
        "microbatch": par.pipeline_parallel_microbatch_size,
        "stages": stages,
        "layers_per_stage": [sum(n.startswith("layers.") for n in p) for p in stages] if stages else None,
        "ac_mode": ac.mode,
        "ac_option": ac.selective_ac_option,
        "converters": list(cfg.model.converters),
        "float8_recipe": cfg.quantize.linear.float8.recipe_name,
        "compile": cfg.compile.enable,
        "compile_components": list(cfg.compile.components) if cfg.compile.enable else [],
        "async_tp": par.enable_async_tensor_parallel,
        "local_batch": cfg.training.local_batch_size,
        "global_batch": cfg.training.global_batch_size,
        "seq_len": cfg.training.seq_len,
        "param_dtype": cfg.training.mixed_precision_param,
        "reduce_dtype": cfg.training.mixed_precision_reduce,
        "model_name": cfg.model.name,
        "flavor": cfg.model.flavor,
        "model": model,
    }


def one(case: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"ok": True, "result": parse(case["toml"], int(case["world_size"]))}
    except (AssertionError, ValueError, UserWarning, KeyError) as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main() -> None:
    """One case ({"toml", "world_size"}), or {"cases": {name: case}} parsed in one process (torch imports once):
    then the result maps each name to its own {"ok", "result" | "error"}."""
    payload = json.loads(sys.stdin.read())
    if "cases" in payload:
        print(json.dumps({"ok": True, "result": {k: one(v) for k, v in payload["cases"].items()}}))
    else:
        print(json.dumps(one(payload)))


if __name__ == "__main__":
    main()
