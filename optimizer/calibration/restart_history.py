"""A job's restart history into measured interruptions, restart times and uptime (issue 46 §2).

Input: Slurm's job records of one training run's successive jobs, as `sacct --parsable2 --format
JobID,JobName,State,Start,End,NNodes` prints them (a header line naming the columns, `|`-separated; Slurm's sacct
man page: --parsable2 "output will be '|' delimited without a '|' at the end"). Job steps (JobID with a dot) are
left out. Each job that ended in FAILED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY or CANCELLED and was followed by
another is an interruption; the gap until the next job starts is its restart (the scheduler's queue, launch and
whoever relaunched it); the time the jobs ran over the time from the first start to the last end is the uptime, an
upper bound of the goodput (rework, checkpoints, detection and warm-up happen inside the running time).

The measured rate narrows the failure rate's range to the 80% interval of a Poisson rate with that many events
(chi-square quantiles by Wilson and Hilferty's cube-root approximation, 1931), and the restarts' spread narrows the
relaunch time's.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from datetime import datetime

from optimizer.errors import DomainError
from optimizer.spec.reliability import PoolReliability

INTERRUPTED = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "PREEMPTED"})
REQUIRED = ("JobID", "State", "Start", "End")
Z90 = 1.2815515655446004  # standard normal 90th percentile (the 80% interval's upper end)
MAX_RECORDS = 100_000


@dataclass(frozen=True)
class RestartHistory:
    """What a run's job records measure."""

    jobs: int
    interruptions: int
    running_s: float
    span_s: float
    restart_gaps_s: tuple[float, ...]
    nodes: int

    @property
    def per_running_day(self) -> float:
        """Interruptions per day of running."""
        return self.interruptions / (self.running_s / 86_400) if self.running_s > 0 else 0.0

    @property
    def uptime(self) -> float:
        """Running time over the span: an upper bound of the run's goodput."""
        return self.running_s / self.span_s if self.span_s > 0 else 1.0

    @property
    def restart_s(self) -> float | None:
        """Mean gap from an interrupted job's end to the next job's start."""
        return sum(self.restart_gaps_s) / len(self.restart_gaps_s) if self.restart_gaps_s else None

    def rate_band(self) -> tuple[float, float]:
        """80% interval of the interruptions per running day (Poisson, k events over the running time)."""
        days = self.running_s / 86_400
        k = self.interruptions
        lo = _chi2(0.1, 2 * k) / 2 / days if k > 0 else 0.0
        hi = _chi2(0.9, 2 * (k + 1)) / 2 / days
        return lo, hi

    def applied_to(self, rel: PoolReliability, nodes: int | None = None) -> PoolReliability:
        """`rel` with the measured rate (per node-day over the jobs' nodes, split over the causes as rel's),
        the measured restart time as its relaunch, and both ranges narrowed to what the history measures."""
        n = nodes or self.nodes or 1
        spread = dict(rel.spread)
        update: dict[str, object] = {}
        if self.interruptions > 0:
            rate = self.per_running_day
            rel = rel.with_total_rate(1000 * rate / n)
            lo, hi = self.rate_band()
            spread["failure_rate"] = (min(1.0, lo / rate), max(1.0, hi / rate))
        if self.restart_s is not None and self.restart_s > 0:
            mean = self.restart_s
            update["launch_s"] = mean
            spread["launch_s"] = (min(1.0, min(self.restart_gaps_s) / mean), max(1.0, max(self.restart_gaps_s) / mean))
        update["spread"] = spread
        return rel.model_copy(update=update)


def _chi2(p: float, dof: int) -> float:
    """Chi-square quantile (Wilson-Hilferty): dof (1 - 2/9dof + z sqrt(2/9dof))^3."""
    z = Z90 if p > 0.5 else -Z90
    a = 2 / (9 * dof)
    return dof * max(0.0, 1 - a + z * math.sqrt(a)) ** 3


def _when(text: str, field: str) -> datetime | None:
    if text in ("", "Unknown", "None"):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise DomainError(field, f"must be a time as sacct prints it (2024-05-01T12:00:00), got {text!r}") from None


def parse_sacct(text: str) -> RestartHistory:
    """A run's restart history from `sacct --parsable2` output (its header names the columns; JobID, State, Start
    and End are needed, NNodes is read when present)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise DomainError("restart_history", "is empty: give sacct --parsable2 output with its header line")
    header = [h.strip() for h in lines[0].split("|")]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DomainError("restart_history", f"header lacks {', '.join(missing)} (got {'|'.join(header)})")
    if len(lines) > MAX_RECORDS:
        raise DomainError("restart_history", f"at most {MAX_RECORDS:,} records")
    col = {h: i for i, h in enumerate(header)}
    jobs: list[tuple[datetime, datetime, str, int]] = []
    for i, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) < len(header):
            raise DomainError(f"restart_history line {i}", f"needs {len(header)} '|'-separated fields")
        if "." in cells[col["JobID"]]:
            continue  # a job step
        start = _when(cells[col["Start"]].strip(), f"restart_history line {i} Start")
        end = _when(cells[col["End"]].strip(), f"restart_history line {i} End")
        if start is None or end is None:
            continue  # never started, or still running
        if end < start:
            raise DomainError(f"restart_history line {i}", "End is before Start")
        state = cells[col["State"]].strip().split()[0].upper()
        nodes = int(cells[col["NNodes"]]) if "NNodes" in col and cells[col["NNodes"]].strip().isdigit() else 0
        jobs.append((start, end, state, nodes))
    if not jobs:
        raise DomainError("restart_history", "holds no finished job")
    jobs.sort()
    running = sum((e - s).total_seconds() for s, e, _, _ in jobs)
    span = (max(e for _, e, _, _ in jobs) - jobs[0][0]).total_seconds()
    gaps = []
    interruptions = 0
    for (_, end, state, _), (nxt, _, _, _) in itertools.pairwise(jobs):
        if state in INTERRUPTED:
            interruptions += 1
            gaps.append(max(0.0, (nxt - end).total_seconds()))
    return RestartHistory(
        jobs=len(jobs),
        interruptions=interruptions,
        running_s=running,
        span_s=span,
        restart_gaps_s=tuple(gaps),
        nodes=max(n for _, _, _, n in jobs),
    )


# Megatron-LM's training log line (megatron/training/training.py training_log): " [%Y-%m-%d %H:%M:%S] iteration
# {:8d}/{:8d} | consumed samples: ... | elapsed time per iteration (ms): {:.1f} | ..."; one run's jobs appended
# to one file, a restart shows as an iteration at or below the last one logged.
_MEGATRON_LINE = re.compile(
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]\s+iteration\s+(\d+)/\s*\d+\s*\|.*?elapsed time per iteration \(ms\):\s*"
    r"([0-9.]+)"
)


@dataclass(frozen=True)
class LogHistory:
    """What a training log's restarts measure: each restart's downtime (last line logged before it to the first
    after: detection, relaunch, load and warm-up, plus a log interval), the steps redone, and the goodput."""

    restarts: int
    downtime_s: tuple[float, ...]
    rework_steps: tuple[int, ...]
    step_s: float
    span_s: float
    steps_advanced: int

    @property
    def measured_goodput(self) -> float:
        """Net steps advanced x the median step time, over the log's span."""
        return min(1.0, self.steps_advanced * self.step_s / self.span_s) if self.span_s > 0 else 1.0

    @property
    def per_running_day(self) -> float:
        """Restarts per day of the span less the downtime."""
        running = self.span_s - sum(self.downtime_s)
        return self.restarts / (running / 86_400) if running > 0 else 0.0


def parse_training_log(text: str) -> LogHistory:
    """Restarts, downtimes, steps redone and measured goodput from a Megatron-LM training log of one run (its jobs'
    logs appended in order)."""
    rows = []
    for m in _MEGATRON_LINE.finditer(text):
        rows.append((datetime.fromisoformat(m.group(1)), int(m.group(2)), float(m.group(3)) / 1000))
    if len(rows) < 2:
        raise DomainError("training_log", "needs at least two Megatron-LM iteration lines ([time] iteration N/M | ...)")
    steps = sorted(r[2] for r in rows)
    step_s = steps[len(steps) // 2]
    downtime: list[float] = []
    rework: list[int] = []
    for (t0, i0, _), (t1, i1, _) in itertools.pairwise(rows):
        if i1 <= i0:  # a new job resumed from an older checkpoint
            downtime.append(max(0.0, (t1 - t0).total_seconds()))
            rework.append(i0 - i1)
    span = (rows[-1][0] - rows[0][0]).total_seconds()
    return LogHistory(
        restarts=len(downtime),
        downtime_s=tuple(downtime),
        rework_steps=tuple(rework),
        step_s=step_s,
        span_s=span,
        steps_advanced=rows[-1][1] - rows[0][1],
    )


def log_applied_to(h: LogHistory, rel: PoolReliability, nodes: int) -> PoolReliability:
    """`rel` with the log's restart rate (per node-day over `nodes`) and its downtime as detection plus relaunch
    (the relaunch the downtime less rel's expected detection, at least 30 s), their ranges narrowed as a sacct
    history narrows them."""
    spread = dict(rel.spread)
    update: dict[str, object] = {}
    if h.restarts > 0:
        rate = h.per_running_day
        rel = rel.with_total_rate(1000 * rate / max(1, nodes))
        days = (h.span_s - sum(h.downtime_s)) / 86_400
        lo = _chi2(0.1, 2 * h.restarts) / 2 / days
        hi = _chi2(0.9, 2 * (h.restarts + 1)) / 2 / days
        spread["failure_rate"] = (min(1.0, lo / rate), max(1.0, hi / rate))
        crash = max(0.0, 1.0 - rel.hang_share - rel.silent_share)
        detect = crash * rel.crash_detect_s + rel.hang_share * rel.collective_timeout_s
        detect += rel.silent_share * rel.silent_detect_s
        mean = sum(h.downtime_s) / len(h.downtime_s)
        relaunch = max(30.0, mean - detect)
        update["launch_s"] = relaunch
        spread["launch_s"] = (
            min(1.0, max(30.0, min(h.downtime_s) - detect) / relaunch),
            max(1.0, max(30.0, max(h.downtime_s) - detect) / relaunch),
        )
    update["spread"] = spread
    return rel.model_copy(update=update)
