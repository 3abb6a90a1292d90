"""The zero_optimization block of a DeepSpeed export, as the plan priced it: the ZeRO stage, overlap of the gradient
reduction, the buckets (DeepSpeed's defaults, written out), ZeRO-3's live-parameter limits capped at the live set the
cost model prices, MiCS or ZeRO++ hpZ groups, and no offload (the plan never prices one).

Defaults are DeepSpeed's own (deepspeed/runtime/zero/config.py DeepSpeedZeroConfig, release 0.19.8 from PyPI, the
release the export is checked against: tests/frameworks/deepspeed)."""

from __future__ import annotations

from optimizer.costmodel.framework_runtime import DEEPSPEED
from optimizer.costmodel.memory import stage_params
from optimizer.errors import DomainError
from optimizer.frameworks.capabilities import MICS_LAST_RELEASE, deepspeed_release
from optimizer.frameworks.releases import parse_version
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# DeepSpeedZeroConfig defaults, elements (deepspeed/runtime/zero/config.py, DeepSpeed 0.19.8): reduce_bucket_size,
# allgather_bucket_size 5e8; stage3_prefetch_bucket_size 5e7; stage3_param_persistence_threshold 1e5;
# stage3_max_live_parameters and stage3_max_reuse_distance 1e9.
REDUCE_BUCKET = 500_000_000
ALLGATHER_BUCKET = 500_000_000
PREFETCH_BUCKET = 50_000_000
PERSISTENCE_THRESHOLD = 100_000
MAX_LIVE = 1_000_000_000
MAX_REUSE = 1_000_000_000
# ZeRO-1 / 2 gradient buckets (runtime/zero/stage_1_and_2.py setup_buckets): one reduce_bucket_size buffer per
# gradient dtype with contiguous_gradients, two with overlap_comm; ZeRO-1 stages them in fp32, ZeRO-2 in bf16.
BUCKET_BYTES = {1: 4, 2: 2}


def zero_block(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, notes: list[str]) -> dict[str, object]:
    """zero_optimization as priced; what DeepSpeed holds beyond the priced memory is said in `notes`."""
    zero: dict[str, object] = {
        "stage": c.zero_stage,
        "overlap_comm": c.overlap_grad_reduce,
        "contiguous_gradients": True,  # DeepSpeed's default
        "reduce_scatter": True,  # DeepSpeed's default
        "reduce_bucket_size": REDUCE_BUCKET,
    }
    if c.zero_stage in (1, 2):
        zero["allgather_bucket_size"] = ALLGATHER_BUCKET
        buffers = 2 if c.overlap_grad_reduce else 1
        gb = buffers * REDUCE_BUCKET * BUCKET_BYTES[c.zero_stage] / 1e9
        notes.append(
            f"ZeRO-{c.zero_stage} stages gradients in {buffers} buffer(s) of reduce_bucket_size "
            f"({REDUCE_BUCKET:.0e} elements, {gb:.1f} GB per GPU; runtime/zero/stage_1_and_2.py setup_buckets), "
            "which the plan's memory does not price: lower zero_optimization.reduce_bucket_size if the run's peak "
            "nears the GPU's capacity"
        )
    if c.zero_stage == 3:
        zero.update(zero3_limits(model, c))
    if c.shard_group is not None:
        zero.update(shard_group_keys(w, c, notes))
    return zero


def zero3_limits(model: ModelSpec, c: ParallelConfig) -> dict[str, int]:
    """ZeRO-3's gather limits: DeepSpeed's defaults, capped at the live set the cost model prices (the submodule in
    use and the one prefetched, costmodel/framework_runtime.py DEEPSPEED.zero3_live_layers of a layer's parameters on
    one GPU; costmodel/terms/data_parallel.py zero3_transient_bytes): at most that many parameters gathered at once
    (stage3_max_live_parameters), half of it fetched ahead (stage3_prefetch_bucket_size) or kept for reuse
    (stage3_max_reuse_distance), so that DeepSpeed holds no more unsharded weights than were priced
    (runtime/zero/partitioned_param_coordinator.py fetch_sub_module, __params_to_release)."""
    moe = model.num_moe_layers
    dense_p, expert_p, _ = stage_params(model, c, model.num_layers - moe, moe, True, True)
    live = int(DEEPSPEED.zero3_live_layers * (dense_p + expert_p) / model.num_layers)
    return {
        "stage3_prefetch_bucket_size": min(PREFETCH_BUCKET, live // 2),
        "stage3_param_persistence_threshold": PERSISTENCE_THRESHOLD,
        "stage3_max_live_parameters": min(MAX_LIVE, live),
        "stage3_max_reuse_distance": min(MAX_REUSE, live // 2),
    }


def shard_group_keys(w: TrainingWorkload, c: ParallelConfig, notes: list[str]) -> dict[str, object]:
    """ZeRO++ hpZ (shard_scope weights) or MiCS (states) over `shard_group` consecutive world ranks (tp = pp = 1:
    frameworks/capabilities.py DEEPSPEED shard_group, shard_scope). MiCS is refused for a release without it."""
    assert c.shard_group is not None
    if c.shard_scope == "weights":
        return {"zero_hpz_partition_size": c.shard_group}
    release = deepspeed_release(w)
    if parse_version(release) > MICS_LAST_RELEASE:
        raise DomainError(
            "export.shard_group",
            f"shard_group={c.shard_group} (MiCS, zero_optimization.mics_shard_size) is not in DeepSpeed {release}: "
            "it was removed in 0.19.7 (deepspeed/runtime/config.py refuses the key, DeepSpeed issue 8489), and plain "
            "ZeRO-3 over the whole data-parallel group is not what was priced; plan with "
            "workload.framework_version <= 0.19.6, or without shard_group (or with shard_scope=weights, ZeRO++ hpZ)",
        )
    notes.append(
        f"MiCS (DeepSpeed {release}) is built with deepspeed.zero.MiCS_Init (not zero.Init) in the model code; "
        "zero_optimization.mics_hierarchical_params_gather (inter- then intra-node gathers) is not what was priced"
    )
    return {"mics_shard_size": c.shard_group}
