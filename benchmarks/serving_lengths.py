"""Each request's own lengths against the means, on the serving quarantine (issue 55 §1): every quarantined record
priced twice by the latency simulation, once with every request at the record's mean lengths (the model before
the length distributions, `lengths="means"`) and once with its requests drawn from the dataset its table names
(ShareGPT, random: costmodel/request_lengths.py) at those means. Median |error| and median signed error (bias:
predicted / measured - 1) of mean TTFT, mean TPOT and output throughput, per engine and per model class; beside it the
fitted data set's in-sample and held-out errors and biases (its records name no dataset). Nothing is fitted; the
quarantine's log (accuracy/data/quarantine/serving_LOG.md) records each score.

Run: .venv/bin/python benchmarks/serving_lengths.py   (about 10 s)
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from accuracy.serving_quarantine import Lengths, load_quarantine, model_class, predict_quarantine, record_dataset
from accuracy.serving_runs import SKIPPED, held_out_sources, load_serving_records, predict_serving

METRICS = (("mean_ttft_ms", "mean TTFT"), ("mean_tpot_ms", "mean TPOT"), ("output_tokens_per_s", "output tok/s"))
PATHS: tuple[Lengths, ...] = ("means", "dataset")


def errors() -> dict[tuple[str, str, str, str], list[float]]:
    """(path, engine or 'all', class or 'all' or 'dataset <name>', metric) -> signed errors of the quarantined
    figures."""
    _, records = load_quarantine()
    out: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for rec in records:
        cls = model_class(rec)
        for path in PATHS:
            for c in predict_quarantine(rec, path):
                for eng in (str(rec["engine"]), "all"):
                    for k in (cls, "all"):
                        out[(path, eng, k, c.metric)].append(c.error)
                out[(path, "all", f"dataset {record_dataset(rec)}", c.metric)].append(c.error)
    return out


def _cell(v: list[float]) -> str:
    if not v:
        return "-"
    return f"{statistics.median(abs(e) for e in v):.1%} / {statistics.median(v):+.1%}"


def table() -> Table:
    by = errors()
    t = Table(title="Serving quarantine: median |error| / bias, means -> dataset lengths")
    for col in ("engine", "class", "n"):
        t.add_column(col)
    for _, label in METRICS:
        for path in PATHS:
            t.add_column(f"{label} ({path})", justify="right")
    for eng, cls in sorted({(e, c) for _, e, c, _ in by}):
        n = len(by[("means", eng, cls, "mean_tpot_ms")])
        t.add_row(eng, cls, str(n), *(_cell(by[(p, eng, cls, m)]) for m, _ in METRICS for p in PATHS))
    return t


def fitted_table() -> Table:
    """The fitted serving data set's in-sample and held-out median |error| / bias, per engine and dense / MoE: its
    records name no dataset and are priced by the analytical load model, so the lengths do not move them."""
    _, records = load_serving_records()
    apart = held_out_sources()
    by: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for rec in records:
        part = "held-out" if rec["source"] in apart else "in-sample"
        cls = "dense" if model_class(rec) == "dense" else "moe"
        for c in predict_serving(rec):
            if (c.id, c.metric) in SKIPPED:
                continue
            group = "TTFT" if "ttft" in c.metric else "TPOT / throughput"
            for k in (str(rec["engine"]), cls):
                by[(part, k, group)].append(c.error)
    t = Table(title="Fitted serving data (accuracy/data/serving_runs.json): median |error| / bias")
    for col in ("set", "rows", "figures", "n", "median |error| / bias"):
        t.add_column(col)
    for key in sorted(by):
        t.add_row(*key, str(len(by[key])), _cell(by[key]))
    return t


def main() -> None:
    _, records = load_quarantine()
    named: dict[str, int] = defaultdict(int)
    for rec in records:
        named[record_dataset(rec) or "none"] += 1
    console = Console(width=200)
    console.print(fitted_table())
    console.print(table())
    console.print(
        "records by the dataset their table names: " + ", ".join(f"{k} {v}" for k, v in sorted(named.items()))
    )


if __name__ == "__main__":
    main()
