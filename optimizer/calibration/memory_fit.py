"""A cluster's memory reserve (the allocator slack of optimizer/spec/calibration.py memory_reserve), fitted from
its runs [issue 14, issue 33 §4].

Two kinds of evidence, per pool:

- Measured slack. A run that reports both torch's allocated and reserved peaks measures the allocator slack,
  (reserved - allocated) / capacity; the runs are combined with the prior (the sourced 10%) by precision
  weighting.
- Runs that ran. Every measured run ran, so it fitted in its GPUs: its predicted allocated peak plus the reserve
  cannot exceed the device memory. The reserve of a pool is then at most (capacity - predicted allocated peak -
  CUDA context) / capacity over every stage on that pool of every run: an upper bound. A run the model predicts to
  overrun (a reported configuration, optimizer/search/reported.py) pulls the reserve down to what makes it fit;
  a run whose predicted allocated peak alone exceeds the GPU sets the reserve to 0 and is named as evidence that an
  allocator term (weights, activations, buffers) over-predicts it, which no reserve can absorb.

A pool appears in the result when it has measured slack or when a run bounds its reserve below the value the
model would otherwise use (the sourced slack, min(10% of capacity, 8 GiB) for training, or the measured one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from optimizer.costmodel.constants import CUDA_CONTEXT_BYTES, FRAGMENTATION_FRACTION
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.memory import training_reserve_bytes
from optimizer.errors import DomainError
from optimizer.frameworks.validation import assign_pools
from optimizer.spec.calibration import BOUNDS
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

GB = 1e9
# Allocator slack per run, fraction of capacity (spread of reserved - allocated across runs of one job
# [PyTorch CUDA caching allocator notes]), and the prior on the sourced 10%.
RESERVE_RUN_SPREAD = 0.02
RESERVE_PRIOR_SPREAD = 0.05
# A bound is applied this far inside (fraction of capacity, ~100 bytes on an 80 GB GPU) so that the run it comes from
# fits under float rounding of the re-summed terms.
BOUND_MARGIN = 1e-9


class MemoryRun(Protocol):
    """What the reserve fit reads of a measured run (optimizer/calibration/fit.py FitPoint has it)."""

    @property
    def label(self) -> str: ...
    @property
    def model(self) -> ModelSpec: ...
    @property
    def cluster(self) -> ClusterSpec: ...
    @property
    def workload(self) -> TrainingWorkload: ...
    @property
    def config(self) -> ParallelConfig: ...
    @property
    def peak_allocated_gb(self) -> float | None: ...
    @property
    def peak_reserved_gb(self) -> float | None: ...


@dataclass(frozen=True)
class RanBound:
    """The reserve one run that ran allows on one pool: its tightest stage there."""

    label: str
    pool: str
    stage: int
    allocated_gb: float  # predicted allocated peak of that stage (no reserve)
    capacity_gb: float

    @property
    def fraction(self) -> float:
        """The largest memory_reserve (slack fraction of capacity) with which the run fits: (capacity - allocated
        - CUDA context) / capacity; negative when the allocated peak alone exceeds the GPU."""
        return (self.capacity_gb - self.allocated_gb - CUDA_CONTEXT_BYTES / GB) / self.capacity_gb

    def words(self) -> str:
        room = self.capacity_gb - self.allocated_gb
        if room < CUDA_CONTEXT_BYTES / GB:
            return (
                f"{self.label} ran, but its predicted allocated peak ({self.allocated_gb:.1f} GB, stage {self.stage}) "
                f"leaves {room:.1f} GB of {self.capacity_gb:.1f} GB, less than the CUDA context: an allocator term "
                "over-predicts it, which the reserve cannot absorb"
            )
        return (
            f"{self.label} ran with a predicted allocated peak of {self.allocated_gb:.1f} GB (stage {self.stage}) "
            f"on {self.capacity_gb:.1f} GB: at most {room:.1f} GB reserve incl. the CUDA context"
        )


@dataclass(frozen=True)
class ReserveFit:
    """The fitted memory_reserve of one pool with its evidence."""

    pool: str
    value: float
    spread: float = RESERVE_PRIOR_SPREAD
    runs: int = 0  # runs that inform it: measured slack, plus runs whose bound binds
    measured: int = 0  # runs with allocated and reserved peaks
    bounded_by: tuple[str, ...] = field(default_factory=tuple)  # labels of the runs that pull it below
    reason: str = ""  # the evidence in words (the report's ConstantFit.reason)


def ran_bounds(points: Sequence[MemoryRun]) -> list[RanBound]:
    """Per run and pool, the tightest stage's bound (runs the cost model cannot price are left out)."""
    out: list[RanBound] = []
    for p in points:
        try:
            est = estimate(p.model, p.cluster, p.workload, p.config)
            pools = assign_pools(p.cluster, p.config)
        except DomainError:
            continue
        tightest: dict[str, RanBound] = {}
        for s, pool in zip(est.stages, pools, strict=True):
            m = s.memory_gb
            b = RanBound(p.label, pool.name, s.index, m.total - m.reserve, m.capacity)
            if pool.name not in tightest or b.fraction < tightest[pool.name].fraction:
                tightest[pool.name] = b
        out.extend(tightest.values())
    return out


def _measured_slack(points: Sequence[MemoryRun]) -> dict[str, list[float]]:
    by_pool: dict[str, list[float]] = {}
    for p in points:
        if p.peak_allocated_gb is None or p.peak_reserved_gb is None:
            continue
        first = assign_pools(p.cluster, p.config)[0]
        capacity = p.cluster.gpu_of(first).memory_bytes / GB
        by_pool.setdefault(first.name, []).append((p.peak_reserved_gb - p.peak_allocated_gb) / capacity)
    return by_pool


def _capacity(points: Sequence[MemoryRun], pool: str) -> float:
    for p in points:
        for q in p.cluster.pools:
            if q.name == pool:
                return float(p.cluster.gpu_of(q).memory_bytes)
    raise KeyError(pool)


def fit_reserve(points: Sequence[MemoryRun]) -> dict[str, ReserveFit]:
    """The memory_reserve of each pool the runs say something about (see the module docstring)."""
    slacks = _measured_slack(points)
    bounds: dict[str, list[RanBound]] = {}
    for b in ran_bounds(points):
        bounds.setdefault(b.pool, []).append(b)
    lo, hi = BOUNDS["memory_reserve"]
    out: dict[str, ReserveFit] = {}
    for pool in list(dict.fromkeys([*slacks, *bounds])):
        measured = slacks.get(pool, [])
        prec_prior, prec_run = 1 / RESERVE_PRIOR_SPREAD**2, 1 / RESERVE_RUN_SPREAD**2
        if measured:
            value = (FRAGMENTATION_FRACTION * prec_prior + prec_run * sum(measured)) / (
                prec_prior + prec_run * len(measured)
            )
            spread = math.sqrt(1 / (prec_prior + prec_run * len(measured)))
        else:  # the slack the model uses unfitted: 10%, for training at most 8 GiB (costmodel/memory.py)
            cap = _capacity(points, pool)
            value = (training_reserve_bytes(cap) - CUDA_CONTEXT_BYTES) / cap
            spread = RESERVE_PRIOR_SPREAD
        binding = sorted((b for b in bounds.get(pool, []) if b.fraction < value), key=lambda b: b.fraction)
        reason = ""
        if binding:
            value = binding[0].fraction - BOUND_MARGIN
            more = f"; {len(binding) - 1} more run(s) below it" if len(binding) > 1 else ""
            reason = f"bounded by runs that ran: {binding[0].words()}{more}"
        elif not measured:
            continue  # nothing moves it: the sourced slack stands
        out[pool] = ReserveFit(
            pool=pool,
            value=min(hi, max(lo, value)),
            spread=spread,
            runs=len(measured) + len(binding),
            measured=len(measured),
            bounded_by=tuple(dict.fromkeys(b.label for b in binding)),
            reason=reason,
        )
    return out
