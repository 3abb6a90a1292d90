"""Coverage of the cost model's 80% intervals on published runs it has not seen (issues 38 §1, 44; docs/uncertainty.md).

Training step time, three columns per regime:
- in-sample: the project's runs with their in-sample errors and the shipped intervals (as a query of the project's own
  setups sees them: no `unseen_source` widening);
- left-out by source: the project's runs, each with the constants refit without its source (accuracy/leave_out.py),
  its regime interval and novelty from the other sources only, and the per-axis widening refit without it;
- quarantine: the runs of sources the model has never been fitted on (accuracy/data/quarantine/), as the model
  predicts them, each with the widening refit without its source (leave-one-quarantine-source-out: the widening
  learns from the quarantine, so this is the only honest coverage figure for it).
Each cell: runs, coverage of the 80% interval (target 75-85%), median width as % of the prediction, median / p90
|error|. Then the quarantine per stack (target: none below 50%), beside the regime intervals without novelty
widening (what issue 38's intervals gave). Memory and serving: nested by source as before. Then the difference
intervals (section 6 of the doc): the nested coverage of the 80% interval of a predicted ratio on same-setup pairs.

Run: .venv/bin/python benchmarks/uncertainty.py
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from accuracy.novelty_fit import Row, all_rows, figures, fit, score_in_sample, score_nested, unwidened
from accuracy.novelty_fit import Scored as NoveltyScored
from accuracy.published_runs import predict
from accuracy.quarantine import load_sources
from optimizer.calibration.fit import fit_calibration
from optimizer.costmodel.estimate import estimate
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
)
from optimizer.spec.workload import TrainingWorkload


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


def nested_step_times() -> list[NoveltyScored]:
    """The project's step times with their nested intervals (regime, novelty and widening without their source)."""
    _, rows = all_rows()
    return [s for s in score_nested(rows) if s.row.kind == "project"]


def in_sample_rows(rows: list[Row]) -> list[Row]:
    """The project's rows with their in-sample residual (the shipped constants) in place of the left-out one."""
    by_id = {r.id: r for r in residual_table() if r.metric == STEP_METRIC}
    out = []
    for row in rows:
        res = by_id[row.id]
        out.append(
            Row(
                row.id,
                row.source,
                "in-sample",
                row.stack,
                row.regime,
                row.center,
                row.half,
                row.x,
                row.words,
                res.in_sample,
                res.predicted,
                res.measured,
            )
        )
    return out


def _cell(scored: list[NoveltyScored]) -> str:
    if not scored:
        return "-"
    f = figures(scored)
    errors = f"{f.median_error:5.1%} / {f.p90_error:5.1%}"
    return f"{f.n:3d} ({f.sources:2d} src)  {f.coverage:4.0%}  {f.median_width:4.0%}  {errors}"


def step_time_tables() -> list[Table]:
    """The three-column table per regime, and the quarantine per stack."""
    _, rows = all_rows()
    nested = score_nested(rows)
    project = [r for r in rows if r.kind == "project"]
    columns = {
        "in-sample": score_in_sample(in_sample_rows(project), fit(rows)),
        "left-out by source": [s for s in nested if s.row.kind == "project"],
        "quarantine": [s for s in nested if s.row.kind == "quarantine"],
    }
    table = Table(
        title="Training step time: 80% intervals. Each cell: runs (sources), coverage, median width, "
        "median / p90 |error|"
    )
    table.add_column("regime used", justify="left")
    for name in columns:
        table.add_column(name, justify="right")
    regimes: dict[str, int] = {}
    for items in columns.values():
        for s in items:
            regimes[s.row.regime] = regimes.get(s.row.regime, 0) + 1
    for regime in sorted(regimes, key=lambda k: -regimes[k]):
        table.add_row(regime, *(_cell([s for s in items if s.row.regime == regime]) for items in columns.values()))
    table.add_row("overall", *(_cell(items) for items in columns.values()), style="bold")
    quarantine_rows = [r for r in rows if r.kind == "quarantine"]
    before = unwidened(quarantine_rows)
    stacks = Table(
        title="Quarantine per stack (target: every stack >= 50% covered): regime interval alone vs widened by "
        "novelty, left out by source"
    )
    for col in ("stack", "regime interval alone", "widened (nested)", "bias"):
        stacks.add_column(col, justify="left" if col == "stack" else "right")
    for stack in sorted({r.stack for r in quarantine_rows}):
        sel = [s for s in columns["quarantine"] if s.row.stack == stack]
        old = [s for s in before if s.row.stack == stack]
        stacks.add_row(stack, _cell(old), _cell(sel), f"{figures(sel).bias:+.1%}")
    stacks.add_row(
        "all", _cell(before), _cell(columns["quarantine"]), f"{figures(columns['quarantine']).bias:+.1%}", style="bold"
    )
    return [table, stacks]


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


def calibration_narrowing() -> Table:
    """The calibration path on the quarantine: every run of a source with 4+ priced runs predicted from a calibration
    fitted on the source's other runs (leave-one-run-out, `fit_calibration`), its interval the narrower of the
    cluster's own and the published one (docs/uncertainty.md section 7), against the uncalibrated prediction."""
    table = Table(title="Calibration narrowing on the quarantine (leave one run out of the source's calibration)")
    for col in ("source", "runs", "uncalibrated: cov / width / |err|", "calibrated: cov / width / |err|", "own used"):
        table.add_column(col, justify="left" if col == "source" else "right")
    totals: dict[str, list[tuple[bool, float, float]]] = {"before": [], "after": []}
    own_total = 0
    for source in load_sources():
        runs = [case.run for case in map(predict, source.records) if case is not None and case.run is not None]
        if len(runs) < 4:
            continue
        cells: dict[str, list[tuple[bool, float, float]]] = {"before": [], "after": []}
        own = 0
        for i, run in enumerate(runs):
            assert run.step_time_s is not None and isinstance(run.workload, TrainingWorkload)
            cal = fit_calibration([r for j, r in enumerate(runs) if j != i]).calibration
            for key, cluster in (("before", run.cluster), ("after", run.cluster.with_calibration(cal))):
                e = estimate(run.model, cluster, run.workload, run.config)
                lo, hi = e.step_time_interval_s or (math.nan, math.nan)
                cells[key].append(
                    (lo <= run.step_time_s <= hi, (hi - lo) / e.step_time_s, e.step_time_s / run.step_time_s - 1)
                )
                own += key == "after" and "this cluster's measured runs" in (e.interval_basis or "")
        table.add_row(source.id, str(len(runs)), _cal_cell(cells["before"]), _cal_cell(cells["after"]), str(own))
        for key in totals:
            totals[key] += cells[key]
        own_total += own
    table.add_row(
        "all",
        str(len(totals["before"])),
        _cal_cell(totals["before"]),
        _cal_cell(totals["after"]),
        str(own_total),
        style="bold",
    )
    return table


def _cal_cell(items: list[tuple[bool, float, float]]) -> str:
    cov = sum(c for c, _, _ in items) / len(items)
    width = statistics.median(w for _, w, _ in items)
    err = statistics.median(abs(e) for _, _, e in items)
    return f"{cov:4.0%}  {width:4.0%}  {err:5.1%}"


def main() -> None:
    table = residual_table()
    console = Console(width=200)
    for part in step_time_tables():
        console.print(part)
    for metrics, what in (
        (MEMORY_METRICS, "per-GPU peak memory records (all frameworks)"),
        (TTFT_METRICS, "TTFT figures"),
        (TPOT_METRICS, "TPOT and throughput figures"),
    ):
        console.print(coverage_table(f"{what}: nested by source", nested_pooled(table, metrics, what)))
    console.print(pair_table_view(nested_pairs(pair_table())))
    console.print(calibration_narrowing())


if __name__ == "__main__":
    main()
