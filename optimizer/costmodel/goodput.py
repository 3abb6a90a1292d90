"""Goodput: what failures and checkpoints take from a training plan's throughput.

A synchronous job stops whenever one of its nodes fails, restarts from its last checkpoint and redoes the work
since. With a failure rate lambda on the plan's nodes (mean time between failures M = 1 / lambda), a checkpoint that
stops training for delta seconds every tau seconds of training, and R seconds per restart, the share of wall time
that trains is, to first order [Young 1974, "A first order approximation to the optimum checkpoint interval", CACM
17(9); Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3)]

    fraction = (M - rework) / (M + R) x tau / (tau + delta),  rework = (tau + delta) / 2 (synchronous save)

(a renewal-reward cycle: M of running between failures, of which rework is redone, then R restarting; to first
order 1 - (R + rework) / M, Young's and Daly's form, which stays meaningful where R nears or passes M)

and the interval that maximises it is Young's tau = sqrt(2 delta M), which Daly refines to
tau = sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta for delta < 2M (M otherwise). Kokolis et al.
(arXiv 2410.21680 §5) use the same decomposition for their effective training time ratio (ETTR).

An asynchronous save (Megatron --async-save, torch DCP async_save: optimizer/frameworks/capabilities.py
async_checkpoint) blocks training only while the state is copied to host memory; the file-system write runs behind
the next steps, so a failure loses the work since the last checkpoint whose write finished: rework = tau / 2 +
write time, and a new save cannot start before the previous one is written (tau >= write time).

Checkpoint contents follow the memory model (costmodel/memory.py state_bytes_per_param): the bf16 weights (2 B per
parameter) and the fp32 master weights with Adam's two moments (12 B, or 10 B with Megatron's precision-aware
optimizer keeping 16-bit remainders). Megatron's distributed checkpoint spreads the save of replicated tensors
over the data-parallel ranks (fully_parallel_save, default True: Megatron-LM d98e8a6 megatron/training/config/
training_config.py) and torch DCP deduplicates them across ranks (torch/distributed/checkpoint/
_dedup_save_plans.py), so every rank writes 1 / gpus of the checkpoint; DeepSpeed's engine saves the module from
data-parallel rank 0 of each model-parallel group and each rank's ZeRO partition of the optimizer state
(deepspeed/runtime/engine.py save_checkpoint: _save_checkpoint on dp rank 0, _save_zero_checkpoint per rank).

Restart: job launch, NCCL initialisation in proportion to the job's GPUs (MegaScale §3.5), the checkpoint load,
and, after a hardware failure, the wait for a node when no spare is free. Nodes in repair are taken as an M/M/inf
queue (offered load a = hardware failure rate x repair time, the count in repair Poisson(a)); a failure finds no
free spare among s with probability P(Poisson(a) >= s). It then does not idle for the repair: it restarts on the
nodes it has with fewer data-parallel replicas, the checkpoint loadable as is and the global batch kept by more
accumulation (the checkpoint-compatible fallback of optimizer/search/fallbacks.py), at that fallback's share of the
plan's throughput, and restarts once more onto the repaired node; it waits the whole repair only where that is
cheaper (no smaller data-parallel degree divides the global batch, or the extra restart costs more).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from optimizer.costmodel.memory import state_bytes_per_param
from optimizer.costmodel.result import Estimate, Goodput
from optimizer.frameworks.capabilities import framework as framework_of
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import HARDWARE_CAUSES
from optimizer.spec.workload import TrainingWorkload

GB = 1e9
SECONDS_PER_DAY = 86_400.0
# Device-to-host copy of a GPU's checkpoint share into pinned host memory (the blocking part of an async save): a
# PCIe Gen4 x16 link carries ~25 GB/s per direction (PCI-SIG; cluster_spec.PCIE_GBYTES_PER_S gives 32 GB/s raw);
# the Gen4 figure is taken for Gen5 hosts too, whose 8 GPUs share the host's memory bandwidth during the copy.
D2H_GBYTES_PER_S_PER_GPU = 25.0


def checkpoint_bytes(model: ModelSpec, w: TrainingWorkload) -> tuple[float, float]:
    """(weights, optimizer state) bytes of a full checkpoint: bf16 weights (2 B per parameter; an FP8 copy is
    rebuilt from them) and fp32 master weights with Adam's moments (12 B, 10 B with precision-aware remainders)
    [costmodel/memory.py state_bytes_per_param; Megatron docs/source/api-guide/dist_optimizer.md]."""
    _, _, opt = state_bytes_per_param(0, 1, 4, fp8=False, remainders=w.precision_aware_optimizer)
    params = float(model.num_parameters)
    return 2.0 * params, opt * params


def largest_rank_share(weights: float, optimizer: float, c: ParallelConfig, framework: str) -> float:
    """Bytes the busiest rank writes. Megatron (fully parallel save) and torch DCP (deduplicated save plans)
    spread the checkpoint evenly over all ranks; DeepSpeed writes the module from data-parallel rank 0 of each
    model-parallel group (sharded over all ranks at ZeRO-3) and the optimizer partition from each rank at ZeRO >= 1
    (from rank 0 of each model-parallel group at ZeRO-0)."""
    gpus = c.gpus
    if framework != "deepspeed":
        return (weights + optimizer) / gpus
    model_parallel = max(1, gpus // c.dp)
    w_share = weights / (gpus if c.zero_stage >= 3 else model_parallel)
    o_share = optimizer / (gpus if c.zero_stage >= 1 else model_parallel)
    return w_share + o_share


def daly_interval(delta_s: float, mtbf_s: float) -> float:
    """Daly's (2006) higher-order optimum checkpoint interval for a checkpoint of delta seconds and a mean time
    between failures M: sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + delta / 18M) - delta for delta < 2M, else M;
    Young's (1974) sqrt(2 delta M) is its first term."""
    if delta_s <= 0:
        return mtbf_s
    if delta_s >= 2 * mtbf_s:
        return mtbf_s
    young = math.sqrt(2 * delta_s * mtbf_s)
    return young * (1 + math.sqrt(delta_s / (2 * mtbf_s)) / 3 + delta_s / (18 * mtbf_s)) - delta_s


def wait_probability(offered_load: float, spares: int) -> float:
    """Probability that a hardware failure finds none of `spares` spare nodes free: P(N >= spares) for N ~
    Poisson(offered_load), the nodes in repair of an M/M/inf queue (Erlang)."""
    if spares <= 0:
        return 1.0
    term = math.exp(-offered_load)
    below = term
    for k in range(1, spares):
        term *= offered_load / k
        below += term
    return max(0.0, 1.0 - below)


def goodput_fraction(delta_s: float, tau_s: float, mtbf_s: float, restart_s: float, rework_s: float) -> float:
    """Share of wall time that trains: (M - rework) / (M + restart) x tau / (tau + delta) [Young; Daly; to first
    order 1 - (restart + rework) / M]."""
    if not math.isfinite(mtbf_s):
        return tau_s / (tau_s + delta_s) if tau_s > 0 else 1.0
    return max(0.0, (mtbf_s - rework_s) / (mtbf_s + restart_s)) * tau_s / (tau_s + delta_s)


def degraded_share(w: TrainingWorkload, c: ParallelConfig, gpus_per_node: int) -> float:
    """Throughput share of the checkpoint-compatible fallback after losing one node: the data-parallel replicas
    left (a node holds gpus_per_node / (tp x cp) data-parallel ranks of one stage in Megatron's rank order
    tp-cp-dp-pp: megatron/core/parallel_state.py RankGenerator), cut to the largest degree whose micro-batches still
    divide the global batch (Megatron: global batch % (micro-batch x dp) == 0), each replica running more
    micro-batches at the same rate (the pipeline bubble's share shrinking is left out: a lower bound)."""
    lost = max(1, gpus_per_node // max(1, c.tp * c.cp))
    for d in range(c.dp - lost, 0, -1):
        if w.global_batch_size % (d * c.mbs) == 0:
            return d / c.dp
    return 0.0


def repair_cost(w: TrainingWorkload, c: ParallelConfig, pool: NodePool, repair_s: float, regrow_s: float) -> float:
    """Seconds of the plan's throughput lost while a failed node with no free spare is repaired: run the
    checkpoint-compatible fallback meanwhile and restart onto the node again (regrow_s), or wait, whichever costs
    less."""
    share = degraded_share(w, c, pool.gpus_per_node)
    return min(repair_s, repair_s * (1.0 - share) + regrow_s) if share > 0 else repair_s


@dataclass(frozen=True)
class FailureModel:
    """The failure model of one plan: its checkpoint, failure rate and restart, independent of its step time."""

    checkpoint_bytes: float
    rank_bytes: float
    async_save: bool
    write_s: float
    blocking_s: float
    load_s: float
    nodes: int
    spares: int
    failures_per_day: float
    restart_s: float
    interval_s: float
    rework_s: float
    fraction: float


def _plan_pools(cluster: ClusterSpec, c: ParallelConfig) -> list[tuple[NodePool, int]]:
    """(pool, nodes the plan uses there): each stage's GPUs on its pool (the first pool with a healthy GPU when
    the configuration names none, as the estimate prices it)."""
    names = c.stage_pools or [next(p.name for p in cluster.pools if p.healthy_gpus) if cluster.pools else ""] * c.pp
    gpus: dict[str, int] = {}
    for n in names:
        gpus[n] = gpus.get(n, 0) + c.gpus_per_stage
    out = []
    for n, g in gpus.items():
        pool = cluster.pool(n)
        out.append((pool, math.ceil(g / pool.gpus_per_node)))
    return out


def failure_model(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, c: ParallelConfig, framework: str | None = None
) -> FailureModel:
    """The checkpoint, failure rate, restart and optimal interval of configuration `c` (its step time aside)."""
    fw = framework_of(priced_framework(framework or w.framework))  # type: ignore[arg-type]
    weights, optimizer = checkpoint_bytes(model, w)
    total = weights + optimizer
    rank = largest_rank_share(weights, optimizer, c, fw.name)
    pools = _plan_pools(cluster, c)
    rels = [(p, n, p.reliability_or_default) for p, n in pools]
    # Per-node time of the busiest node of each pool, against the file system's aggregate (the least of the pools').
    node_write = max(
        rank * min(p.gpus_per_node, c.gpus) / (r.checkpoint_write_gbytes_per_s_per_node * GB) for p, _, r in rels
    )
    node_read = max(
        rank * min(p.gpus_per_node, c.gpus) / (r.checkpoint_read_gbytes_per_s_per_node * GB) for p, _, r in rels
    )
    write_s = max(node_write, total / (min(r.storage_write_gbytes_per_s for _, _, r in rels) * GB))
    load_s = max(node_read, total / (min(r.storage_read_gbytes_per_s for _, _, r in rels) * GB))
    blocking_s = rank / (D2H_GBYTES_PER_S_PER_GPU * GB) if fw.async_checkpoint else write_s
    launch = max(r.launch_s for _, _, r in rels)
    nccl = max(r.nccl_init_s_per_1000_gpus for _, _, r in rels) * c.gpus / 1000
    regrow_s = launch + nccl + load_s  # the restart back onto the repaired node
    per_day = 0.0
    waiting_per_day = 0.0  # failures per day x their expected wait for a node
    spares = 0
    for p, n, r in rels:
        rates = r.rates_per_node_day()
        pool_rate = n * sum(rates.values())
        hw_rate = n * sum(rates[k] for k in HARDWARE_CAUSES)
        free = max(0, p.healthy_nodes - n)
        spares += free
        load = hw_rate / SECONDS_PER_DAY * r.node_repair_s
        per_day += pool_rate
        waiting_per_day += hw_rate * wait_probability(load, free) * repair_cost(w, c, p, r.node_repair_s, regrow_s)
    restart_s = launch + nccl + load_s + (waiting_per_day / per_day if per_day > 0 else 0.0)
    mtbf_s = SECONDS_PER_DAY / per_day if per_day > 0 else math.inf
    tau = daly_interval(blocking_s, mtbf_s) if math.isfinite(mtbf_s) else math.inf
    if fw.async_checkpoint:
        tau = max(tau, write_s)  # the next async save waits for the previous write
        rework = tau / 2 + write_s
    else:
        rework = (tau + blocking_s) / 2
    fraction = 1.0 if math.isinf(tau) else goodput_fraction(blocking_s, tau, mtbf_s, restart_s, rework)
    return FailureModel(
        checkpoint_bytes=total,
        rank_bytes=rank,
        async_save=fw.async_checkpoint,
        write_s=write_s,
        blocking_s=blocking_s,
        load_s=load_s,
        nodes=sum(n for _, n, _ in rels),
        spares=spares,
        failures_per_day=per_day,
        restart_s=restart_s,
        interval_s=tau,
        rework_s=rework,
        fraction=fraction,
    )


def plan_goodput(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    config: ParallelConfig,
    estimate: Estimate,
    framework: str | None = None,
) -> Goodput:
    """A training plan's goodput: its checkpoint (size, write, load), the optimal interval, hours lost per day to
    checkpoints, rework and restarts, and the useful tokens per second (`framework`: the one the plan runs on;
    None: the workload's)."""
    fm = failure_model(model, cluster, workload, config, framework)
    step = estimate.step_time_s
    restarts_h = fm.failures_per_day * fm.restart_s / 3600
    rework_h = fm.failures_per_day * fm.rework_s / 3600
    running_h = max(0.0, 24.0 - restarts_h - rework_h)
    tau = fm.interval_s if math.isfinite(fm.interval_s) else 0.0
    ckpt_h = running_h * fm.blocking_s / (tau + fm.blocking_s) if tau > 0 else 0.0
    wall = step / fm.fraction if fm.fraction > 0 else math.inf
    return Goodput(
        checkpoint_gb=fm.checkpoint_bytes / GB,
        checkpoint_gb_per_rank=fm.rank_bytes / GB,
        async_save=fm.async_save,
        write_s=fm.write_s,
        blocking_s=fm.blocking_s,
        load_s=fm.load_s,
        interval_s=tau,
        interval_steps=max(1, math.ceil(tau / step)) if step > 0 and tau > 0 else 1,
        nodes=fm.nodes,
        spare_nodes=fm.spares,
        failures_per_day=fm.failures_per_day,
        mtbf_h=24.0 / fm.failures_per_day if fm.failures_per_day > 0 else math.inf,
        restart_s=fm.restart_s,
        checkpoint_h_per_day=ckpt_h,
        rework_h_per_day=min(rework_h, 24.0),
        restart_h_per_day=min(restarts_h, 24.0),
        lost_h_per_day=24.0 * (1 - fm.fraction),
        fraction=fm.fraction,
        useful_tokens_per_s=fm.fraction * estimate.tokens_per_s,
        wall_s_per_step=wall,
    )
