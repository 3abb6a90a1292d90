"""The torchtitan exporter: a plan as a torchtitan job TOML (torchtitan 0.2.2's JobConfig, read by
`-m torchtitan.train --job.config_file`): the model flavor, the parallel dims, FSDP2 / HSDP / DDP with the
reshard-after-forward policy the ZeRO stage priced, the pipeline schedule and its stage split, activation
checkpointing, float8, compile and async TP. A plan it cannot express is refused naming the knob, never written as
a configuration that holds more memory (tests/frameworks/test_torchtitan.py runs torchtitan's own config manager on
it)."""

from __future__ import annotations

import json

from optimizer.errors import DomainError
from optimizer.exports.export_record import Export
from optimizer.exports.torchtitan_models import TITAN_RELEASE, family, flavor_args, registered_flavor
from optimizer.frameworks.releases import release_fp8_recipe
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import rank_chunks
from optimizer.spec.workload import TrainingWorkload

# torch.distributed.pipelining schedule names as torchtitan's parallelism.pipeline_parallel_schedule takes them
# (torchtitan 0.2.2 distributed/pipeline_parallel.py get_schedule_class); interleaved with one stage per rank is 1F1B.
TITAN_SCHEDULES = {"1f1b": "1F1B", "interleaved-1f1b": "Interleaved1F1B", "gpipe": "GPipe"}
# model.converters name of torchao Float8Linear (torchtitan 0.2.2 components/quantization/float8.py
# register_model_converter(Float8LinearConverter, "quantize.linear.float8")).
FLOAT8_CONVERTER = "quantize.linear.float8"
# activation_checkpoint.selective_ac_option "op": per-op SAC saving every other matmul (torchtitan 0.2.2
# distributed/activation_checkpoint.py _apply_op_sac), what the cost model prices (costmodel/op_sac.py); the default
# "2" checkpoints every second layer whole.
SELECTIVE_AC_OPTION = "op"

Sections = dict[str, dict[str, object]]


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return str(value)


def data_parallel(c: ParallelConfig) -> dict[str, object]:
    """The replicate x shard degrees and reshard policy of the priced ZeRO stage (capabilities.py TORCHTITAN
    'zero'): 0 DDP (replicate = dp), 1 under PP and 2 FSDP2 with reshard_after_forward False ('never': the gathered
    weights stay until the backward; under PP the schedule keeps the gradients whole until the last micro-batch), 3
    FSDP2 resharding every unit after the forward ('always'); a shard group is HSDP (shard = shard_group,
    replicate = dp / shard_group)."""
    if c.zero_stage == 1 and c.pp == 1:
        raise DomainError(
            "export.zero_stage",
            "zero=1 with pp=1 (optimizer state sharded, weights and gradients whole) is not expressible in "
            "torchtitan: FSDP2 shards gradients as it reduces them; plan zero=2 (fsdp_reshard_after_forward "
            "'never') or zero=3 instead",
        )
    if c.zero_stage == 0:
        return {"data_parallel_replicate_degree": c.dp, "data_parallel_shard_degree": 1}
    shard = c.shard_group if c.shard_group is not None else c.dp
    return {
        "data_parallel_replicate_degree": c.state_replicas if c.shard_group is not None else 1,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "always" if c.zero_stage == 3 else "never",
    }


def _stage_parts(c: ParallelConfig, layers: list[int]) -> list[list[str]]:
    """Module names per model part in schedule order (chunk k of every rank, rank by rank: torchtitan assigns part
    i to rank i % pp, distributed/pipeline_parallel.py pipeline_module_split)."""
    parts: list[list[str]] = []
    start = 0
    splits = [rank_chunks(c.pipeline_layout, c.pp, c.vp, r, n) for r, n in enumerate(layers)]
    for k in range(c.vp):
        for r in range(c.pp):
            per = splits[r][k]
            names = [f"layers.{i}" for i in range(start, start + per)]
            if k == 0 and r == 0:
                names = ["tok_embeddings", *names]
            if k == c.vp - 1 and r == c.pp - 1:
                names = [*names, "norm", "output"]
            parts.append(names)
            start += per
    return parts


def pipeline(c: ParallelConfig, layers: list[int]) -> dict[str, object]:
    """The schedule, micro-batch size and stage split of a pipelined plan."""
    if c.schedule not in TITAN_SCHEDULES or (c.vp > 1 and c.schedule != "interleaved-1f1b"):
        raise DomainError(
            "export.schedule",
            f"schedule={c.schedule} with vp={c.vp} has no torchtitan schedule; plan 1f1b, gpipe or interleaved-1f1b",
        )
    name = TITAN_SCHEDULES[c.schedule] if c.vp > 1 or c.schedule != "interleaved-1f1b" else "1F1B"
    par: dict[str, object] = {"pipeline_parallel_schedule": name, "pipeline_parallel_microbatch_size": c.mbs}
    if len(set(layers)) == 1 and layers[0] % c.vp == 0 and c.pipeline_layout is None:
        # torchtitan's generate_llm_fqn_per_model_part: equal stages, the embedding and the loss weighing nothing
        par["pipeline_parallel_layers_per_stage"] = layers[0] // c.vp
        par["pipeline_parallel_first_stage_less_layers"] = 0
        par["pipeline_parallel_last_stage_less_layers"] = 0
    else:
        par["module_fqns_per_model_part"] = _stage_parts(c, layers)
    return par


def parallelism(c: ParallelConfig, layers: list[int]) -> dict[str, object]:
    par: dict[str, object] = {
        **data_parallel(c),
        "tensor_parallel_degree": c.tp,
        "enable_async_tensor_parallel": c.tp_comm_overlap and c.tp > 1,
        "pipeline_parallel_degree": c.pp,
        "context_parallel_degree": c.cp,
        "expert_parallel_degree": c.ep,
    }
    if c.ep > 1:
        par["expert_tensor_parallel_degree"] = c.expert_tp
    if c.pp > 1:
        par.update(pipeline(c, layers))
    return par


def training(w: TrainingWorkload, c: ParallelConfig) -> dict[str, object]:
    """Batch and precision. torchtitan accumulates global / (local x dp) micro-steps (train.py
    gradient_accumulation_steps); under PP one step runs local / microbatch_size micro-batches, so there the local
    batch is the rank's whole share, otherwise the planned micro-batch."""
    local = w.global_batch_size // c.dp if c.pp > 1 else c.mbs
    return {
        "local_batch_size": local,
        "global_batch_size": w.global_batch_size,
        "seq_len": w.seq_len,
        # FSDP2 MixedPrecisionPolicy: bf16 compute copies, fp32 gradient reduction (JobConfig.training)
        "mixed_precision_param": "bfloat16",
        "mixed_precision_reduce": "float32",
    }


def activation_checkpoint(c: ParallelConfig) -> dict[str, object]:
    body: dict[str, object] = {"mode": c.recompute}
    if c.recompute == "selective":
        body["selective_ac_option"] = SELECTIVE_AC_OPTION
    return body


def compile_section(w: TrainingWorkload, c: ParallelConfig) -> dict[str, object]:
    """torch.compile of the blocks for async TP (torchtitan distributed/tensor_parallel.py maybe_enable_async_tp
    requires compile.enable with 'model'), of the loss where the plan priced the fused loss (workload.fused_loss)."""
    components = (["model"] if c.tp_comm_overlap and c.tp > 1 else []) + (["loss"] if w.fused_loss else [])
    return {"enable": bool(components), "components": components} if components else {"enable": False}


def float8(w: TrainingWorkload) -> Sections:
    """model.converters and the torchao recipe the plan priced (workload.fp8_recipe, else the release's default,
    else tensorwise: frameworks/releases.py, cost_context.py)."""
    if w.precision != "fp8":
        return {}
    recipe = w.fp8_recipe or release_fp8_recipe("torchtitan", w.framework_version) or "tensorwise"
    return {"quantize.linear.float8": {"recipe_name": recipe}}


def model_section(model: ModelSpec, w: TrainingWorkload) -> tuple[dict[str, object], list[str]]:
    """torchtitan's model and flavor with the planned shape, or a flavor to register (the notes say its args)."""
    body: dict[str, object]
    notes: list[str] = []
    known = registered_flavor(model)
    if known is not None:
        body = {"name": known.name, "flavor": known.flavor}
    else:
        flavor = f"meshplan-{model.name}"
        body = {"name": family(model), "flavor": flavor}
        notes.append(
            f"torchtitan {TITAN_RELEASE} registers no flavor of this shape: add {flavor!r} to "
            f"torchtitan/models/{family(model)}/__init__.py with {flavor_args(model)}"
        )
    if w.precision == "fp8":
        body["converters"] = [FLOAT8_CONVERTER]
    return body, notes


def torchtitan_export(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    model_body, notes = model_section(model, w)
    sections: Sections = {
        "model": model_body,
        "parallelism": parallelism(c, layers),
        "training": training(w, c),
        "activation_checkpoint": activation_checkpoint(c),
        "compile": compile_section(w, c),
        **float8(w),
    }
    if c.tp > 1 and not c.sequence_parallel:
        notes.append(
            "torchtitan's tensor parallelism always shards the norms' activations over the TP ranks (sequence "
            "parallel, models/llama3/infra/parallelize.py apply_tp): activations below the plan's, same traffic"
        )
    notes.append(f"for torchtitan {TITAN_RELEASE}: -m torchtitan.train --job.config_file <this file>")
    lines: list[str] = []
    option_names: list[str] = []
    for sec, body in sections.items():
        lines.append(f"[{sec}]")
        option_names.append(sec)
        for key, value in body.items():
            lines.append(f"{key} = {_toml(value)}")
            option_names.append(f"{sec}.{key}")
        lines.append("")
    return Export(tool="torchtitan", format="toml", content="\n".join(lines), options=option_names, notes=notes)
