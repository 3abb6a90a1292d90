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
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

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
"""The sourced defaults (a pool whose `reliability` is None)."""
