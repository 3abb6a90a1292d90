"""Coverage of the cost model's 80% intervals on published runs it has not seen (issue 38 §1; docs/uncertainty.md).

Nested leave-one-group-out: the interval of a record of source G is built from the residual table without G's
rows (its residuals, its regime counts and its knob ranges), so the record is new to both the constants (refit
without G in accuracy/leave_out.py) and the interval. Per regime and overall: runs, the share of measurements inside
their interval (target 75-85%), the median interval width as % of the prediction, and the median |error| in-sample
and left-out. Then the difference intervals (section 6 of the doc): the nested coverage of the 80% interval of a
predicted ratio on same-setup pairs of measured configurations, per regime, beside its width.

Run: .venv/bin/python benchmarks/uncertainty.py
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from optimizer.costmodel.uncertainty import (
    ACROSS_GPUS,
    MEMORY_METRICS,
    SAME_GPU,
    STEP_METRIC,
    TPOT_METRICS,
    TTFT_METRICS,
    Interval,
    PairResidual,
    Residual,
    pair_table,
    pooled_interval,
    ratio_offsets,
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


@dataclass(frozen=True)
class ScoredPair:
    """One same-setup pair with its ratio interval built without its source."""

    pair: PairResidual
    low: float
    high: float

    @property
    def covered(self) -> bool:
        """Whether the ratio residual lies inside the interval (the measured ratio inside the predicted one's)."""
        return self.low <= self.pair.residual <= self.high

    @property
    def width(self) -> float:
        """Width of the interval of the true ratio, as a share of the predicted ratio."""
        return math.exp(-self.low) - math.exp(-self.high)


def nested_pairs(pairs: tuple[PairResidual, ...]) -> list[ScoredPair]:
    """Every pair with its regime's interval from the other sources' pairs only."""
    out = []
    for p in pairs:
        low, high, _, _ = ratio_offsets(pairs, p.regime, exclude_source=p.source)
        out.append(ScoredPair(p, low, high))
    return out


def pair_coverage(scored: list[ScoredPair], by_source: bool = False) -> float:
    """Share of pairs covered; with `by_source`, the mean over sources of each source's share."""
    if not by_source:
        return sum(s.covered for s in scored) / len(scored)
    groups: dict[str, list[ScoredPair]] = {}
    for s in scored:
        groups.setdefault(s.pair.source, []).append(s)
    return statistics.mean(pair_coverage(g) for g in groups.values())


def pair_table_view(scored: list[ScoredPair]) -> Table:
    table = Table(title="Difference intervals: nested leave-one-source-out 80% intervals of a predicted ratio")
    for col in ("regime", "pairs", "sources", "coverage", "coverage (mean over sources)", "median width"):
        table.add_column(col, justify="left" if col == "regime" else "right")
    table.add_column("median |ratio error|", justify="right")
    for regime in (SAME_GPU, ACROSS_GPUS, "overall"):
        sel = [s for s in scored if regime in ("overall", s.pair.regime)]
        table.add_row(
            regime,
            str(len(sel)),
            str(len({s.pair.source for s in sel})),
            f"{pair_coverage(sel):.0%}",
            f"{pair_coverage(sel, by_source=True):.0%}",
            f"{statistics.median(s.width for s in sel):.1%}",
            f"{statistics.median(abs(math.expm1(s.pair.residual)) for s in sel):.1%}",
            style="bold" if regime == "overall" else None,
        )
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
    console.print(pair_table_view(nested_pairs(pair_table())))


if __name__ == "__main__":
    main()
