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
import random
from dataclasses import dataclass

from optimizer.costmodel.memory import state_bytes_per_param
from optimizer.costmodel.result import Estimate, Goodput
from optimizer.frameworks.capabilities import framework as framework_of
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import HARDWARE_CAUSES, SPREAD_FIELDS, PoolReliability
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
    """The failure model of one plan: its checkpoint, interruptions, what each costs and the share of wall time
    that trains, by part (hours per wall day; the parts add up to 24 x (1 - fraction))."""

    checkpoint_bytes: float
    rank_bytes: float
    async_save: bool
    tier: str
    write_s: float
    blocking_s: float
    load_s: float
    nodes: int
    spares: int
    failures_per_day: float
    detection_s: float
    restart_s: float
    warmup_s: float
    interval_s: float
    optimal_interval_s: float
    interval_floor_s: float
    interval_fixed: bool
    rework_s: float
    fraction: float
    lost_h: dict[str, float]

    @property
    def ettr(self) -> float:
        """Effective training time ratio as fleets publish it (Llama 3 §3.3.4, Kokolis et al. §5, ByteRobust): the
        share of wall time the job trains, slow periods counted as training (they show in its throughput)."""
        return self.fraction + self.lost_h.get("slowdown", 0.0) / 24.0


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


def _worst(rels: list[tuple[NodePool, int, PoolReliability]], attr: str) -> float:
    """The largest value of a job-wide input over the plan's pools (the job waits for its slowest pool)."""
    return max(float(getattr(r, attr)) for _, _, r in rels)


def _recovery(rels: list[tuple[NodePool, int, PoolReliability]]) -> str:
    """The slowest recovery mode of the plan's pools (manual > automatic > elastic)."""
    modes = {r.recovery for _, _, r in rels}
    return next(m for m in ("manual", "automatic", "elastic") if m in modes)


def detection_seconds(hang: float, silent: float, crash_s: float, timeout_s: float, silent_s: float) -> float:
    """Expected seconds from an interruption to its detection when a share `hang` of them are hangs and `silent`
    silent stalls: a crash is seen when its process exits, a hang when the collective timeout runs out (the NCCL
    watchdog, 10 min by default: spec/reliability.py [PT]), a silent stall or slowdown when monitoring or a person
    notices it."""
    hang = min(1.0, hang)
    silent = min(1.0 - hang, silent)
    return (1.0 - hang - silent) * crash_s + hang * timeout_s + silent * silent_s


def wall_shares(
    interruptions: list[tuple[float, dict[str, float], float]],
    maintenance_share: float,
    blocking_s: float,
    tau_s: float,
    slowdown: float,
) -> tuple[float, dict[str, float]]:
    """(fraction, share of wall time lost by part) of a renewal process [Young 1974; Daly 2006; Kokolis et al.
    arXiv 2410.21680 §5 ETTR]: interruptions of each kind arrive at their rate per second of running (rate, the
    seconds of downtime they cost by part, the seconds of running they redo); planned maintenance and pauses take
    their share of wall time first; of the running time, rework is redone, checkpoints block delta every tau, and
    slow periods take their share of the rest. The parts and the fraction add up to 1."""
    avail = max(0.0, 1.0 - maintenance_share)
    down_rate = sum(rate * sum(parts.values()) for rate, parts, _ in interruptions)
    run = avail / (1.0 + down_rate)
    lost: dict[str, float] = {"maintenance": 1.0 - avail}
    for rate, parts, _ in interruptions:
        for k, v in parts.items():
            lost[k] = lost.get(k, 0.0) + avail * rate * v / (1.0 + down_rate)
    redo = min(1.0, sum(rate * w for rate, _, w in interruptions))
    lost["rework"] = run * redo
    left = run - lost["rework"]
    lost["checkpoint"] = left * blocking_s / (tau_s + blocking_s) if math.isfinite(tau_s) and tau_s > 0 else 0.0
    left -= lost["checkpoint"]
    lost["slowdown"] = left * slowdown
    return left - lost["slowdown"], lost


def failure_model(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    c: ParallelConfig,
    framework: str | None = None,
    step_s: float = 0.0,
    overrides: dict[str, float] | None = None,
) -> FailureModel:
    """The checkpoint, interruptions, restarts, interval and goodput of configuration `c` with a step of `step_s`
    seconds (0: not known; the interval is then not held to one step). `overrides` scales inputs by name (the
    band's samples: band_draws), as factors of the pools' values."""
    f = overrides or {}
    fw = framework_of(priced_framework(framework or w.framework))  # type: ignore[arg-type]
    weights, optimizer = checkpoint_bytes(model, w)
    total = weights + optimizer
    rank = largest_rank_share(weights, optimizer, c, fw.name)
    pools = _plan_pools(cluster, c)
    rels = [(p, n, p.reliability_or_default) for p, n in pools]
    bw = f.get("checkpoint_bandwidth", 1.0)
    tier, every, write_s, blocking_s, durable_s, floor_s, load_sw, load_hw = _save_times(
        rels, rank, total, c, fw.async_checkpoint, bw, step_s
    )

    relaunch, recover, warm = _recovery_times(rels, c, f)
    regrow_s = relaunch + load_hw  # the restart back onto the repaired node
    hw_per_day, sw_per_day, waiting_per_day, spares = _failure_rates(rels, w, c, f, regrow_s)
    per_day = hw_per_day + sw_per_day
    detect, spikes, rollback, planned, maintenance, slowdown = _interruption_inputs(rels, f)

    unplanned = per_day + spikes
    mtbf_s = SECONDS_PER_DAY / unplanned if unplanned > 0 else math.inf
    optimum = max(daly_interval(blocking_s, mtbf_s), floor_s) if math.isfinite(mtbf_s) else math.inf
    fixed = min((r.checkpoint_interval_s for _, _, r in rels if r.checkpoint_interval_s is not None), default=None)
    # A fixed interval runs as given, except that a save comes at a step's end and waits for the previous one.
    tau = max(fixed, step_s, durable_s) if fixed is not None else optimum

    def rework(durable: float, distance: float) -> float:
        """Training redone after a failure: half an interval of `distance` on average since the last save that
        was safe, plus that save's time to become safe (synchronous remote: the blocked write half the time)."""
        if not math.isfinite(distance):
            return 0.0
        if tier == "remote" and not fw.async_checkpoint:
            return (distance + blocking_s) / 2
        return distance / 2 + durable

    rework_sw = rework(durable_s, tau)
    # Tier local loses a failed node's copy: back to the last remote one (every `every` saves).
    rework_hw = rework(write_s, every * tau) if tier == "local" else rework_sw
    wait_s = waiting_per_day / hw_per_day if hw_per_day > 0 else 0.0
    to_s = 1.0 / SECONDS_PER_DAY
    kinds: list[tuple[float, dict[str, float], float]] = [
        (
            hw_per_day * to_s,
            {"detection": detect, "restart": recover + load_hw + wait_s, "warmup": warm},
            rework_hw,
        ),
        (sw_per_day * to_s, {"detection": detect, "restart": recover + load_sw, "warmup": warm}, rework_sw),
        (
            spikes * to_s,
            {"detection": _worst(rels, "crash_detect_s"), "restart": relaunch + load_hw, "warmup": warm},
            rework_sw + rollback,
        ),
        (planned * to_s, {"planned": relaunch + load_sw + blocking_s + warm}, 0.0),
    ]
    fraction, shares = wall_shares(kinds, maintenance, blocking_s, tau, slowdown)
    restart_s = (
        (hw_per_day * (recover + load_hw + wait_s) + sw_per_day * (recover + load_sw)) / per_day
        if per_day > 0
        else recover + load_hw
    )
    rework_mean = (hw_per_day * rework_hw + sw_per_day * rework_sw) / per_day if per_day > 0 else rework_sw
    return FailureModel(
        checkpoint_bytes=total,
        rank_bytes=rank,
        async_save=fw.async_checkpoint or tier == "memory",
        tier=tier,
        write_s=write_s,
        blocking_s=blocking_s,
        load_s=load_hw,
        nodes=sum(n for _, n, _ in rels),
        spares=spares,
        failures_per_day=per_day,
        detection_s=detect,
        restart_s=restart_s,
        warmup_s=warm,
        interval_s=tau,
        optimal_interval_s=optimum,
        interval_floor_s=floor_s,
        interval_fixed=fixed is not None,
        rework_s=rework_mean,
        fraction=fraction,
        lost_h={k: 24.0 * v for k, v in shares.items()},
    )


SaveTimes = tuple[str, int, float, float, float, float, float, float]


def _save_times(
    rels: list[tuple[NodePool, int, PoolReliability]],
    rank: float,
    total: float,
    c: ParallelConfig,
    async_checkpoint: bool,
    bw: float,
    step_s: float,
) -> SaveTimes:
    """A checkpoint's tier and times on the plan's pools: (tier, remote save every `every`-th save, remote write,
    what a save blocks, until it is safe, the interval's floor, the load after a software and a hardware fault)."""
    # Per-node time of the busiest node of each pool, against the file system's aggregate (the least of the pools').
    node_bytes = max(rank * min(p.gpus_per_node, c.gpus) for p, _, _ in rels)
    node_write = max(
        rank * min(p.gpus_per_node, c.gpus) / (bw * r.checkpoint_write_gbytes_per_s_per_node * GB) for p, _, r in rels
    )
    node_read = max(
        rank * min(p.gpus_per_node, c.gpus) / (bw * r.checkpoint_read_gbytes_per_s_per_node * GB) for p, _, r in rels
    )
    write_s = max(node_write, total / (bw * min(r.storage_write_gbytes_per_s for _, _, r in rels) * GB))
    load_s = max(node_read, total / (bw * min(r.storage_read_gbytes_per_s for _, _, r in rels) * GB))
    host_copy_s = rank / (D2H_GBYTES_PER_S_PER_GPU * GB)
    tier = rels[0][2].checkpoint_tier
    share = min(r.checkpoint_bandwidth_share for _, _, r in rels)
    every = int(min(r.remote_checkpoint_every for _, _, r in rels))
    local_s = node_bytes / (_worst_min(rels, "local_write_gbytes_per_s_per_node") * GB)
    peer_s = node_bytes / (_worst_min(rels, "peer_gbytes_per_s_per_node") * GB)
    # What a save blocks, how long until it is safe (the next save waits for it), and the floor that time over the
    # bandwidth share puts on the interval; tiers local and memory also send every `every`-th save to remote.
    if tier == "memory":  # host snapshot, then a copy to a peer node (Gemini SOSP'23; ByteRobust)
        blocking_s, durable_s, floor_s = host_copy_s, host_copy_s + peer_s, peer_s / share
    elif tier == "local":
        blocking_s = host_copy_s if async_checkpoint else local_s
        durable_s, floor_s = local_s, local_s / share
    else:
        blocking_s = host_copy_s if async_checkpoint else write_s
        durable_s, floor_s = (write_s if async_checkpoint else 0.0), write_s / share
    if tier != "remote":
        floor_s = max(floor_s, write_s / (share * every))
    floor_s = max(floor_s, durable_s, step_s)
    # Loads: a software fault restarts on the same nodes (their local or host copy), a hardware fault loses a node
    # (its local copy with it; a memory checkpoint comes back from the peer replica).
    if tier == "memory":
        load_sw, load_hw = host_copy_s, peer_s
    elif tier == "local":
        load_sw, load_hw = local_s, load_s
    else:
        load_sw = load_hw = load_s
    return tier, every, write_s, blocking_s, durable_s, floor_s, load_sw, load_hw


def _recovery_times(
    rels: list[tuple[NodePool, int, PoolReliability]], c: ParallelConfig, f: dict[str, float]
) -> tuple[float, float, float]:
    """(relaunch: launch + NCCL init, recovery by the pools' mode: manual adds the response, elastic its own, and
    warm-up), seconds."""
    mode = _recovery(rels)
    launch = _worst(rels, "launch_s") * f.get("launch_s", 1.0)
    nccl = _worst(rels, "nccl_init_s_per_1000_gpus") * f.get("nccl_init_s_per_1000_gpus", 1.0) * c.gpus / 1000
    relaunch = launch + nccl
    if mode == "manual":
        recover = relaunch + _worst(rels, "manual_response_s") * f.get("manual_response_s", 1.0)
    elif mode == "elastic":
        recover = _worst(rels, "elastic_recovery_s") * f.get("elastic_recovery_s", 1.0)
    else:
        recover = relaunch
    warm = _worst(rels, "warmup_s") * f.get("warmup_s", 1.0)
    return relaunch, recover, warm


def _failure_rates(
    rels: list[tuple[NodePool, int, PoolReliability]],
    w: TrainingWorkload,
    c: ParallelConfig,
    f: dict[str, float],
    regrow_s: float,
) -> tuple[float, float, float, int]:
    """(hardware failures per day, software failures per day, seconds per day waiting for a repaired or spare node,
    spare nodes) over the plan's pools."""
    hw_per_day = sw_per_day = waiting_per_day = 0.0
    spares = 0
    rate_factor = f.get("failure_rate", 1.0)
    repair_factor = f.get("node_repair_s", 1.0)
    for p, n, r in rels:
        rates = r.rates_per_node_day()
        hw_rate = n * sum(rates[k] for k in HARDWARE_CAUSES) * rate_factor
        sw_per_day += n * rates["software"] * rate_factor
        free = max(0, p.healthy_nodes - n)
        spares += free
        repair = r.node_repair_s * repair_factor
        load = hw_rate / SECONDS_PER_DAY * repair
        hw_per_day += hw_rate
        waiting_per_day += hw_rate * wait_probability(load, free) * repair_cost(w, c, p, repair, regrow_s)
    return hw_per_day, sw_per_day, waiting_per_day, spares


def _interruption_inputs(
    rels: list[tuple[NodePool, int, PoolReliability]], f: dict[str, float]
) -> tuple[float, float, float, float, float, float]:
    """(detection seconds, loss spikes per day, a spike's rollback seconds, planned restarts per day, maintenance and
    evaluation share of wall time, slowdown share), the worst over the plan's pools, scaled by `f`."""
    detect = detection_seconds(
        _worst(rels, "hang_share") * f.get("hang_share", 1.0),
        _worst(rels, "silent_share") * f.get("silent_share", 1.0),
        _worst(rels, "crash_detect_s") * f.get("crash_detect_s", 1.0),
        _worst(rels, "collective_timeout_s"),
        _worst(rels, "silent_detect_s") * f.get("silent_detect_s", 1.0),
    )
    spikes = _worst(rels, "loss_spikes_per_day") * f.get("loss_spikes_per_day", 1.0)
    rollback = _worst(rels, "rollback_s") * f.get("rollback_s", 1.0)
    planned = _worst(rels, "planned_restarts_per_day") * f.get("planned_restarts_per_day", 1.0)
    maintenance = _worst(rels, "maintenance_h_per_week") / 168 + _worst(rels, "eval_pause_share")
    slowdown = min(0.99, _worst(rels, "slowdown_share") * f.get("slowdown_share", 1.0))
    return detect, spikes, rollback, planned, maintenance, slowdown


def _worst_min(rels: list[tuple[NodePool, int, PoolReliability]], attr: str) -> float:
    """The least bandwidth of the plan's pools."""
    return min(float(getattr(r, attr)) for _, _, r in rels)


def plan_goodput(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    config: ParallelConfig,
    estimate: Estimate,
    framework: str | None = None,
    band: bool = True,
) -> Goodput:
    """A training plan's goodput: its checkpoint (size, write, load), the interval (fixed or optimal, at least one
    step and what the storage absorbs), hours lost per day by part (they add up to the total), the useful tokens
    per second, and the 80% band of the fraction, useful tokens/s and hours lost from the inputs' ranges
    (band_draws) (`framework`: the one the plan runs on; None: the workload's). Without `band` the intervals are
    None: the band is 40 failure models (~1.7 ms of a 2.1 ms training estimate), which callers that read only the
    point (the exhaustive oracle, the accuracy harness's residuals) skip."""
    step = estimate.step_time_s
    fm = failure_model(model, cluster, workload, config, framework, step_s=step)
    lo, hi = (
        fraction_band(model, cluster, workload, config, framework, step, fm.fraction) if band else (fm.fraction,) * 2
    )
    tau = fm.interval_s if math.isfinite(fm.interval_s) else 0.0
    optimum = fm.optimal_interval_s if math.isfinite(fm.optimal_interval_s) else 0.0
    wall = step / fm.fraction if fm.fraction > 0 else math.inf
    h = fm.lost_h
    return Goodput(
        checkpoint_gb=fm.checkpoint_bytes / GB,
        checkpoint_gb_per_rank=fm.rank_bytes / GB,
        async_save=fm.async_save,
        checkpoint_tier=fm.tier,
        write_s=fm.write_s,
        blocking_s=fm.blocking_s,
        load_s=fm.load_s,
        interval_s=tau,
        interval_steps=max(1, math.ceil(tau / step)) if step > 0 and tau > 0 else 1,
        interval_fixed=fm.interval_fixed,
        optimal_interval_s=optimum,
        interval_floor_s=fm.interval_floor_s,
        nodes=fm.nodes,
        spare_nodes=fm.spares,
        failures_per_day=fm.failures_per_day,
        mtbf_h=24.0 / fm.failures_per_day if fm.failures_per_day > 0 else math.inf,
        detection_s=fm.detection_s,
        restart_s=fm.restart_s,
        warmup_s=fm.warmup_s,
        checkpoint_h_per_day=h["checkpoint"],
        rework_h_per_day=h["rework"],
        detection_h_per_day=h.get("detection", 0.0),
        restart_h_per_day=h.get("restart", 0.0),
        warmup_h_per_day=h.get("warmup", 0.0),
        planned_h_per_day=h.get("planned", 0.0) + h["maintenance"],
        slowdown_h_per_day=h["slowdown"],
        lost_h_per_day=sum(h.values()),
        lost_h_per_day_interval=(24.0 * (1 - hi), 24.0 * (1 - lo)) if band else None,
        fraction=fm.fraction,
        fraction_interval=(lo, hi) if band else None,
        ettr=fm.ettr,
        useful_tokens_per_s=fm.fraction * estimate.tokens_per_s,
        useful_tokens_per_s_interval=(lo * estimate.tokens_per_s, hi * estimate.tokens_per_s) if band else None,
        wall_s_per_step=wall,
    )


# The band: every input drawn within its range (PoolReliability.spread_of), the same seeded draws for every plan.
BAND_SAMPLES = 40
BAND_SEED = 46


def band_draws(rel: PoolReliability, samples: int = BAND_SAMPLES, seed: int = BAND_SEED) -> list[dict[str, float]]:
    """`samples` draws of the inputs' factors within their ranges (PoolReliability.spread_of): log-uniform where the
    low end is above 0, uniform otherwise, each input independently, the same draws every call (seeded)."""
    rng = random.Random(seed)
    draws = []
    for _ in range(samples):
        d = {}
        for name in sorted(SPREAD_FIELDS):
            lo, hi = rel.spread_of(name)
            if hi <= lo:
                d[name] = lo
            elif lo > 0:
                d[name] = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            else:
                d[name] = rng.uniform(lo, hi)
        draws.append(d)
    return draws


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile of `xs` (linear between order statistics)."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    i = int(pos)
    j = min(i + 1, len(s) - 1)
    return s[i] + (s[j] - s[i]) * (pos - i)


def fraction_samples(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    config: ParallelConfig,
    framework: str | None,
    step_s: float,
) -> list[float]:
    """The goodput fraction at each of the band's draws (the same draws for every plan on one cluster: two plans'
    samples pair up, search/goodput_choice compares them)."""
    rel = cluster.pools[0].reliability_or_default if cluster.pools else PoolReliability()
    return [
        failure_model(model, cluster, workload, config, framework, step_s=step_s, overrides=d).fraction
        for d in band_draws(rel)
    ]


def fraction_band(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload,
    config: ParallelConfig,
    framework: str | None,
    step_s: float,
    point: float,
) -> tuple[float, float]:
    """The 80% band of the goodput fraction (10th and 90th percentiles over the inputs' ranges), widened to hold
    the point estimate."""
    xs = fraction_samples(model, cluster, workload, config, framework, step_s)
    return min(point, quantile(xs, 0.1)), max(point, quantile(xs, 0.9))
