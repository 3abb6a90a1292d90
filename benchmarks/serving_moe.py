"""MoE serving rows of accuracy/data/serving_runs.json (attention DP x EP, and the disaggregated wide-EP rows):
measured against predicted, in-sample (rows marked `fit: in_sample`, the ones a constant may be set on) apart from
held-out (`fit: held_out`; rows without the mark predate the split). Judge the model by the held-out rows.

Run: .venv/bin/python benchmarks/serving_moe.py (a few seconds)
"""

from __future__ import annotations

import statistics

from rich.console import Console
from rich.table import Table

from accuracy.serving_runs import SKIPPED, load_serving_records, predict_serving


def main() -> None:
    _, records = load_serving_records()
    table = Table(title="MoE serving rows: predicted vs measured")
    for col in ("row", "split", "measured", "predicted", "error"):
        table.add_column(col)
    errors: dict[str, list[float]] = {}
    for rec in records:
        if rec.get("ep", 1) == 1 and rec.get("etp") is None:
            continue
        split = rec.get("fit", "earlier")
        for case in predict_serving(rec):
            if (case.id, case.metric) in SKIPPED:
                continue
            errors.setdefault(split, []).append(abs(case.error))
            table.add_row(case.id, split, f"{case.measured:,.4g}", f"{case.predicted:,.4g}", f"{case.error:+.1%}")
    console = Console(width=160)
    console.print(table)
    for split, errs in errors.items():
        within = sum(e <= 0.20 for e in errs)
        console.print(
            f"{split}: {len(errs)} figures, median |error| {statistics.median(errs):.1%}, max {max(errs):.1%}, "
            f"{within} within 20%"
        )


if __name__ == "__main__":
    main()
