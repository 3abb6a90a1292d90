"""Step-time error per stack in three columns: in-sample, left out by source, quarantine (issue 44 §1).

In-sample and left-out: the project's published step times (optimizer/costmodel/residuals.json); quarantine: the runs of
sources the model has never been fitted on (accuracy/data/quarantine/), as the model predicts them. A stack is the
framework the model prices and the GPU family; the quarantine stacks priced under it are named. Each cell: runs,
median / p90 |error|, bias (median of predicted / measured - 1).

Run: .venv/bin/python benchmarks/quarantine_columns.py (also printed by benchmarks/model_accuracy.py)
"""

from __future__ import annotations

import math
import statistics

from rich.console import Console
from rich.table import Table

from accuracy.quarantine import QuarantineCase, score_all
from optimizer.costmodel.uncertainty import STEP_METRIC, residual_table


def _cell(errors: list[float]) -> str:
    if not errors:
        return "-"
    mags = sorted(abs(e) for e in errors)
    p90 = mags[min(len(mags) - 1, math.ceil(0.9 * len(mags)) - 1)]
    return f"{len(errors):3d}  {statistics.median(mags):5.1%} / {p90:5.1%}  bias {statistics.median(errors):+5.1%}"


def error_columns_table(cases: list[QuarantineCase] | None = None) -> Table:
    """The three-column table per stack."""
    cases = score_all() if cases is None else cases
    columns: dict[str, dict[str, list[float]]] = {"in-sample": {}, "left-out by source": {}, "quarantine": {}}
    for r in residual_table():
        if r.metric == STEP_METRIC and r.features is not None:
            key = f"{r.features.framework} {r.features.family}"
            columns["in-sample"].setdefault(key, []).append(math.expm1(-r.in_sample))
            columns["left-out by source"].setdefault(key, []).append(math.expm1(-r.left_out))
    named: dict[str, set[str]] = {}
    for c in cases:
        if c.error is not None and c.features is not None:
            key = f"{c.features.framework} {c.features.family}"
            columns["quarantine"].setdefault(key, []).append(c.error)
            named.setdefault(key, set()).add(c.stack)
    table = Table(title="Step time per stack. Each cell: runs, median / p90 |error|, bias")
    table.add_column("stack (as priced)")
    for name in columns:
        table.add_column(name, justify="right")
    table.add_column("quarantine stacks priced as it")
    keys = sorted({k for col in columns.values() for k in col})
    for key in keys:
        table.add_row(
            key, *(_cell(col.get(key, [])) for col in columns.values()), "; ".join(sorted(named.get(key, [])))
        )
    table.add_row(
        "all", *(_cell([e for errs in col.values() for e in errs]) for col in columns.values()), "", style="bold"
    )
    unpriced = [c for c in cases if c.error is None]
    if unpriced:
        table.caption = f"quarantine runs the model cannot price: {', '.join(c.id for c in unpriced)}"
    return table


if __name__ == "__main__":
    Console(width=200).print(error_columns_table())
