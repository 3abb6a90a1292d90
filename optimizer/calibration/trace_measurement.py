"""A profiler trace as a measurement: the traced step time, the phases a calibration reads (seconds per step) and
the whole per-rank, per-step breakdown to store beside it [issue 54 §2].

The step time is the ProfilerStep wall time (trace_breakdown.step_time_s). The phases are, per rank, the median
over its complete steps (the last, which the profiler may cut, left out where there are two or more; a trace
without ProfilerStep annotations: its whole window), then the median over ranks:
- gemm, attention, other_compute, memory: summed kernel durations of each class;
- compute: the union of compute kernels; comm: the union of communication kernels;
- exposed_comm / overlapped_comm: communication time outside / under compute;
- comm_<kind> (summed durations) and exposed_<kind> for each collective kind (all_reduce, all_gather, ...);
- idle: time within the step's GPU span with no kernel on any stream; kernel_time: that span.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from optimizer.calibration.measurements import Measurement
from optimizer.calibration.trace_breakdown import RankBreakdown, WindowBreakdown, step_time_s, trace_breakdown
from optimizer.calibration.trace_files import TraceFile
from optimizer.errors import DomainError

US = 1e-6  # Chrome-trace times are microseconds


@dataclass(frozen=True)
class TraceMeasurement:
    measurement: Measurement
    breakdown: dict[str, Any]


def window_phases(w: WindowBreakdown) -> dict[str, float]:
    """One window's phases, seconds."""
    out = {k: w.sums_us.get(k, 0.0) * US for k in ("gemm", "attention", "other_compute", "memory")}
    out |= {
        "compute": w.compute_us * US,
        "comm": w.comm_us * US,
        "exposed_comm": w.exposed_comm_us * US,
        "overlapped_comm": w.overlapped_comm_us * US,
        "idle": w.idle_us * US,
        "kernel_time": w.kernel_time_us * US,
    }
    for c in w.collectives:
        out[f"comm_{c.kind}"] = c.sum_us * US
        out[f"exposed_{c.kind}"] = c.exposed_us * US
    return out


def _rank_phases(r: RankBreakdown) -> dict[str, float]:
    steps = [w for _, w in sorted(r.steps.items())]
    steps = steps[:-1] if len(steps) >= 2 else steps
    per_step = [window_phases(w) for w in steps] or [window_phases(r.window)]
    names = sorted({k for p in per_step for k in p})
    return {k: statistics.median([p.get(k, 0.0) for p in per_step]) for k in names}


def trace_phases(ranks: list[RankBreakdown]) -> dict[str, float]:
    """The phases of a traced step: per rank the median over its complete steps, then the median over ranks."""
    per_rank = [_rank_phases(r) for r in ranks]
    names = sorted({k for p in per_rank for k in p})
    return {k: statistics.median([p.get(k, 0.0) for p in per_rank]) for k in names}


def measure_trace(traces: list[TraceFile], note: str = "") -> TraceMeasurement:
    """The measurement of a training step from its rank traces (a DomainError names what is missing)."""
    ranks = trace_breakdown(traces)
    step = step_time_s(ranks)
    if step is None:
        raise DomainError(
            "trace",
            "no ProfilerStep annotations around GPU work: profile with torch.profiler.profile(schedule=...) and "
            "call prof.step() once per training step, so the trace gives the step time",
        )
    steps = max(len(r.steps) for r in ranks)
    phases = trace_phases(ranks)
    m = Measurement(step_time_s=step, phases_s=phases, steps=steps, source="trace", note=note)
    doc = {"ranks": [r.as_dict() for r in ranks], "phases_s": phases, "step_time_s": step}
    return TraceMeasurement(m, doc)
