"""A cluster's own calibration: the few cost-model constants that a user's measurements may move, per pool.

The published-run constants (optimizer/costmodel/constants.py) describe typical clusters. A user's cluster
differs in NCCL version, fabric, clocks and kernels, so each pool (one GPU type on one fabric) carries four
factors that its own runs can fit (optimizer/calibration/fit.py): every other term of the cost model stays as
sourced. The identity calibration (all factors 1, the reserve at its sourced value) reproduces the uncalibrated
model exactly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.errors import DomainError
from optimizer.spec.names import FrameworkName

# Allocator fragmentation and temporary buffers: keep 10% of device memory free, as vLLM's default
# gpu_memory_utilization=0.9 does [VL optimization docs; Z20 §3.2 ZeRO-R].
FRAGMENTATION_FRACTION = 0.10

ConstantName = Literal[
    "compute",
    "memory_bound",
    "attention",
    "host",
    "fp8_compute",
    "framework_compute",
    "intra_node",
    "network",
    "memory_reserve",
]

# Range a fitted constant may take: wider than any published cluster's spread around the sourced values
# (the Hopper framework factor's records spread +-15% [benchmarks/model_accuracy.py]; NCCL bus bandwidth on a
# misconfigured fabric falls to a fifth of line rate [NCCL tests issue reports]).
BOUNDS: dict[str, tuple[float, float]] = {
    "compute": (0.3, 2.0),
    "memory_bound": (0.3, 2.0),
    "attention": (0.3, 2.0),
    # Host issue time: Python / driver overhead spans several-fold across CPUs and stacks [PyTorch issue reports
    # on launch-bound small models; CUDA Graphs blog].
    "host": (0.2, 5.0),
    "fp8_compute": (0.5, 2.0),
    "framework_compute": (0.5, 2.0),
    "intra_node": (0.2, 2.0),
    "network": (0.1, 2.0),
    "memory_reserve": (0.0, 0.5),
}

# The constants that are one number per pool (framework_compute is one per framework).
SCALARS: tuple[str, ...] = (
    "compute",
    "memory_bound",
    "attention",
    "host",
    "fp8_compute",
    "intra_node",
    "network",
    "memory_reserve",
)

# What each constant scales, in words the plan page and CLI print.
MEANING: dict[str, str] = {
    "compute": "GEMM and attention throughput (x the sourced efficiency); scales with FLOPs",
    "memory_bound": "device-memory streaming rate of the memory-bound kernels (norms, activations, residuals, "
    "operand streaming, casts, optimizer step; x the sourced HBM efficiency); scales with bytes",
    "attention": "attention-core throughput (x the sourced flash-attention efficiency); scales with s^2 FLOPs",
    "fp8_compute": "FP8 GEMM throughput relative to the pool's calibrated BF16 rate; scales with FP8 FLOPs",
    "framework_compute": "one framework's compute throughput relative to the pool's; scales with its runs' FLOPs",
    "host": "host rate issuing a layer's kernels per micro-batch (x the sourced launch rate); its time scales with "
    "layers x micro-batches, exposed where a layer's GPU work is shorter",
    "intra_node": "NVLink / PCIe bus bandwidth (x the sourced efficiency)",
    "network": "NIC bus bandwidth between nodes (x the sourced efficiency)",
    "memory_reserve": "device memory kept free for allocator slack, fraction of capacity (training: <= 8 GiB)",
}


class PoolCalibration(BaseModel):
    """Fitted constants of one pool. Times scale as 1/factor on the terms each factor names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    compute: float = Field(default=1.0, ge=BOUNDS["compute"][0], le=BOUNDS["compute"][1], description="Factor.")
    memory_bound: float = Field(
        default=1.0, ge=BOUNDS["memory_bound"][0], le=BOUNDS["memory_bound"][1], description="Factor on HBM rate."
    )
    attention: float = Field(
        default=1.0, ge=BOUNDS["attention"][0], le=BOUNDS["attention"][1], description="Factor on attention rate."
    )
    host: float = Field(
        default=1.0, ge=BOUNDS["host"][0], le=BOUNDS["host"][1], description="Factor on host issue rate."
    )
    fp8_compute: float = Field(
        default=1.0,
        ge=BOUNDS["fp8_compute"][0],
        le=BOUNDS["fp8_compute"][1],
        description="Factor on FP8 GEMM throughput, on top of `compute` (fitted only where runs of both precisions "
        "pin it).",
    )
    framework_compute: dict[FrameworkName, float] = Field(
        default_factory=dict,
        description="A framework's own factor on compute, on top of `compute` (fitted only for a cluster whose runs "
        "use more than one framework; the most measured one is the reference, 1).",
    )

    @model_validator(mode="after")
    def _framework_bounds(self) -> PoolCalibration:
        lo, hi = BOUNDS["framework_compute"]
        for fw, v in self.framework_compute.items():
            if not lo <= v <= hi:
                raise DomainError(f"framework_compute.{fw}", f"must be in [{lo}, {hi}]")
        return self

    intra_node: float = Field(
        default=1.0, ge=BOUNDS["intra_node"][0], le=BOUNDS["intra_node"][1], description="Factor."
    )
    network: float = Field(default=1.0, ge=BOUNDS["network"][0], le=BOUNDS["network"][1], description="Factor.")
    memory_reserve: float = Field(
        default=FRAGMENTATION_FRACTION,
        ge=BOUNDS["memory_reserve"][0],
        le=BOUNDS["memory_reserve"][1],
        description="Fraction of device memory kept free (allocator slack).",
    )

    def value(self, name: str) -> float:
        """The constant called `name`."""
        return float(getattr(self, name))


IDENTITY = PoolCalibration()


class Prior(BaseModel):
    """What is known about one constant of one pool before its training runs are fitted: by default the sourced
    value (1) with the spread of published clusters; an acceptance test (nccl-tests, a GEMM sweep) measured on the
    pool moves the centre and narrows the spread."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(gt=0, description="Centre of the prior, as a factor on the sourced value.")
    spread: float = Field(gt=0, le=2.0, description="Standard deviation, log units (about the relative spread).")
    source: str = Field(default="", description="Where the centre comes from (e.g. 'all_reduce_perf, 2 nodes').")


# Priors by pool name, then constant name (only the constants a measurement pinned; the rest keep the defaults).
Priors = dict[str, dict[str, Prior]]


class ClusterCalibration(BaseModel):
    """The calibration of a cluster: constants per pool name (pools not listed use the identity)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(default=0, ge=0, description="Stored calibration number (0: not stored).")
    pools: dict[str, PoolCalibration] = Field(default_factory=dict, description="Constants by pool name.")
    run_residuals: tuple[float, ...] = Field(
        default=(),
        description="log(measured / calibrated prediction) of each step time the fit kept (outliers left out): "
        "what this cluster's own runs say about the error that remains.",
    )
    fitted_constants: int = Field(
        default=0, ge=0, description="Step-time constants the fit identified: degrees of freedom the residuals lost."
    )

    def of(self, pool: str) -> PoolCalibration:
        """The constants of `pool`."""
        return self.pools.get(pool, IDENTITY)


def change_between(before: ClusterCalibration | None, after: ClusterCalibration | None) -> float:
    """The largest relative change of any constant of any pool from `before` to `after` (None: the sourced
    constants)."""
    base, new = before or ClusterCalibration(), after or ClusterCalibration()
    worst = 0.0
    for name in set(new.pools) | set(base.pools):
        a, b = new.of(name), base.of(name)
        for k in SCALARS:
            va, vb = a.value(k), b.value(k)
            worst = max(worst, abs(va - vb) / max(abs(vb), 1e-9))
        for fw in set(a.framework_compute) | set(b.framework_compute):
            va, vb = a.framework_compute.get(fw, 1.0), b.framework_compute.get(fw, 1.0)
            worst = max(worst, abs(va - vb) / vb)
    return worst


# The constant that scales each step-time term (optimizer/costmodel/result.StepBreakdown): the compute kernels
# and what waits on them follow `compute`; collectives follow the tier they cross (TP, CP and EP groups usually
# inside the NVLink domain, DP, ZeRO gathers and pipeline hops across nodes); the optimizer step and launches
# are memory- and host-bound (no fitted constant).
TERM_CONSTANT: dict[str, str] = {
    "forward": "compute",
    "backward": "compute",
    "recompute": "compute",
    "bubble": "compute",
    "tp_comm": "intra_node",
    "cp_comm": "intra_node",
    "ep_comm": "network",
    "pp_comm": "network",
    "dp_comm": "network",
    "zero_gather": "network",
    "optimizer": "memory_bound",
    "launch": "host",
}


def likely_terms(breakdown: dict[str, float], top: int = 3) -> list[str]:
    """The largest step-time terms with their share and the constant that scales them: where to look first when
    a measurement is far from its prediction."""
    total = sum(v for v in breakdown.values() if v > 0) or 1.0
    ranked = sorted(((v, k) for k, v in breakdown.items() if v > 0), reverse=True)[:top]
    return [f"{k} {v / total:.0%} ({TERM_CONSTANT.get(k, 'none')})" for v, k in ranked]
