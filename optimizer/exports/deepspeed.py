"""The DeepSpeed exporter: a plan as a DeepSpeed configuration JSON that DeepSpeed's own config class accepts
(deepspeed/runtime/config.py DeepSpeedConfig, DeepSpeed 0.19.8: tests/frameworks/test_deepspeed.py) and that sets what
was priced: the batch arithmetic over dp = world / (tp x pp), the ZeRO block (optimizer/exports/deepspeed_zero.py),
AutoTP, activation checkpointing, precision. What the JSON cannot say (pipeline stages, Megatron-DeepSpeed's tensor
and sequence parallelism, MoE, FP8) goes to the notes; a plan DeepSpeed would run otherwise than priced is refused
naming the knob."""

from __future__ import annotations

import json

from optimizer.errors import DomainError
from optimizer.exports.deepspeed_zero import zero_block
from optimizer.exports.export_record import Export
from optimizer.frameworks.capabilities import deepspeed_release
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# Megatron-LM's default --clip-grad (megatron/training/arguments.py); DeepSpeed's own default is 0.0 (no clipping,
# runtime/constants.py GRADIENT_CLIPPING_DEFAULT). Not priced: the norm is part of the optimizer step either way.
GRADIENT_CLIPPING = 1.0


def deepspeed_export(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    notes: list[str] = []
    cfg: dict[str, object] = {
        **batch_keys(w, c),
        "zero_optimization": zero_block(model, w, c, notes),
        "bf16": {"enabled": w.precision in ("bf16", "fp8")},
        "fp16": {"enabled": w.precision == "fp16"},
        "gradient_clipping": GRADIENT_CLIPPING,
    }
    if autotp(c):
        cfg["tensor_parallel"] = {"autotp_size": c.tp}
    if c.recompute != "none":
        cfg["activation_checkpointing"] = activation_checkpointing()
    notes += parallel_notes(w, c, layers)
    return Export(
        tool="deepspeed", format="json", content=json.dumps(cfg, indent=2), options=sorted(_keys(cfg)), notes=notes
    )


def batch_keys(w: TrainingWorkload, c: ParallelConfig) -> dict[str, int]:
    """train_batch_size = micro-batch x accumulation steps x data-parallel size, the identity DeepSpeed asserts
    (runtime/config.py _batch_assertion, with the data-parallel size from the mpu); a global batch the plan's dp x mbs
    does not divide is refused."""
    per_step = c.dp * c.mbs
    if w.global_batch_size % per_step:
        raise DomainError(
            "export.global_batch_size",
            f"{w.global_batch_size} is not a multiple of dp x mbs = {c.dp} x {c.mbs}: DeepSpeed asserts "
            "train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel size",
        )
    return {
        "train_batch_size": w.global_batch_size,
        "train_micro_batch_size_per_gpu": c.mbs,
        "gradient_accumulation_steps": w.global_batch_size // per_step,
    }


def autotp(c: ParallelConfig) -> bool:
    """Tensor parallelism through DeepSpeed's AutoTP (tensor_parallel.autotp_size): without pipeline stages (a
    PipelineModule is Megatron-DeepSpeed's, whose own tensor parallelism AutoTP would shard again) and without
    sequence parallelism (AutoTP has none: runtime/tensor_parallel, module_inject/layers.py)."""
    return c.tp > 1 and c.pp == 1 and not c.sequence_parallel


def activation_checkpointing() -> dict[str, bool]:
    """deepspeed.checkpointing's block as priced: each layer's input kept whole on every TP rank (2sbh, / tp only
    with sequence parallelism: costmodel/memory.py activation_bytes_per_layer), so no partitioning over the TP ranks
    and no contiguous buffer (which needs partition_activations and number_checkpoints: runtime/activation_
    checkpointing/checkpointing.py configure), no CPU copy."""
    return {"partition_activations": False, "contiguous_memory_optimization": False, "cpu_checkpointing": False}


def data_parallel_note(c: ParallelConfig) -> str:
    """Where DeepSpeed's batch arithmetic gets dp = world / (tp x pp) from."""
    world = c.gpus
    if c.tp * c.pp == 1:
        return f"DeepSpeed's data-parallel size is the world size, {world} (runtime/config.py DeepSpeedConfig)"
    unit = " (AutoTP: a model-parallel unit as in DeepSpeedExamples training/tensor_parallel)" if autotp(c) else ""
    return (
        f"DeepSpeed takes the data-parallel size from the mpu passed to deepspeed.initialize{unit} (runtime/config.py "
        f"DeepSpeedConfig: mpu.get_data_parallel_world_size()): world / (tp x pp) = {world} / ({c.tp} x {c.pp}) = "
        f"{c.dp}; without one it takes the whole world ({world}) and its batch check fails"
    )


def parallel_notes(w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> list[str]:
    """What the model code and launcher must set for the plan to run as priced."""
    notes = [data_parallel_note(c)]
    if c.tp > 1 and not autotp(c):
        sp = " --sequence-parallel" if c.sequence_parallel else ""
        notes.append(
            f"tensor parallelism is Megatron-DeepSpeed's (--tensor-model-parallel-size {c.tp}{sp}), whose mpu the "
            "engine is given; the JSON sets no tensor_parallel.autotp_size (AutoTP would shard its layers again)"
        )
    if c.recompute != "none":
        what = "full (each layer)" if c.recompute == "full" else "selective (the attention core)"
        notes.append(
            f"recompute {what} is chosen by the model code's deepspeed.checkpointing.checkpoint calls "
            "(Megatron-DeepSpeed --recompute-granularity with --deepspeed-activation-checkpointing); the "
            "activation_checkpointing block only configures them"
        )
    if c.pp > 1:
        notes.append(
            f"pipeline stages are set in code: PipelineModule(layers, num_stages={c.pp}, "
            f"partition_method='uniform') or explicit parts with layers per stage {layers}"
        )
    if c.cp > 1 or c.ep > 1:
        notes.append("context/expert parallel degrees are set by the model code (DeepSpeed-Ulysses, DeepSpeed-MoE)")
    if c.schedule != "1f1b" and c.pp > 1:
        notes.append(f"DeepSpeed's pipeline engine runs 1F1B; the plan's {c.schedule} schedule is not available")
    if w.precision == "fp8":
        notes.append("FP8 GEMMs come from Transformer Engine in the model code; DeepSpeed runs bf16 around them")
    notes.append(
        f"written for DeepSpeed {deepspeed_release(w)}; no offload_optimizer / offload_param (the plan prices none)"
    )
    return notes


def _keys(d: dict[str, object], prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        name = f"{prefix}{k}"
        out.add(name)
        if isinstance(v, dict):
            out |= _keys(v, name + ".")
    return out
