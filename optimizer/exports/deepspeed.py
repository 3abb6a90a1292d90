"""The DeepSpeed exporter: a plan as a DeepSpeed configuration JSON (ZeRO stage, MiCS / hpZ shard groups, AutoTP,
activation checkpointing, precision); what the JSON cannot say (pipeline stages, Ulysses, MoE) goes to the notes."""

from __future__ import annotations

import json

from optimizer.exports.export_record import Export
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


def deepspeed_export(w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    m = w.global_batch_size // (c.dp * c.mbs)
    cfg: dict[str, object] = {
        "train_batch_size": w.global_batch_size,
        "train_micro_batch_size_per_gpu": c.mbs,
        "gradient_accumulation_steps": m,
        "zero_optimization": {
            "stage": c.zero_stage,
            "overlap_comm": c.overlap_grad_reduce,
            "contiguous_gradients": True,
            "reduce_scatter": True,
        },
        "bf16": {"enabled": w.precision in ("bf16", "fp8")},
        "fp16": {"enabled": w.precision == "fp16"},
        "gradient_clipping": 1.0,
    }
    notes = []
    if c.shard_group is not None:  # MiCS (states) or ZeRO++ hpZ (weights), over world ranks (tp = pp = 1)
        zero = cfg["zero_optimization"]
        assert isinstance(zero, dict)
        if c.shard_scope == "weights":
            zero["zero_hpz_partition_size"] = c.shard_group
        else:
            zero["mics_shard_size"] = c.shard_group
            notes.append(
                "MiCS is built with deepspeed.zero.MiCS_Init (not zero.Init) in the model code; when a shard group "
                "spans nodes, zero_optimization.mics_hierarchical_params_gather (inter- then intra-node gathers) may "
                "help, but is not what was priced"
            )
    if c.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": c.tp}
    if c.recompute != "none":
        cfg["activation_checkpointing"] = {"partition_activations": c.tp > 1, "contiguous_memory_optimization": True}
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
    return Export(
        tool="deepspeed", format="json", content=json.dumps(cfg, indent=2), options=sorted(_keys(cfg)), notes=notes
    )


def _keys(d: dict[str, object], prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        name = f"{prefix}{k}"
        out.add(name)
        if isinstance(v, dict):
            out |= _keys(v, name + ".")
    return out
