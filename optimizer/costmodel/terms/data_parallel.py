"""Data-parallel gradient sync, ZeRO / FSDP sharded collectives and the optimizer step of one pipeline stage
[formulas C4, C9, C10; Z20; NB communication-overlap]."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from optimizer.costmodel import network as net
from optimizer.costmodel.compute import hbm_time, overlapped
from optimizer.costmodel.constants import ADAM_BYTES_PER_PARAM, BF16_BYTES, FP8_BYTES, OVERLAP_COMPUTE_SLOWDOWN
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.parallel_config import ParallelConfig

# DeepSpeed BF16_Optimizer's HBM traffic per parameter after each micro-batch's backward: zero the bf16 grads (2),
# autograd's accumulation into them (read 2 + 2, write 2), fp32 += bf16 (read 2 + 4, write 4) [frameworks:
# bf16_optimizer; DeepSpeed runtime/bf16_optimizer.py].
BF16_OPTIMIZER_ACCUMULATE_BYTES = 2 + (2 + 2 + 2) + (2 + 4 + 4)


@dataclass(frozen=True, slots=True)
class DataParallelGroups:
    """A stage's two data-parallel sharding groups and the parameters each replicates. The dense parameters' group
    is the dp x cp ranks (tp apart); the experts' gradients and optimizer states are sharded over the expert
    data-parallel group (etp x ep apart). With a shard group (ParallelConfig.shard_group, scope 'states') each is
    1/replicas of that, and the replicas all-reduce the reduce-scattered gradient shards [formulas C9]."""

    dense_levels: tuple[net.Level, ...]
    """The dense sharding group's fabric levels (network.group_levels)."""
    expert_levels: tuple[net.Level, ...]
    """The expert sharding group's fabric levels."""
    dense_ranks: int
    """Ranks in the dense sharding group (dp x cp, or shard_group x cp)."""
    expert_ranks: int
    """Ranks in the expert sharding group (expert dp, or expert dp / replicas)."""
    dense_params: float
    """Dense parameters per rank incl. the embedding, before DP sharding (count)."""
    expert_params: float
    """Expert parameters per rank, before DP sharding (count)."""
    grad_bytes: int
    """Bytes per gradient element (4 fp32, 2 bf16)."""
    fp8_params: bool
    """Parameters all-gather as FP8 (FP8 primary weights, MLM --fp8-param-gather), else bf16."""
    dense_replica_levels: tuple[net.Level, ...] = ()
    """The ranks holding the same dense shard in each replica of the sharded state (shard_group): their levels, ()
    without replicas [formulas C9]."""
    expert_replica_levels: tuple[net.Level, ...] = ()
    """The same for the expert shards."""
    replica_every_microbatch: bool = False
    """Whether the replicas all-reduce after every micro-batch's backward (FSDP2 HSDP), else only after the last
    (Megatron, Megatron-FSDP, DeepSpeed MiCS) [formulas C9]."""
    dense_secondary_levels: tuple[net.Level, ...] | None = None
    """ZeRO++ hpZ: the levels of the dense secondary weight partition, over which the backward's all-gathers run;
    None without it [formulas C10]."""
    expert_secondary_levels: tuple[net.Level, ...] | None = None
    """The same for the expert weights."""

    @property
    def replicated(self) -> bool:
        """Whether the sharded state has replicas that all-reduce their gradient shards."""
        return bool(self.dense_replica_levels or self.expert_replica_levels)


@dataclass(frozen=True, slots=True)
class Zero3Schedule:
    """How a framework runs ZeRO-3 / FSDP (framework_runtime.Runtime)."""

    collectives_per_layer: int
    """All-gathers per layer and pass (and as many reduce-scatters backward)."""
    node_aggregation: bool
    """Whether inner levels aggregate the bytes before the network (hierarchical), else each rank's full volume
    crosses its own NIC."""
    overlap: float
    """Share of the overlappable communication the framework's prefetch hides (0-1)."""


def _collective(g: DataParallelGroups, kind: str) -> float:
    """One gradient all-reduce ("ar") or reduce-scatter (anything else; priced as an all-gather [NT]) over both
    groups, seconds."""
    f = net.all_reduce if kind == "ar" else net.all_gather
    t = f(g.dense_levels, g.dense_params * g.grad_bytes) if g.dense_ranks > 1 else 0.0
    t += f(g.expert_levels, g.expert_params * g.grad_bytes) if g.expert_ranks > 1 and g.expert_params else 0.0
    return t


def replica_reduce(g: DataParallelGroups) -> float:
    """All-reduce of each rank's gradient shard (1/dense_ranks of the dense and 1/expert_ranks of the expert
    gradients) over the replicas of the sharded state, seconds [formulas C9: FSDP2 foreach_reduce all_reduce over
    the replicate group; MLM param_and_grad_buffer.py inter-instance all_reduce; DeepSpeed mics.py
    allreduce_mics_shard_grads]; 0 without replicas."""
    t = 0.0
    if g.dense_replica_levels:
        t += net.all_reduce(g.dense_replica_levels, g.dense_params * g.grad_bytes / g.dense_ranks)
    if g.expert_replica_levels and g.expert_params:
        t += net.all_reduce(g.expert_replica_levels, g.expert_params * g.grad_bytes / g.expert_ranks)
    return t


def _param_gather(g: DataParallelGroups) -> float:
    """All-gather of the updated parameters over both groups, seconds: bf16, or FP8 with FP8 primary weights
    [MLM --fp8-param-gather]."""
    width = FP8_BYTES if g.fp8_params else BF16_BYTES
    t = net.all_gather(g.dense_levels, g.dense_params * width) if g.dense_ranks > 1 else 0.0
    return t + (
        net.all_gather(g.expert_levels, g.expert_params * width) if g.expert_ranks > 1 and g.expert_params else 0.0
    )


def dp_exposed(
    g: DataParallelGroups,
    zero_stage: int,
    overlap_grad_reduce: bool,
    bf16_optimizer: bool,
    reduce_after_pipeline: bool,
    chunks: float,
    fwd: float,
    bwd: float,
    microbatches: int,
) -> float:
    """Exposed data-parallel sync of one step after the stage's last backward (ZeRO 0-2), seconds; ZeRO-3 is
    zero3_exposed. `fwd` / `bwd` are the stage's per-micro-batch passes, `chunks` the model chunks it runs.

    Overlapped reductions run under the last micro-batch's backward, bucket by bucket; one bucket stays exposed
    [NB communication-overlap]. ZeRO-2 reduces every micro-batch [DeepSpeed #2252]. DeepSpeed's BF16_Optimizer
    all-reduces its bf16 copy of the fp32 buffer (2 B per parameter) after the flush and all-gathers [frameworks];
    frameworks that reduce after the pipeline (`reduce_after_pipeline`) do so after the last micro-batch.
    Replicas of a sharded state (shard_group) all-reduce the reduce-scattered shards after it, on the same stream
    (once per step, or every micro-batch under ZeRO-2 where `g.replica_every_microbatch`) [formulas C9]."""
    if bf16_optimizer:
        return net.all_reduce(g.dense_levels, g.dense_params * BF16_BYTES) + _param_gather(g)
    if reduce_after_pipeline:
        if zero_stage == 0:
            return _collective(g, "ar")
        return _collective(g, "rs") + replica_reduce(g) + _param_gather(g)
    if zero_stage == 0:
        full = _collective(g, "ar")
        return overlapped(full, max(full / chunks, full - bwd)) if overlap_grad_reduce else full
    if zero_stage == 1:
        full = _collective(g, "rs") + replica_reduce(g)
        dp_t = overlapped(full, max(full / chunks, full - bwd)) if overlap_grad_reduce else full
        ag = _param_gather(g)  # updated bf16 params, overlapped with the next forward
        dp_t += overlapped(ag, max(ag / chunks, ag - fwd)) if overlap_grad_reduce else ag
        return dp_t
    if zero_stage == 2:
        rs = _collective(g, "rs")
        if not g.replicated:
            return microbatches * overlapped(rs, max(rs / chunks, rs - bwd)) + _param_gather(g)
        ar = replica_reduce(g)
        each = rs + ar if g.replica_every_microbatch else rs  # the micro-batches before the last
        last = rs + ar

        def exposed(comm: float) -> float:
            return overlapped(comm, max(comm / chunks, comm - bwd))

        return (microbatches - 1) * exposed(each) + exposed(last) + _param_gather(g)
    return 0.0


def flat_levels(levels: tuple[net.Level, ...]) -> tuple[net.Level, ...]:
    """A group's levels as one level at its slowest tier's bandwidth (no aggregation by inner levels)."""
    if not levels:
        return levels
    slow = min(levels, key=lambda lv: lv.bw)
    members = 1
    for lv in levels:
        members *= lv.members
    return (net.Level(members, slow.bw, any(lv.network for lv in levels), slow.name),)


def zero3_exposed(
    g: DataParallelGroups,
    schedule: Zero3Schedule,
    layers: int,
    fwd: float,
    bwd: float,
    replica_reduce_now: bool = False,
) -> float:
    """Exposed ZeRO-3 / FSDP communication of one micro-batch on one stage of `layers` layers, seconds; `fwd` and
    `bwd` are the stage's per-micro-batch compute. `replica_reduce_now`: this micro-batch's backward also
    all-reduces each layer's gradient shard over the replicas of the sharded state (shard_group): after every
    micro-batch in FSDP2 HSDP, after the last in DeepSpeed MiCS and Megatron-FSDP [formulas C9]; under ZeRO++ hpZ
    the backward's gathers run over the secondary partition's group (g.dense_secondary_levels) [formulas C10].

    Per layer and pass the framework issues `collectives_per_layer` all-gathers of the layer's bf16 weights,
    FP8 under FP8 primary weights (Megatron-FSDP with --fp8-param-gather all-gathers the FP8 parameters [MLM
    README 'FP8 Primary Weights'], as the distributed optimizer's gather does), and as many
    reduce-scatters of its gradients in backward, each paying its ring latency over all dp ranks
    [NC tuning.cc]. The next layer's gathers are prefetched under the current layer's compute, so a layer costs
    max(compute, comm); the first gather of the forward and the last reduce-scatter of the backward have nothing
    to hide under [DeepSpeed partitioned_param_coordinator.py; FSDP2 implicit prefetch]. Of the overlappable part
    only the framework's `overlap` share hides (DeepSpeed calibrated on Narayanan 2021 Table 2); the
    recompute forward reuses the backward's gather.
    """
    n = max(1, layers)
    k = schedule.collectives_per_layer
    lv_d, lv_e = g.dense_levels, g.expert_levels
    if not schedule.node_aggregation:  # each rank's whole volume over its own NIC (see Framework)
        lv_d, lv_e = flat_levels(lv_d), flat_levels(lv_e)
    # hpZ: the backward gathers the secondary partition inside its group [DeepSpeed partition_parameters.py
    # all_gather_coalesced: ds_secondary_tensor over zero_param_process_group]
    sec_d = g.dense_secondary_levels if g.dense_secondary_levels is not None else g.dense_levels
    sec_e = g.expert_secondary_levels if g.expert_secondary_levels is not None else g.expert_levels
    if not schedule.node_aggregation:
        sec_d, sec_e = flat_levels(sec_d), flat_levels(sec_e)
    # Bytes per parameter: the gathers move the primary weights (bf16, or FP8 under fp8_param_gather), the
    # reduce-scatters the gradients at their own width (grad_dtype), whatever the weights are stored in.
    wbytes = float(FP8_BYTES) if g.fp8_params else float(BF16_BYTES)
    bytes_per_param = {"ag": wbytes, "rs": float(g.grad_bytes)}
    dense_params, expert_params = g.dense_params, g.expert_params

    def per_layer(f: str, levels_d: tuple[net.Level, ...], levels_e: tuple[net.Level, ...]) -> float:
        fn = net.all_gather  # reduce-scatter costs the same [NT]
        d_piece, e_piece = dense_params * bytes_per_param[f] / (n * k), expert_params * bytes_per_param[f] / (n * k)
        t = fn(levels_d, d_piece) if g.dense_ranks > 1 else 0.0
        if g.expert_ranks > 1 and expert_params:
            t += fn(levels_e, e_piece)
        return k * t

    gather, reduce = per_layer("ag", lv_d, lv_e), per_layer("rs", lv_d, lv_e)
    gather_bwd = gather if g.dense_secondary_levels is None else per_layer("ag", sec_d, sec_e)
    if replica_reduce_now and g.replicated:
        reduce += replica_reduce(g) / n  # each layer's shard, on the reduce stream after its reduce-scatter
    eta = schedule.overlap

    def exposed(comm: float, compute: float) -> float:
        # What the framework's schedule leaves unhidden, but never less than the compute the hidden part slows.
        return max(0.0, comm - compute) + max(1.0 - eta, OVERLAP_COMPUTE_SLOWDOWN) * min(comm, compute)

    return gather + reduce + n * (exposed(gather, fwd / n) + exposed(gather_bwd + reduce, bwd / n))


def zero3_transient_bytes(dense_params: float, expert_params: float, layers: int, live_layers: float) -> float:
    """Unsharded bf16 weights (2 B each) of the `live_layers` layers in use and prefetched under ZeRO-3, bytes per
    GPU [LA analysis.py training(); frameworks]. Parameters are per TP/EP rank, not yet DP-sharded."""
    per_layer = (dense_params + expert_params) / max(1, layers)
    return live_layers * per_layer * BF16_BYTES


def bf16_optimizer_accumulate_time(gpu: GPUSpec, params: float) -> float:
    """HBM time of DeepSpeed BF16_Optimizer's gradient accumulation after every micro-batch's backward, seconds:
    zero the bf16 grads (2 B), autograd accumulates into them (read 2 + 2, write 2), then fp32 += bf16 (read 2 + 4,
    write 4): 18 B per parameter outside the GEMMs (Megatron fuses the accumulation into the wgrad GEMM)
    [frameworks: bf16_optimizer]."""
    return hbm_time(gpu, params * BF16_OPTIMIZER_ACCUMULATE_BYTES)


def shard_ranks(c: ParallelConfig) -> tuple[int, int]:
    """(dense, expert) ranks the ZeRO states are sharded over: dp x cp and the expert data-parallel group, each
    divided by the replicas of a shard group (ParallelConfig.state_replicas) [formulas C9; MLM parallel_state.py
    intra-partial data-parallel groups; torchtitan parallel_dims.py dp_shard x cp and efsdp]."""
    r = c.state_replicas
    return c.dp * c.cp // r, max(1, c.expert_dp // r)


def sharded_groups(
    c: ParallelConfig,
    tiers: tuple[net.Tier, ...],
    dense_params: float,
    expert_params: float,
    grad_bytes: int,
    fp8_params: bool,
    replica_every_microbatch: bool,
) -> DataParallelGroups:
    """A stage's data-parallel groups on a pool of `tiers`. Rank order tp - cp - dp: the dense sharding group is
    the first dense_ranks of the dp x cp ranks (tp apart), its replicas dense_ranks x tp apart (torchtitan's mesh
    [pp, dp_replicate, dp_shard, cp, tp]; Megatron's consecutive intra-partial dp-cp ranks; MiCS's consecutive
    world ranks); the expert groups likewise over etp x ep. A group inside the NVLink domain runs there
    (network.group_levels) [formulas C9]. hpZ's secondary partition is shard_group x cp ranks, tp apart; the experts
    keep gathering over their own group (DeepSpeed runs hpZ with ep = 1 only) [formulas C10]."""
    dense, expert = shard_ranks(c)
    levels = shard_levels(tiers, c.tp, dense, c.expert_tp * c.ep, expert, c.state_replicas, c.secondary_shard_ranks)
    return DataParallelGroups(
        dense_levels=levels[0],
        expert_levels=levels[1],
        dense_ranks=dense,
        expert_ranks=expert,
        dense_params=dense_params,
        expert_params=expert_params,
        grad_bytes=grad_bytes,
        fp8_params=fp8_params,
        dense_replica_levels=levels[2],
        expert_replica_levels=levels[3],
        replica_every_microbatch=replica_every_microbatch,
        dense_secondary_levels=levels[4],
    )


Levels = tuple[net.Level, ...]


@lru_cache(maxsize=4096)
def shard_levels(
    tiers: tuple[net.Tier, ...], tp: int, dense: int, ets: int, expert: int, replicas: int, secondary: int | None
) -> tuple[Levels, Levels, Levels, Levels, Levels | None]:
    """sharded_groups' levels: (dense, expert, dense replicas, expert replicas, dense secondary) for sharding
    groups of `dense` ranks tp apart and `expert` ranks ets = etp x ep apart, `replicas` of each, and hpZ's
    secondary group of `secondary` ranks; memoised (every stage of a configuration asks)."""
    return (
        net.group_levels(tiers, dense, tp),
        net.group_levels(tiers, expert, ets),
        net.group_levels(tiers, replicas, tp * dense) if replicas > 1 else (),
        net.group_levels(tiers, replicas, ets * expert) if replicas > 1 else (),
        net.group_levels(tiers, secondary, tp) if secondary is not None else None,
    )


def secondary_weight_bytes(params: float, ranks: int | None) -> float:
    """ZeRO++ hpZ's secondary partition of the bf16 weights, bytes per GPU: 2 B per parameter over the `ranks` of
    its group (None: no secondary partition) [formulas C10; DeepSpeed partition_parameters.py _partition_param_sec:
    secondary_partition_size = tensor_size // num_ranks_in_param_group, dtype param.dtype]."""
    return 0.0 if ranks is None else params * BF16_BYTES / ranks


def optimizer_step_time(
    gpu: GPUSpec, dense_params: float, expert_params: float, zero_stage: int, dense_ranks: int, expert_ranks: int
) -> float:
    """The Adam step over this rank's share of the parameters at HBM speed, seconds: all of them without ZeRO,
    else 1/dp of the dense and 1/expert-dp of the expert parameters [Z20 §5]."""
    opt_params = (dense_params if zero_stage == 0 else dense_params / dense_ranks) + (
        expert_params if zero_stage == 0 else expert_params / expert_ranks
    )
    return hbm_time(gpu, opt_params * ADAM_BYTES_PER_PARAM)
