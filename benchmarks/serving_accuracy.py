"""Serving accuracy per engine: in-sample beside leave-one-source-out, and the held-out public figures.

In-sample: every scored figure of the sources the serving constants were fitted on (accuracy/serving_runs.py
run_serving), at the shipped constants. Leave-one-source-out: for each of those sources, the calibrated serving
constants (benchmarks/serving_fit.py: the share of HBM bandwidth paged decode attention reaches, and each engine's
exposed host time per iteration) are refitted on a coarse grid to the other sources' figures (the grid point with
the smallest median |error| over them; the host time per engine on that engine's figures; an engine left with no
figure borrows the other engines' mean), and the left-out source is scored at the refit values. Held out: the
sources marked `held_out` in accuracy/data/serving_runs.json (never fitted), at the shipped constants. Quarantine:
the load measurements of accuracy/data/quarantine/serving_*.json (accuracy/serving_quarantine.py: bursts and closed
loops simulated by costmodel/serving_sim.py), never fitted. Per engine and per model class (dense, MoE, MoE with EP
or attention DP). Targets (issue 50): median |error| on unseen sources <= 10% TensorRT-LLM, 12% vLLM, 20% SGLang,
15% MoE, 25% MoE with EP / attention DP; TPOT <= 10%, TTFT under load <= 25%.

Run: .venv/bin/python benchmarks/serving_accuracy.py   (about 10 s)
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import numpy as np
from rich.console import Console
from rich.table import Table

from accuracy.published_runs import CalibrationCase
from accuracy.serving_quarantine import load_quarantine, model_class, predict_quarantine
from accuracy.serving_runs import SKIPPED, held_out_sources, load_serving_records, predict_serving
from optimizer.costmodel import constants
from optimizer.costmodel.constants import DECODE_ATTENTION_HBM_SHARE, ENGINE_ITERATION_OVERHEAD_S
from optimizer.spec.model_loading import load_model_preset

SHARES = (1.0, 0.85, 0.7)
HOST_S = (0.0, 0.002, 0.004, 0.006, 0.008)
ENGINES = ("vllm", "sglang", "trtllm")
TARGET_MEDIAN, TARGET_P90 = 0.10, 0.25
# Issue 50 §4: median |error| on sources the project does not use, per engine and per model class.
ENGINE_TARGETS = {"trtllm": 0.10, "vllm": 0.12, "sglang": 0.20}
CLASSES = ("dense", "moe", "moe_ep_adp")
CLASS_TARGETS = {"dense": 0.10, "moe": 0.15, "moe_ep_adp": 0.25}
TARGET_TPOT, TARGET_TTFT = 0.10, 0.25


def _p90(errors: list[float]) -> float:
    return float(np.percentile(errors, 90)) if errors else float("nan")


def _median(errors: list[float]) -> float:
    return statistics.median(errors) if errors else float("nan")


def _cases(records: list[dict[str, object]]) -> list[CalibrationCase]:
    return [c for r in records for c in predict_serving(r) if (c.id, c.metric) not in SKIPPED]


def grid_predictions(
    records: list[dict[str, object]],
) -> dict[tuple[float, str, float], list[tuple[str, float, str]]]:
    """(share, engine, host) -> [(source, |error|, record id)] of that engine's records: an engine's figures depend
    only on the share and its own host time."""
    out: dict[tuple[float, str, float], list[tuple[str, float, str]]] = {}
    shipped = dict(ENGINE_ITERATION_OVERHEAD_S)
    try:
        for share in SHARES:
            constants.DECODE_ATTENTION_HBM_SHARE = share  # read by costmodel/inference.py at each call
            for engine in ENGINES:
                rows = [r for r in records if r["engine"] == engine]
                for host in HOST_S:
                    ENGINE_ITERATION_OVERHEAD_S[engine] = host  # read by serving_engines.engine_limits
                    out[(share, engine, host)] = [(str(c.group), abs(c.error), c.id) for c in _cases(rows)]
                ENGINE_ITERATION_OVERHEAD_S[engine] = shipped[engine]
    finally:
        constants.DECODE_ATTENTION_HBM_SHARE = DECODE_ATTENTION_HBM_SHARE
        ENGINE_ITERATION_OVERHEAD_S.update(shipped)
    return out


def refit(
    grid: dict[tuple[float, str, float], list[tuple[str, float, str]]], left_out: str
) -> tuple[float, dict[str, float]]:
    """The grid point fitted without `left_out`: per share, each engine's host time with the smallest median
    |error| on its other figures; the share whose picks give the smallest median over all other figures."""
    best: tuple[float, float, dict[str, float]] | None = None
    for share in SHARES:
        picks: dict[str, float] = {}
        pooled: list[float] = []
        for engine in ENGINES:
            scored = {host: [e for src, e, _ in grid[(share, engine, host)] if src != left_out] for host in HOST_S}
            scored = {h: v for h, v in scored.items() if v}
            if not scored:
                continue
            host = min(scored, key=lambda h: (_median(scored[h]), h))
            picks[engine] = host
            pooled += scored[host]
        # An engine with no figure left (its only source left out) cannot keep the host time fitted on that
        # source: it takes the grid value nearest the other engines' mean.
        if picks:
            borrowed = statistics.mean(picks.values())
            for engine in ENGINES:
                picks.setdefault(engine, min(HOST_S, key=lambda h: abs(h - borrowed)))
        m = _median(pooled)
        if best is None or m < best[0]:
            best = (m, share, picks)
    assert best is not None
    return best[1], best[2]


def record_class(rec: dict[str, object]) -> str:
    """dense, moe, or moe_ep_adp (experts over EP ranks, or attention data parallel)."""
    model = load_model_preset(str(rec["model"]))
    if model.moe is None:
        return "dense"
    return "moe_ep_adp" if int(str(rec.get("ep", 1))) > 1 or int(str(rec.get("dp", 1))) > 1 else "moe"


def quarantine_errors() -> dict[tuple[str, str, str], list[float]]:
    """(engine or 'all', class or 'all', metric group) -> |errors| of the quarantined figures; groups: tpot (mean
    TPOT and throughput), ttft (mean TTFT)."""
    _, records = load_quarantine()
    out: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for rec in records:
        cls = model_class(rec)
        for c in predict_quarantine(rec):
            group = "ttft" if "ttft" in c.metric else "tpot"
            if c.metric == "median_ttft_ms":
                continue  # the mean is the scored TTFT (one figure per run)
            for eng in (str(rec["engine"]), "all"):
                for k in (cls, "all"):
                    out[(eng, k, group)].append(abs(c.error))
    return out


def serving_accuracy_tables() -> tuple[Table, Table, Table, str]:
    """(per-engine table and per-class table: in-sample | left-out | held-out | quarantine, the folds' refits, a
    footnote)."""
    sources, records = load_serving_records()
    apart = held_out_sources()
    fitted = [r for r in records if r["source"] not in apart]
    held = [r for r in records if r["source"] in apart]
    engine_of = {str(r["id"]): str(r["engine"]) for r in records}
    class_of = {str(r["id"]): record_class(r) for r in records}

    in_sample: dict[str, list[float]] = defaultdict(list)
    for c in _cases(fitted):
        in_sample[engine_of[c.id]].append(abs(c.error))
        in_sample[class_of[c.id]].append(abs(c.error))
    held_out: dict[str, list[float]] = defaultdict(list)
    for c in _cases(held):
        held_out[engine_of[c.id]].append(abs(c.error))
        held_out[class_of[c.id]].append(abs(c.error))

    grid = grid_predictions(fitted)
    loso: dict[str, list[float]] = defaultdict(list)
    folds = Table(title="Leave-one-source-out: refit on the other sources")
    for col in ("left out", "figures", "share", "host ms (vllm/sglang/trtllm)", "median |error|", "p90"):
        folds.add_column(col)
    for src in sorted({str(r["source"]) for r in fitted}):
        share, hosts = refit(grid, src)
        errs: list[float] = []
        for engine in ENGINES:
            host = hosts.get(engine, ENGINE_ITERATION_OVERHEAD_S[engine])
            mine = [(e, rid) for s, e, rid in grid[(share, engine, host)] if s == src]
            loso[engine] += [e for e, _ in mine]
            for e, rid in mine:
                loso[class_of[rid]].append(e)
            errs += [e for e, _ in mine]
        folds.add_row(
            src,
            str(len(errs)),
            f"{share:g}",
            "/".join(f"{1000 * hosts.get(e, ENGINE_ITERATION_OVERHEAD_S[e]):g}" for e in ENGINES),
            f"{_median(errs):.1%}",
            f"{_p90(errs):.1%}",
        )
    quarantine = quarantine_errors()

    def fmt(v: float, target: float) -> str:
        if v != v:  # nan: no figure
            return "-"
        return f"{v:.1%}" + ("" if v <= target else " *")

    def table(title: str, keys: tuple[str, ...], targets: dict[str, float]) -> Table:
        t = Table(title=title)
        for col in (
            "rows",
            "target",
            "in-sample n",
            "median",
            "p90",
            "left-out median",
            "held-out n",
            "held-out median",
            "quarantine TPOT/tput n",
            "median",
            "quarantine TTFT n",
            "median",
        ):
            t.add_column(col, justify="right")
        for key in keys:
            target = targets[key]
            a, b, h = in_sample[key], loso[key], held_out[key]
            qe = key if key in ENGINES else "all"
            qc = key if key not in ENGINES else "all"
            qt, qf = quarantine[(qe, qc, "tpot")], quarantine[(qe, qc, "ttft")]
            t.add_row(
                key,
                f"{target:.0%}",
                str(len(a)),
                fmt(_median(a), target),
                fmt(_p90(a), TARGET_P90),
                fmt(_median(b), target),
                str(len(h)),
                fmt(_median(h), target),
                str(len(qt)),
                fmt(_median(qt), min(target, TARGET_TPOT)),
                str(len(qf)),
                fmt(_median(qf), TARGET_TTFT),
            )
        return t

    by_engine = table("Serving |error| per engine", ENGINES, ENGINE_TARGETS)
    by_class = table("Serving |error| per model class", CLASSES, CLASS_TARGETS)
    note = (
        "* misses the target (issue 50: on unseen sources median <= 10% TensorRT-LLM, 12% vLLM, 20% SGLang, 15% MoE, "
        "25% MoE with EP / attention DP; TPOT <= 10%, TTFT under load <= 25%; p90 <= 25%). Quarantine: "
        "accuracy/data/quarantine/serving_*.json, never fitted (log: serving_LOG.md). Held-out sources: "
        + ", ".join(f"{s} ({sources[s]['repo']} {sources[s]['commit'][:8]})" for s in sorted(apart))
    )
    return by_engine, by_class, folds, note


def main() -> None:
    console = Console(width=160)
    for part in serving_accuracy_tables():
        console.print(part)


if __name__ == "__main__":
    main()
