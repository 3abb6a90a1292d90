"""How often a pool's nodes interrupt a job, how fast its storage takes a checkpoint, and what a restart costs.

Defaults come from published cluster studies, each cited at its field:

- [L3] Llama 3 report (Dubey et al., arXiv 2407.21783, §3.3.4 and Table 5): 466 job interruptions in a 54-day
  snapshot of Llama 3 405B pre-training on 16,384 H100 (2,048 nodes of 8), 47 planned and 419 unexpected, "more
  than 90% effective training time". Table 5 lists the 419 by root cause; grouped here as GPU (faulty GPU 148, HBM3
  72, SRAM 19, GPU system processor 17, silent data corruption 6, thermal interface and sensor 6: 268), network
  (switch or cable 35, NIC 7: 42), host (unplanned host maintenance 32, SSD 3, power supply 3, chassis 2, IO
  expansion board 2, CPU 2, system memory 2: 46) and software (software bug 54, dependency 2, NCCL watchdog
  timeouts 7: 63); 268 + 42 + 46 + 63 = 419 over 54 x 2,048 = 110,592 node-days. §3.3.1: the Tectonic storage
  behind it sustains 2 TB/s (7 TB/s peak); a GPU's checkpoint share ranges from 1 MB to 4 GB.
- [K24] Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning Research Clusters", arXiv
  2410.21680 (HPCA 2025): failure rates per node-day of Meta's RSC-1 and RSC-2 A100 research clusters (11 months,
  4 million jobs), a mean time to failure that falls as 1 / the job's GPUs, and the effective-training-time model
  goodput.py follows; its rates are of the order of [L3]'s and are not used as a default here.
- [MS] MegaScale (Jiang et al., NSDI'24, arXiv 2402.15754) §3.5 / §4: NCCL and torch.distributed initialisation of a
  2,048-GPU job took 1,047 s before their fixes and under 5 s after, under 30 s above 10,000 GPUs.
- [PT] PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp: kProcessGroupNCCLDefaultTimeout = 10 x 60 x 1000 ms,
  the NCCL watchdog's collective timeout (init_process_group's `timeout` default for NCCL; 30 min for other
  backends, torch/distributed/constants.py); Megatron-LM megatron/training/arguments.py --distributed-timeout-minutes
  default 10. A hung collective is seen when it times out: the job then aborts (TORCH_NCCL_ASYNC_ERROR_HANDLING).
- [OPT] Zhang et al., "OPT: Open Pre-trained Transformer Language Models", arXiv 2205.01068 §2.5 and the OPT-175B
  logbook (facebookresearch/metaseq projects/OPT/chronicles): 992 A100 80GB, over 35 manual restarts and over 100
  hosts cycled in two months; restarts were diagnosed and relaunched by hand, loss divergences rolled back to an
  earlier checkpoint.
- [BR] Wan et al., "Robust LLM Training Infrastructure at ByteDance" (ByteRobust), arXiv 2509.16293: implicit
  failures (hangs, MFU decline) next to explicit ones; warm standby machines and in-place hot updates; 97% ETTR over
  three months on 9,600 GPUs.

Detection, recovery, non-hardware interruptions, slowdowns and warm-up (issue 46) are in the second half of the
fields; where no study gives a figure the default says "assumed" and its spread (RANGES) is wide, so the 80% band of
the goodput (costmodel/goodput.py band_draws) carries the doubt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.errors import DomainError

# [L3] Table 5 grouped by cause (module docstring), per 1,000 node-days over 110,592 node-days.
L3_NODE_DAYS = 54 * 2048
L3_UNEXPECTED = {"gpu": 268, "network": 42, "host": 46, "software": 63}
L3_RATE_PER_1000 = {k: 1000.0 * v / L3_NODE_DAYS for k, v in L3_UNEXPECTED.items()}
# Causes that take a node out until it is repaired or replaced (a software fault restarts on the same nodes).
HARDWARE_CAUSES = ("gpu", "network", "host")


class PoolReliability(BaseModel):
    """A pool's failure rates by cause, checkpoint bandwidth, restart cost and spare nodes (None fields of a pool:
    these defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_failures_per_1000_node_days: float = Field(
        default=round(L3_RATE_PER_1000["gpu"], 3),  # [L3] 268 / 110,592 node-days
        gt=0,
        le=1_000_000,
        description="Job interruptions caused by GPUs (device, HBM, SRAM, NVLink, silent data corruption), per "
        "1,000 node-days.",
    )
    network_failures_per_1000_node_days: float = Field(
        default=round(L3_RATE_PER_1000["network"], 3),  # [L3] 42 / 110,592 node-days
        gt=0,
        le=1_000_000,
        description="Job interruptions caused by NICs, switches and cables, per 1,000 node-days.",
    )
    host_failures_per_1000_node_days: float = Field(
        default=round(L3_RATE_PER_1000["host"], 3),  # [L3] 46 / 110,592 node-days
        gt=0,
        le=1_000_000,
        description="Job interruptions caused by the host (CPU, memory, disk, power, chassis, unplanned "
        "maintenance), per 1,000 node-days.",
    )
    software_failures_per_1000_node_days: float = Field(
        default=round(L3_RATE_PER_1000["software"], 3),  # [L3] 63 / 110,592 node-days
        gt=0,
        le=1_000_000,
        description="Job interruptions caused by software (bugs, dependencies, NCCL watchdog timeouts), per 1,000 "
        "node-days; they restart on the same nodes.",
    )
    checkpoint_write_gbytes_per_s_per_node: float = Field(
        # Assumed: one 200 Gb/s front-end NIC per node (25 GB/s line rate), about 40% of it reached by parallel
        # file-system writes; [L3] §3.3.1's 2 TB/s over 2,048 nodes is 1 GB/s per node when all write at once.
        default=10.0,
        gt=0,
        le=100_000,
        description="Checkpoint write bandwidth of one node to the file system, GB/s.",
    )
    checkpoint_read_gbytes_per_s_per_node: float = Field(
        default=10.0,  # the same assumption as the write bandwidth
        gt=0,
        le=100_000,
        description="Checkpoint read bandwidth of one node from the file system, GB/s.",
    )
    storage_write_gbytes_per_s: float = Field(
        default=2000.0,  # [L3] §3.3.1: Tectonic sustains 2 TB/s
        gt=0,
        le=10_000_000,
        description="Aggregate write bandwidth the storage sustains for all the job's nodes at once, GB/s.",
    )
    storage_read_gbytes_per_s: float = Field(
        default=2000.0,  # [L3] §3.3.1: 2 TB/s sustained (7 TB/s peak)
        gt=0,
        le=10_000_000,
        description="Aggregate read bandwidth the storage sustains for all the job's nodes at once, GB/s.",
    )
    launch_s: float = Field(
        # Assumed: failure detection, job teardown, re-queue and process start; automation handled all but 3 of
        # [L3]'s 466 interruptions. The Llama 3 test spans 2 to 15 minutes.
        default=300.0,
        gt=0,
        le=604_800,
        description="Seconds from a failure to the relaunched job's processes (detection, teardown, scheduling, "
        "start), before NCCL initialisation and the checkpoint load.",
    )
    nccl_init_s_per_1000_gpus: float = Field(
        default=2.5,  # [MS] under 30 s above 10,000 GPUs after their fixes (1,047 s at 2,048 GPUs before)
        gt=0,
        le=100_000,
        description="NCCL / torch.distributed initialisation on restart, seconds per 1,000 GPUs of the job.",
    )
    node_repair_s: float = Field(
        # Assumed: a reboot and health check takes tens of minutes, a GPU or board swap hours; 2 h between.
        default=7200.0,
        gt=0,
        le=30 * 86_400,
        description="Seconds until a node taken out by a hardware failure is back (repaired or replaced from "
        "outside the pool); a restart waits for it when no spare node is free.",
    )
    spare_nodes: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="Healthy nodes held back from the plan as hot spares (the pool's nodes a plan leaves unused "
        "are spares too); must be fewer than the pool's nodes.",
    )

    hang_share: float = Field(
        # Assumed 0.2: [L3] Table 5 names 7 of 419 interruptions NCCL watchdog timeouts, but a faulty GPU or link often
        # shows first as a hung collective; [BR] counts hangs among its implicit failures. Range 0.05-0.4 (RANGES).
        default=0.2,
        ge=0,
        le=1,
        description="Share of interruptions that show as a hang (a collective that never completes): detected "
        "only when collective_timeout_s runs out.",
    )
    silent_share: float = Field(
        # Assumed 0.03: [L3] Table 5's silent data corruption (6 of 419) and [BR]'s MFU declines; range 0.01-0.1.
        default=0.03,
        ge=0,
        le=1,
        description="Share of interruptions that show as a silent stall or slowdown, found by monitoring after "
        "silent_detect_s.",
    )
    crash_detect_s: float = Field(
        # Assumed 30 s: a process exit is seen by the launcher's monitor loop (torchrun's elastic agent) and the
        # scheduler's step tear-down within seconds to a minute.
        default=30.0,
        gt=0,
        le=86_400,
        description="Seconds from a crash (a process exits, an XID error) to the job being torn down.",
    )
    collective_timeout_s: float = Field(
        default=600.0,  # [PT] kProcessGroupNCCLDefaultTimeout 10 min; Megatron --distributed-timeout-minutes 10
        gt=0,
        le=7 * 86_400,
        description="The framework's collective (NCCL watchdog) timeout, seconds: how long a hang goes unseen.",
    )
    silent_detect_s: float = Field(
        # Assumed 1 h: [OPT]'s logbook has stalls and slow nodes found by a person reading the loss curve and
        # throughput; [BR] finds MFU declines automatically in minutes. Range 10 min - 4 h.
        default=3600.0,
        gt=0,
        le=7 * 86_400,
        description="Seconds until a silent stall or slowdown is noticed (monitoring or a person).",
    )
    recovery: Literal["manual", "automatic", "elastic"] = Field(
        default="automatic",
        description="How a job comes back: manual (a person diagnoses and relaunches: manual_response_s), "
        "automatic (the scheduler or a watchdog relaunches it: launch_s) or elastic (in-job recovery onto a "
        "standby or the survivors without a relaunch: elastic_recovery_s).",
    )
    manual_response_s: float = Field(
        # Assumed 2 h: [OPT] §2.5's manual restarts (hours of diagnosis, hosts cycled by hand); C4 (Dong et al.,
        # HPCA 2025, arXiv 2406.04594 §1): finding the faulty node took hours to days. Range 30 min - 8 h.
        default=7200.0,
        gt=0,
        le=7 * 86_400,
        description="Seconds a person takes to diagnose and relaunch a job after it stops (recovery manual), on "
        "top of launch_s.",
    )
    elastic_recovery_s: float = Field(
        # Assumed 60 s: [BR]'s warm standby and in-place hot update replace a relaunch with a swap of the node and a
        # new communicator; range 20 s - 5 min.
        default=60.0,
        gt=0,
        le=86_400,
        description="Seconds of in-job recovery (recovery elastic) in place of a relaunch and NCCL re-initialisation.",
    )
    warmup_s: float = Field(
        # Assumed 120 s: the steps after a restart run slow (data loader refill, allocator, kernel autotuning and
        # compilation caches); range 30 s - 10 min.
        default=120.0,
        ge=0,
        le=86_400,
        description="Seconds of full-speed training lost to warm-up after each restart.",
    )
    loss_spikes_per_day: float = Field(
        # Assumed 0.05 a day (one every 20 days): [OPT]'s logbook rolls back after divergences many times in two
        # months, Llama 3 reports few; range 0-0.5.
        default=0.05,
        ge=0,
        le=1000,
        description="Loss spikes, NaNs and divergences per day of training that force a rollback to an older "
        "checkpoint.",
    )
    rollback_s: float = Field(
        # Assumed 1 h of training: a rollback goes back past the last checkpoint to one before the spike; range
        # 0-6 h.
        default=3600.0,
        ge=0,
        le=30 * 86_400,
        description="Seconds of training a rollback discards beyond the last checkpoint.",
    )
    planned_restarts_per_day: float = Field(
        default=round(47 / 54, 3),  # [L3] §3.3.4: 47 planned interruptions (firmware, configuration, data) in 54 days
        ge=0,
        le=1000,
        description="Restarts for code, configuration or data changes per day: a checkpoint is saved just before, "
        "so no work is redone, but the job relaunches and warms up.",
    )
    maintenance_h_per_week: float = Field(
        default=0.0,  # [L3] counts its planned maintenance among the planned restarts above
        ge=0,
        le=168,
        description="Hours per week the cluster is down for planned maintenance.",
    )
    eval_pause_share: float = Field(
        default=0.0,  # off: an evaluation run beside the job or between checkpoints takes no training time
        ge=0,
        lt=1,
        description="Share of wall time training pauses for in-job evaluation.",
    )
    slowdown_share: float = Field(
        # Assumed 0.02: stragglers and degraded links slow the whole synchronous job (MegaScale §4 finds slow nodes
        # with its straggler detector; C4 §2 slow communication); range 0-0.1.
        default=0.02,
        ge=0,
        lt=1,
        description="Share of running time lost to slow periods (stragglers, degraded links or nodes).",
    )
    checkpoint_interval_s: float | None = Field(
        default=None,
        gt=0,
        le=30 * 86_400,
        description="A fixed checkpoint interval, seconds of training (None: the optimum, Young / Daly, within "
        "what the storage absorbs); the optimum is shown beside it.",
    )
    checkpoint_bandwidth_share: float = Field(
        # Assumed 0.25: checkpoints may take at most a quarter of the write bandwidth on average, the rest left to
        # data loading, logging and the other jobs on the storage ([L3] §3.3.1: checkpoints are bursty writes that
        # saturate the storage fabric for short periods).
        default=0.25,
        gt=0,
        le=1,
        description="Largest share of the node's and the storage's write bandwidth checkpoints may take on "
        "average: the interval is at least the write time / this share.",
    )
    checkpoint_tier: Literal["remote", "local", "memory"] = Field(
        default="remote",
        description="Where a checkpoint goes first: remote (the shared file system), local (node-local disk, "
        "copied to remote every remote_checkpoint_every saves; a node lost to hardware loses its copy) or "
        "memory (host memory with a peer replica on another node, as Gemini SOSP'23 and ByteRobust; copied to "
        "remote every remote_checkpoint_every saves).",
    )
    local_write_gbytes_per_s_per_node: float = Field(
        # Assumed 10 GB/s: a node's local NVMe (DGX H100: 8 U.2 NVMe drives, 30 TB); host memory copies run at
        # the PCIe device-to-host rate instead (costmodel/goodput.py D2H).
        default=10.0,
        gt=0,
        le=100_000,
        description="Write and read bandwidth of a node's local disk for checkpoints (tier local), GB/s.",
    )
    peer_gbytes_per_s_per_node: float = Field(
        # Assumed 25 GB/s: one 200 Gb/s front-end NIC per node (the checkpoint bandwidth's assumption above).
        default=25.0,
        gt=0,
        le=100_000,
        description="Bandwidth a node copies its checkpoint share to its peer or restores it from there (tier "
        "memory), GB/s.",
    )
    remote_checkpoint_every: int = Field(
        default=10,
        ge=1,
        le=100_000,
        description="Tiers local and memory: every how many saves a copy also goes to remote storage.",
    )
    spread: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="Range of an input as factors of its value (low, high), by name (DEFAULT_SPREAD's names: "
        "failure_rate, launch_s, ...); a measured history narrows it. Unset names: DEFAULT_SPREAD.",
    )

    @model_validator(mode="after")
    def _shares_fit(self) -> PoolReliability:
        for name, (lo, hi) in self.spread.items():
            if name not in SPREAD_FIELDS:
                raise DomainError(f"reliability.spread.{name}", f"must be one of {sorted(SPREAD_FIELDS)}")
            if not 0 <= lo <= 1 <= hi <= 1000:
                raise DomainError(f"reliability.spread.{name}", f"needs 0 <= low <= 1 <= high (got {lo:g}, {hi:g})")
        if self.hang_share + self.silent_share > 1:
            raise DomainError(
                "reliability.silent_share",
                f"hang_share + silent_share must be at most 1 (got {self.hang_share:g} + {self.silent_share:g})",
            )
        return self

    def rates_per_node_day(self) -> dict[str, float]:
        """Interruptions per node-day by cause (gpu, network, host, software)."""
        return {
            "gpu": self.gpu_failures_per_1000_node_days / 1000,
            "network": self.network_failures_per_1000_node_days / 1000,
            "host": self.host_failures_per_1000_node_days / 1000,
            "software": self.software_failures_per_1000_node_days / 1000,
        }

    @property
    def failures_per_1000_node_days(self) -> float:
        """All causes, per 1,000 node-days."""
        return 1000 * sum(self.rates_per_node_day().values())

    def spread_of(self, name: str) -> tuple[float, float]:
        """The range of input `name` as factors of its value (the pool's own, else DEFAULT_SPREAD)."""
        return self.spread.get(name, DEFAULT_SPREAD[name])

    def with_total_rate(self, per_1000_node_days: float) -> PoolReliability:
        """The same pool at a total rate of `per_1000_node_days`, split over the causes as its own rates are."""
        scale = per_1000_node_days / self.failures_per_1000_node_days
        return self.model_copy(
            update={
                "gpu_failures_per_1000_node_days": self.gpu_failures_per_1000_node_days * scale,
                "network_failures_per_1000_node_days": self.network_failures_per_1000_node_days * scale,
                "host_failures_per_1000_node_days": self.host_failures_per_1000_node_days * scale,
                "software_failures_per_1000_node_days": self.software_failures_per_1000_node_days * scale,
            }
        )


DEFAULT_RELIABILITY = PoolReliability()

# The range each input may take where a cluster has not measured it, as factors of its value (low, high): the 80%
# band of the goodput (costmodel/goodput.py band_draws) samples them, log-uniform between (uniform where low is 0).
# A pool's `spread` overrides a field's (its own history narrows it: calibration/restart_history.py). Sources at
# each.
DEFAULT_SPREAD: dict[str, tuple[float, float]] = {
    # Failure rates (all causes together): [L3] 3.79 per 1,000 node-days on H100 against [OPT]'s 7.5 h between
    # interruptions on 124 A100 nodes (about 26 per 1,000 node-days) and [K24]'s A100 fleets in between; a fleet's
    # first months run higher. The rate of a cluster not measured lies within half to three times the default.
    "failure_rate": (0.5, 3.0),
    "hang_share": (0.25, 2.0),  # 0.05-0.4, assumed (field)
    "silent_share": (0.33, 3.3),  # 0.01-0.1, assumed (field)
    "crash_detect_s": (0.5, 4.0),  # 15 s - 2 min, assumed
    "silent_detect_s": (0.17, 4.0),  # 10 min - 4 h (field)
    "launch_s": (0.4, 3.0),  # [L3]'s test of a relaunch: 2 to 15 minutes
    "nccl_init_s_per_1000_gpus": (0.4, 4.0),  # [MS]: 1 to 10 s per 1,000 GPUs after their fixes
    "manual_response_s": (0.25, 4.0),  # 30 min - 8 h (field)
    "elastic_recovery_s": (0.33, 5.0),  # 20 s - 5 min (field)
    "warmup_s": (0.25, 5.0),  # 30 s - 10 min (field)
    "node_repair_s": (0.25, 4.0),  # 30 min to 8 h: a reboot to a board swap
    "loss_spikes_per_day": (0.0, 10.0),  # 0 - 0.5 a day (field)
    "rollback_s": (0.0, 6.0),  # 0 - 6 h (field)
    "planned_restarts_per_day": (0.5, 2.0),  # [L3]'s 47 in 54 days, halved or doubled
    "slowdown_share": (0.0, 5.0),  # 0 - 10% (field)
    "checkpoint_bandwidth": (0.5, 1.5),  # per-node and storage bandwidth together: the NIC assumption (field)
}
SPREAD_FIELDS = frozenset(DEFAULT_SPREAD)
"""The sourced defaults (a pool whose `reliability` is None)."""
