"""Predicted vs measured step time (or first-token latency) for every published run in
accuracy/data/published_runs.json (target: median |error| <= 10%, none above 25%), and serving throughput, TTFT
and TPOT for every row of accuracy/data/serving_runs.json (target: median <= 15%, none above 35%).

Run: .venv/bin/python benchmarks/model_accuracy.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from accuracy.published_runs import CalibrationCase, held_out, run_all, summary
from accuracy.serving_runs import held_out_serving, run_serving


def case_table(title: str, cases: list[CalibrationCase], warn: float, bad: float, config: str) -> Table:
    """One row per case, yellow beyond `warn` and red beyond `bad` (the targets)."""
    table = Table(title=title)
    for col in ("record", "metric", "measured", "predicted", "error", config):
        table.add_column(col, justify="right" if col in ("measured", "predicted", "error") else "left")
    for c in cases:
        style = "red" if abs(c.error) > bad else ("yellow" if abs(c.error) > warn else "")
        table.add_row(
            c.id,
            c.metric.split(" ")[0],
            f"{c.measured:.4g}",
            f"{c.predicted:.4g}",
            f"{c.error:+.1%}",
            c.config,
            style=style,
        )
    return table


def report() -> tuple[Table, str]:
    cases = run_all()
    table = case_table(
        "Cost model vs published measurements", cases, 0.10, 0.25, "configuration (searched knobs filled)"
    )
    median, worst = summary(cases)
    assumptions = sorted({a for c in cases for a in c.assumptions})
    memory = [c for c in cases if c.metric.startswith(("peak_allocated_gb", "peak_reserved_gb"))]
    moe = [c for c in cases if c.group.endswith("_moe")]
    lines = [
        f"records scored: {len(cases)}; median |error| {median:.1%} (target <= 10%); max |error| {worst:.1%} "
        f"(target <= 25%)",
        *(
            [f"per-GPU peak memory: {len(memory)} records, median |error| {summary(memory)[0]:.1%} (target <= 8%)"]
            if memory
            else []
        ),
        *([f"MoE step time: {len(moe)} records, median |error| {summary(moe)[0]:.1%} (target <= 15%)"] if moe else []),
        "assumptions where the source is silent:",
        *(f"  - {a}" for a in assumptions),
        "not scored (the model's error on each where it can price it):",
        *(f"  - {k}: {v}" + (f" [{e:+.1%}]" if e is not None else "") for k, v, e in held_out()),
    ]
    return table, "\n".join(lines)


def serving_report() -> tuple[Table, str]:
    """Serving rows (accuracy/data/serving_runs.json) [issue 17: median <= 15%, none above 35%]."""
    cases = run_serving()
    table = case_table("Serving model vs published serving benchmarks", cases, 0.15, 0.35, "configuration")
    median, worst = summary(cases)
    groups: dict[tuple[str, str], list[CalibrationCase]] = {}
    for c in cases:
        groups.setdefault((c.group, c.metric), []).append(c)
    lines = [
        f"serving figures scored: {len(cases)}; median |error| {median:.1%} (target <= 15%); max |error| "
        f"{worst:.1%} (target <= 35%)",
        *(
            f"  {g} {m}: {len(cs)} figures, median |error| {summary(cs)[0]:.1%}, max {summary(cs)[1]:.1%}"
            for (g, m), cs in groups.items()
        ),
        "serving figures not scored (the model's error on each):",
        *(f"  - {c.id} {c.metric}: {why} [{c.error:+.1%}]" for c, why in held_out_serving()),
    ]
    return table, "\n".join(lines)


if __name__ == "__main__":
    console = Console(width=200)
    table, text = report()
    console.print(table)
    console.print(text, markup=False)
    table, text = serving_report()
    console.print(table)
    console.print(text, markup=False)
    # Beside the in-sample serving table: per engine, in-sample | leave-one-source-out | held-out public figures.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.quarantine_columns import error_columns_table
    from benchmarks.serving_accuracy import serving_accuracy_tables

    # Step time per stack: in-sample | left-out by source | quarantine (sources never fitted; issue 44).
    console.print(error_columns_table())
    for part in serving_accuracy_tables():
        console.print(part)
