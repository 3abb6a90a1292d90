"""The torchtitan exporter: a plan as a torchtitan job TOML (the parallel dims, FSDP2 / HSDP sharding, the pipeline
schedule and its stage split, activation checkpointing, precision)."""

from __future__ import annotations

import json

from optimizer.exports.export_record import Export
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import rank_chunks
from optimizer.spec.workload import TrainingWorkload

TITAN_SCHEDULES = {
    "1f1b": "1F1B",
    "interleaved-1f1b": "Interleaved1F1B",
    "gpipe": "GPipe",
    "zb-h1": "InterleavedZeroBubble",
}


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return str(value)


def torchtitan_export(w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    # HSDP with a shard group: FSDP2 over data_parallel_shard_degree ranks, replicated data_parallel_replicate_degree
    # times (torchtitan/config/configs.py ParallelismConfig); without one, FSDP (ZeRO-3) or DDP.
    hsdp = c.shard_group is not None
    replicate = c.state_replicas if hsdp else (c.dp if c.zero_stage < 3 else 1)
    shard = c.shard_group if c.shard_group is not None else (c.dp if c.zero_stage == 3 else 1)
    sections: dict[str, dict[str, object]] = {
        "parallelism": {
            "data_parallel_replicate_degree": replicate,
            "data_parallel_shard_degree": shard,
            "tensor_parallel_degree": c.tp,
            "pipeline_parallel_degree": c.pp,
            "context_parallel_degree": c.cp,
            "expert_parallel_degree": c.ep,
        },
        "training": {
            "local_batch_size": w.global_batch_size // c.dp,
            "global_batch_size": w.global_batch_size,
            "seq_len": w.seq_len,
            "mixed_precision_param": "bfloat16" if w.precision != "fp16" else "float16",
        },
        "activation_checkpoint": {"mode": c.recompute},
    }
    notes = []
    if c.pp > 1:
        par: dict[str, object] = sections["parallelism"]
        par["pipeline_parallel_schedule"] = TITAN_SCHEDULES[c.schedule]
        par["pipeline_parallel_microbatch_size"] = c.mbs
        if len(set(layers)) == 1 and layers[0] % c.vp == 0 and c.pipeline_layout is None:
            par["pipeline_parallel_layers_per_stage"] = layers[0] // c.vp
            par["pipeline_parallel_first_stage_less_layers"] = 0
            par["pipeline_parallel_last_stage_less_layers"] = 0
        else:
            parts = []
            start = 0
            # schedule order: chunk k of every rank, rank by rank
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
            par["module_fqns_per_model_part"] = parts
        if c.schedule == "zb-h1":
            notes.append("torchtitan's closest zero-bubble schedule is InterleavedZeroBubble")
    if hsdp and c.zero_stage == 2:  # FSDP2 keeps the gathered weights until the backward: ZeRO-2
        sections["parallelism"]["fsdp_reshard_after_forward"] = "never"
    if c.zero_stage in (1, 2) and not hsdp:
        notes.append(
            f"torchtitan shards with FSDP2 (ZeRO-3) or replicates (DDP); ZeRO-{c.zero_stage} maps to replication here"
        )
    if c.recompute == "selective":
        notes.append("torchtitan's selective mode checkpoints per op; set activation_checkpoint.selective_ac_option")
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
