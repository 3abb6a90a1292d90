"""Where a traced step's GPU time goes: a PyTorch profiler (Kineto) trace, one file per rank -> per rank and step,
GEMM / attention / other compute, each collective by kind (and process group where the trace names it), exposed
versus overlapped communication, idle time and wall time [issue 54 §2]. Standard library and numpy only: the
product reads traces without pandas.

The figures are HolisticTraceAnalysis's (HTA, github:facebookresearch/HolisticTraceAnalysis, PyPI 0.5.0), computed
the same way and checked against it on HTA's own test traces (tests/optimizer/calibration/test_trace_breakdown.py):
- steps: the CPU `ProfilerStep#N` annotations [hta/common/types.py ProfilerStepGroupingPattern]; a GPU event belongs
  to the step in which the CPU launched it (its runtime event's correlation id) [hta/common/trace.py add_iteration].
- the whole-trace window: with two or more steps, the GPU events launched before the last step starts (the last
  step may be cut short by the profiler) [hta/common/trace.py _filter_irrelevant_gpu_kernels]; with fewer, all.
- kernel time: from the first GPU event's start to the last one's end; idle: the part of it with no GPU event on any
  stream; compute: the union of compute kernels; non-compute: the rest [hta/analyzers/breakdown_analysis.py
  get_temporal_breakdown, _get_idle_time_for_kernels].
- overlap: the time communication kernels run while a compute kernel runs (on another stream), over the union of
  communication time [hta/analyzers/communication_analysis.py get_comm_comp_overlap]; exposed communication is the
  rest of the communication union.
- kernel-type sums: each type's summed kernel durations [hta/analyzers/breakdown_analysis.py
  get_gpu_kernel_breakdown].
Kernel classification: optimizer/calibration/trace_kernels.py.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optimizer.calibration.trace_files import TraceFile
from optimizer.calibration.trace_intervals import Intervals, union
from optimizer.calibration.trace_kernels import CollectiveKind, KernelClass, collective_kind, is_gpu_event, kernel_class
from optimizer.errors import DomainError

_STEP = re.compile(r"^ProfilerStep\s*#\s*(\d+)")  # hta/common/types.py ProfilerStepGroupingPattern
US = 1e-6  # Chrome-trace timestamps and durations are microseconds [Trace Event Format, "ts", "dur"]


@dataclass(frozen=True)
class Kernel:
    """One GPU event: start and end (us), stream, class, collective (communication only), process group."""

    ts: float
    end: float
    stream: int
    cls: KernelClass
    kind: CollectiveKind | None
    group: str | None
    correlation: int


@dataclass(frozen=True)
class CollectiveTime:
    """One collective kind's time in a window, us: summed durations, union, exposed (not under compute)."""

    kind: CollectiveKind
    count: int
    sum_us: float
    union_us: float
    exposed_us: float
    groups: tuple[str, ...]


@dataclass(frozen=True)
class WindowBreakdown:
    """Where the GPU time of one rank's window (a step, or the whole trace) goes, us."""

    kernels: int
    wall_us: float | None  # the ProfilerStep's duration (a step); None for the whole-trace window
    kernel_time_us: float  # first GPU event start to last end
    idle_us: float
    busy_us: float
    compute_us: float  # union of compute kernels
    non_compute_us: float  # kernel time - compute - idle (HTA's temporal breakdown)
    sums_us: dict[str, float]  # summed kernel durations per class (gemm, attention, other_compute, memory, ...)
    comm_us: float  # union of communication kernels
    overlapped_comm_us: float
    exposed_comm_us: float
    collectives: tuple[CollectiveTime, ...] = field(default=())

    @property
    def overlap_ratio(self) -> float | None:
        return self.overlapped_comm_us / self.comm_us if self.comm_us > 0 else None

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "collectives"}
        out["collectives"] = [c.__dict__ | {"groups": list(c.groups)} for c in self.collectives]
        return out


@dataclass(frozen=True)
class RankBreakdown:
    rank: int
    file: str
    device: str | None
    steps: dict[int, WindowBreakdown]
    window: WindowBreakdown

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "file": self.file,
            "device": self.device,
            "window": self.window.as_dict(),
            "steps": {str(k): v.as_dict() for k, v in self.steps.items()},
        }


@dataclass(frozen=True)
class _Step:
    number: int
    ts: float
    end: float


def _num(v: Any, default: float = -1.0) -> float:
    if isinstance(v, bool):
        return default
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(int(str(v)))  # HTA: a stream that int() cannot read is -1 [hta/utils/utils.py]
    except ValueError:
        return default


def _group(args: dict[str, Any]) -> str | None:
    # the description (torch.distributed's group_desc: "default_pg", a DeviceMesh dim's name) reads better than the
    # numeric name [pytorch torch/csrc/distributed/c10d/ParamCommsUtils.hpp kProcessGroupDesc]
    name = args.get("Process Group Description") or args.get("Process Group Name")
    ranks = args.get("Process Group Ranks")
    if name is None and ranks is None:
        return None
    return f"{name or '?'} {ranks}" if ranks is not None else str(name)


def _kernel(e: dict[str, Any], comms: dict[int, dict[str, Any]]) -> Kernel | None:
    if e.get("ph") != "X" or not is_gpu_event(str(e.get("cat", ""))):
        return None
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    assert isinstance(args, dict)
    stream, ts, dur = _num(args.get("stream")), _num(e.get("ts")), _num(e.get("dur"))
    if stream < 0 or ts < 0 or dur < 0:
        return None
    name = str(e.get("name", ""))
    cls = kernel_class(name)
    kind, group = None, None
    if cls == "communication":
        # the collective's args on the kernel, else on the record_param_comms op that launched it (same External id)
        meta = args if "Collective name" in args else comms.get(int(_num(args.get("External id"))), args)
        coll = meta.get("Collective name")
        kind = collective_kind(name, str(coll) if coll else None)
        group = _group(meta)
    return Kernel(ts, ts + dur, int(stream), cls, kind, group, int(_num(args.get("correlation"))))


def _cpu_side(events: list[dict[str, Any]]) -> tuple[list[_Step], dict[int, float], dict[int, dict[str, Any]]]:
    """The ProfilerSteps, each launch's time by correlation id, and the collectives' args (record_param_comms ops,
    which carry `Collective name` and the process group [pytorch torch/csrc/distributed/c10d/ParamCommsUtils.hpp
    RECORD_PARAM_COMMS]) by External id."""
    steps: dict[int, _Step] = {}
    launches: dict[int, float] = {}
    comms: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("ph") != "X" or is_gpu_event(str(e.get("cat", ""))):
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        assert isinstance(args, dict)
        m = _STEP.match(str(e.get("name", "")))
        if m and not str(e.get("cat", "")).lower().startswith("gpu_"):  # gpu_user_annotation: the GPU-side copy
            ts, dur = _num(e.get("ts")), _num(e.get("dur"), 0.0)
            n = int(m.group(1))
            if n not in steps or ts < steps[n].ts:
                steps[n] = _Step(n, ts, ts + dur)
            continue
        if "Collective name" in args:
            comms[int(_num(args.get("External id")))] = args
        corr = _num(args.get("correlation"))
        if corr >= 0:
            launches[int(corr)] = _num(e.get("ts"))
    return sorted(steps.values(), key=lambda s: s.ts), launches, comms


def _collectives(kernels: list[Kernel], compute: Intervals) -> tuple[CollectiveTime, ...]:
    by_kind: dict[CollectiveKind, list[Kernel]] = defaultdict(list)
    for k in kernels:
        if k.kind is not None:
            by_kind[k.kind].append(k)
    out = []
    for kind, ks in sorted(by_kind.items()):
        u = union([(k.ts, k.end) for k in ks])
        out.append(
            CollectiveTime(
                kind=kind,
                count=len(ks),
                sum_us=float(sum(k.end - k.ts for k in ks)),
                union_us=u.length,
                exposed_us=u.length - u.overlap(compute),
                groups=tuple(sorted({k.group for k in ks if k.group})),
            )
        )
    return tuple(out)


def window_breakdown(kernels: list[Kernel], wall_us: float | None = None) -> WindowBreakdown:
    """HTA's temporal breakdown, kernel-type sums and overlap of one window's GPU events, with compute split."""
    if not kernels:
        raise DomainError("trace", "no GPU kernels in the window")
    every = union([(k.ts, k.end) for k in kernels])
    compute = union([(k.ts, k.end) for k in kernels if k.cls in ("gemm", "attention", "other_compute")])
    comm = union([(k.ts, k.end) for k in kernels if k.cls == "communication"])
    span = every.end - every.start
    sums: dict[str, float] = defaultdict(float)
    for k in kernels:
        sums[k.cls] += k.end - k.ts
    overlapped = comm.overlap(compute)
    return WindowBreakdown(
        kernels=len(kernels),
        wall_us=wall_us,
        kernel_time_us=span,
        idle_us=span - every.length,
        busy_us=every.length,
        compute_us=compute.length,
        non_compute_us=span - compute.length - (span - every.length),
        sums_us=dict(sums),
        comm_us=comm.length,
        overlapped_comm_us=overlapped,
        exposed_comm_us=comm.length - overlapped,
        collectives=_collectives(kernels, compute),
    )


def rank_breakdown(trace: TraceFile) -> RankBreakdown:
    """One rank's trace, per step and over HTA's whole-trace window."""
    steps, launches, comms = _cpu_side(trace.events)
    kernels = [k for k in (_kernel(e, comms) for e in trace.events) if k is not None]
    if not kernels:
        raise DomainError("trace", f"{trace.name}: no GPU kernels (a trace of the CPU only, or the GPU not profiled)")
    per_step: dict[int, list[Kernel]] = defaultdict(list)
    starts = np.array([s.ts for s in steps])
    for k in kernels:
        at = launches.get(k.correlation)
        if at is None or not steps:
            continue
        i = int(np.searchsorted(starts, at, side="right")) - 1
        if i >= 0 and at < steps[i].end:
            per_step[steps[i].number].append(k)
    window = kernels
    if len(steps) >= 2:  # HTA drops what the last (possibly cut) step launched
        last = steps[-1].ts
        window = [k for k in kernels if k.correlation in launches and launches[k.correlation] < last]
    if not window:
        raise DomainError("trace", f"{trace.name}: no GPU kernels launched before the last profiler step")
    by_number = {s.number: s for s in steps}
    return RankBreakdown(
        rank=trace.rank,
        file=trace.name,
        device=trace.device,
        steps={n: window_breakdown(ks, by_number[n].end - by_number[n].ts) for n, ks in sorted(per_step.items())},
        window=window_breakdown(window),
    )


def trace_breakdown(traces: list[TraceFile]) -> list[RankBreakdown]:
    """Every rank's breakdown (in rank order)."""
    return [rank_breakdown(t) for t in traces]


def step_time_s(ranks: list[RankBreakdown]) -> float | None:
    """The traced step time: the median over ranks of each rank's median complete-step wall time (the last step,
    which the profiler may cut, left out where there are two or more), seconds."""
    per_rank = []
    for r in ranks:
        walls = [w.wall_us for _, w in sorted(r.steps.items()) if w.wall_us]
        walls = walls[:-1] if len(walls) >= 2 else walls
        if walls:
            per_rank.append(float(np.median(walls)))
    return float(np.median(per_rank)) * US if per_rank else None
