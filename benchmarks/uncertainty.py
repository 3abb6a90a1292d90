"""Coverage of the cost model's 80% intervals on published runs it has not seen (issue 38 §1; docs/uncertainty.md).

Nested leave-one-group-out: the interval of a record of source G is built from the residual table without G's
rows (its residuals, its regime counts and its knob ranges), so the record is new to both the constants (refit
without G in accuracy/leave_out.py) and the interval. Per regime and overall: runs, the share of measurements inside
their interval (target 75-85%), the median interval width as % of the prediction, and the median |error| in-sample
and left-out.

Run: .venv/bin/python benchmarks/uncertainty.py
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from optimizer.costmodel.uncertainty import (
    MEMORY_METRICS,
    STEP_METRIC,
    TPOT_METRICS,
    TTFT_METRICS,
    Interval,
    Residual,
    pooled_interval,
    residual_table,
    step_time_interval,
)


@dataclass(frozen=True)
class Scored:
    """One figure with the interval built without its source."""

    residual: Residual
    interval: Interval
    regime: str

    @property
    def covered(self) -> bool:
        """Whether the measurement lies inside the interval around the left-out prediction."""
        return self.interval.low <= self.residual.measured <= self.interval.high

    @property
    def width(self) -> float:
        """Interval width as a share of the (left-out) prediction."""
        predicted = self.residual.measured / math.exp(self.residual.left_out)
        return (self.interval.high - self.interval.low) / predicted


def nested_step_times(table: tuple[Residual, ...]) -> list[Scored]:
    """Every step-time record with its interval from the other sources only."""
    out = []
    for r in table:
        if r.metric != STEP_METRIC or r.features is None:
            continue
        predicted = r.measured / math.exp(r.left_out)
        iv = step_time_interval(r.features, predicted, table, exclude_group=r.group)
        out.append(Scored(r, iv, iv.regime))
    return out


def nested_pooled(table: tuple[Residual, ...], metrics: tuple[str, ...], what: str) -> list[Scored]:
    """Every figure of `metrics` with its pooled interval from the other sources only."""
    out = []
    for r in table:
        if r.metric not in metrics:
            continue
        predicted = r.measured / math.exp(r.left_out)
        iv = pooled_interval(predicted, metrics, what, table, engine=r.engine, exclude_group=r.group)
        out.append(Scored(r, iv, iv.regime))
    return out


def row(name: str, scored: list[Scored]) -> tuple[str, ...]:
    n = len(scored)
    finite = [s.width for s in scored if math.isfinite(s.width)]
    return (
        name,
        str(n),
        str(len({s.residual.group for s in scored})),
        f"{sum(s.covered for s in scored) / n:.0%}",
        f"{statistics.median(finite):.0%}" if finite else "-",
        f"{statistics.median(abs(math.expm1(-s.residual.in_sample)) for s in scored):.1%}",
        f"{statistics.median(abs(math.expm1(-s.residual.left_out)) for s in scored):.1%}",
        f"{statistics.median(math.expm1(-s.residual.left_out) for s in scored):+.1%}",
    )


def coverage_table(title: str, scored: list[Scored]) -> Table:
    table = Table(title=title)
    for col in ("regime used", "runs", "sources", "coverage", "median width", "in-sample |err|", "left-out |err|"):
        table.add_column(col, justify="left" if col == "regime used" else "right")
    table.add_column("left-out bias", justify="right")
    by_regime: dict[str, list[Scored]] = {}
    for s in scored:
        by_regime.setdefault(s.regime, []).append(s)
    for name, group in sorted(by_regime.items(), key=lambda kv: -len(kv[1])):
        table.add_row(*row(name, group))
    widened = [s for s in scored if s.interval.widening > 1]
    if widened:
        table.add_row(*row("(widened: beyond the other sources' runs)", widened))
    table.add_row(*row("overall", scored), style="bold")
    return table


def main() -> None:
    table = residual_table()
    console = Console(width=160)
    console.print(
        coverage_table("Training step time: nested leave-one-group-out 80% intervals", nested_step_times(table))
    )
    for metrics, what in (
        (MEMORY_METRICS, "per-GPU peak memory records (all frameworks)"),
        (TTFT_METRICS, "TTFT figures"),
        (TPOT_METRICS, "TPOT and throughput figures"),
    ):
        console.print(coverage_table(f"{what}: nested by source", nested_pooled(table, metrics, what)))


if __name__ == "__main__":
    main()
