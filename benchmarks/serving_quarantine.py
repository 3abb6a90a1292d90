"""Score the serving quarantine (accuracy/serving_quarantine.py): |error| per engine, model class and metric, and
every row. Nothing is fitted here.

Run: .venv/bin/python benchmarks/serving_quarantine.py [--rows]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from accuracy.serving_quarantine import METRICS, load_quarantine, model_class, predict_quarantine


def main() -> None:
    _, records = load_quarantine()
    by: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    rows = Table(title="Quarantine rows (measured | predicted | error)")
    for col in ("id", "metric", "measured", "predicted", "error"):
        rows.add_column(col)
    for rec in records:
        cls = model_class(rec)
        for c in predict_quarantine(rec):
            by[(rec["engine"], cls, c.metric)].append(abs(c.error))
            by[("all", cls, c.metric)].append(abs(c.error))
            rows.add_row(c.id, c.metric, f"{c.measured:.4g}", f"{c.predicted:.4g}", f"{c.error:+.1%}")
    t = Table(title="Serving quarantine: median |error| (n)")
    t.add_column("engine")
    t.add_column("class")
    for m in METRICS:
        t.add_column(m, justify="right")
    for eng, cls in sorted({(e, c) for e, c, _ in by}):
        cells = []
        for m in METRICS:
            v = by.get((eng, cls, m), [])
            cells.append(f"{statistics.median(v):.1%} ({len(v)})" if v else "-")
        t.add_row(eng, cls, *cells)
    console = Console(width=180)
    if "--rows" in sys.argv:
        console.print(rows)
    console.print(t)


if __name__ == "__main__":
    main()
