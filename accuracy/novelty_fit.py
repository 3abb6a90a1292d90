"""Learn how much each novelty axis widens the step-time interval (optimizer/costmodel/novelty.py; issue 44 §2).

Data: out-of-sample log errors r = log(measured / predicted) of
- the project's step-time runs, each left out by source (residuals.json `left_out`; its regime interval and its
  novelty measured against the other sources only; `unseen_source` 0: the model's structure was shaped on them);
- the quarantine's runs as the model stands (accuracy/quarantine.py; never fitted; `unseen_source` 1, `stand_in` 1
  where the model only approximates the run).
Each run has its regime's split-conformal interval (centre c, half-width h) and its axes x. The widening w >= 0 per
axis minimises the interval score of the 80% intervals [c - H, c + H], H = sqrt(h^2 + sum x_a w_a^2):
S = 2H + (2 / 0.2) max(0, |r - c| - H) [Gneiting and Raftery 2007 §6.2; its expectation is minimised by the true
10% and 90% quantiles], each source weighing one (runs of a source share its bias). Coordinate descent on a grid of
w (0 to 0.6 in log units, step 0.005), a few sweeps. An axis exercised by fewer than MIN_EVIDENCE sources keeps its
prior (novelty.PRIOR_WIDENING).

Honest coverage: every source (project or quarantine) is scored with w refit WITHOUT it (leave-one-source-out over
the widening fit, on top of the residuals' own leave-one-source-out), so the quarantine coverage printed here and by
benchmarks/uncertainty.py is out of sample for the widening too.

Run: .venv/bin/python -m accuracy.novelty_fit [--write]   (--write refreshes optimizer/costmodel/novelty.json)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import optimizer.costmodel as costmodel_package
from accuracy.published_runs import _cluster, load_records
from accuracy.quarantine import QuarantineCase, score_all
from optimizer.costmodel.novelty import (
    AXES,
    MIN_EVIDENCE,
    PRIOR_WIDENING,
    UNSEEN_SOURCE,
    Novelty,
    SupportRun,
    Widening,
    novelty,
)
from optimizer.costmodel.uncertainty import (
    COVERAGE,
    STEP_METRIC,
    RunFeatures,
    base_offsets,
    residual_table,
)

NOVELTY_PATH = Path(costmodel_package.__file__).parent / "novelty.json"
GRID = np.arange(0.0, 0.6001, 0.005)
SWEEPS = 4
ALPHA = 1 - COVERAGE
COMMAND = ".venv/bin/python -m accuracy.novelty_fit --write"


@dataclass(frozen=True)
class Row:
    """One out-of-sample error with its regime interval and novelty."""

    id: str
    source: str
    kind: str
    """project (left out by source) or quarantine (as found)."""
    stack: str
    """What the run is, for the per-stack table: the quarantine's stack, or the project regime's framework + family."""
    regime: str
    center: float
    half: float
    x: dict[str, float]
    words: dict[str, str]
    r: float
    """log(measured / predicted)."""
    predicted: float
    measured: float

    @classmethod
    def priced(
        cls,
        run: tuple[str, str, str, str],
        offsets: tuple[float, float, int, str],
        nov: Novelty,
        r: float,
        predicted: float,
        measured: float,
    ) -> Row:
        """A row from its run (id, source, kind, stack), its regime's base_offsets and its novelty."""
        lo, hi, _, regime = offsets
        return cls(*run, regime, (lo + hi) / 2, (hi - lo) / 2, nov.values, nov.words, r, predicted, measured)


def support_runs() -> tuple[SupportRun, ...]:
    """The fitted step-time runs: every step time of the residual table, with its GPU as the catalog names it."""
    by_id = {r["id"]: r for r in load_records()}
    out = []
    for res in residual_table():
        if res.metric != STEP_METRIC or res.features is None:
            continue
        cluster = _cluster(by_id[res.id])
        f = res.features
        gpu = str(cluster.gpu_of(cluster.pools[0]).name)
        out.append(SupportRun(res.group, f.framework, f.family, gpu, f.precision, f.moe, f.gpus))
    return tuple(out)


def project_rows(support: tuple[SupportRun, ...]) -> list[Row]:
    """The project's step times, each with its interval and novelty from the other sources only."""
    gpu_of = {(s.group, s.gpus, s.framework): s.gpu for s in support}
    rows = []
    for res in residual_table():
        if res.metric != STEP_METRIC or res.features is None:
            continue
        f = res.features
        others = tuple(s for s in support if s.group != res.group)
        published = tuple(r.features for r in residual_table() if r.features and r.group != res.group)
        nov = novelty(f, gpu_of[(res.group, f.gpus, f.framework)], others, published, unseen_source=False)
        predicted = res.measured / math.exp(res.left_out)
        run = (res.id, res.group, "project", f"{f.framework} {f.family}")
        rows.append(Row.priced(run, base_offsets(f, None, res.group), nov, res.left_out, predicted, res.measured))
    return rows


def quarantine_rows(support: tuple[SupportRun, ...], cases: list[QuarantineCase] | None = None) -> list[Row]:
    """The quarantine's priced runs with their interval (full residual table) and novelty (full support)."""
    published = tuple(r.features for r in residual_table() if r.metric == STEP_METRIC and r.features)
    rows = []
    for c in score_all() if cases is None else cases:
        if c.predicted is None or c.features is None or c.residual is None:
            continue
        f: RunFeatures = c.features
        nov = novelty(f, c.gpu, support, published, unseen_source=True, stand_in="; ".join(c.missing))
        run = (c.id, c.source, "quarantine", c.stack)
        rows.append(Row.priced(run, base_offsets(f), nov, c.residual, c.predicted, c.measured))
    return rows


def _matrix(rows: list[Row]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([[r.x.get(a, 0.0) for a in AXES] for r in rows])
    h = np.array([r.half for r in rows])
    dev = np.array([abs(r.r - r.center) for r in rows])
    sources = [r.source for r in rows]
    counts = {s: sources.count(s) for s in set(sources)}
    weight = np.array([1 / counts[s] for s in sources])
    return x, h, dev, weight, np.array(sources)


def evidence(rows: list[Row]) -> dict[str, int]:
    """Sources whose runs exercise each axis."""
    return {a: len({r.source for r in rows if r.x.get(a, 0) > 0}) for a in AXES}


def fit_kind(rows: list[Row], prior: Widening | None = None) -> Widening:
    """The per-axis widening minimising the source-weighted interval score of `rows` (module docstring); an axis
    exercised by fewer than MIN_EVIDENCE of their sources keeps `prior`'s value (else PRIOR_WIDENING)."""
    x, h, dev, weight, _ = _matrix(rows)
    ev = evidence(rows)
    learned = {a: ev[a] >= MIN_EVIDENCE for a in AXES}
    start = {a: prior.weights[a] if prior is not None else PRIOR_WIDENING[a] for a in AXES}
    w = np.array([0.0 if learned[a] else start[a] for a in AXES])
    for _ in range(SWEEPS):
        for j, a in enumerate(AXES):
            if not learned[a]:
                continue
            rest = h**2 + x @ (w**2) - x[:, j] * w[j] ** 2
            wide = np.sqrt(rest[None, :] + x[None, :, j] * GRID[:, None] ** 2)
            score = 2 * wide + (2 / ALPHA) * np.maximum(0.0, dev[None, :] - wide)
            w[j] = GRID[int(np.argmin(score @ weight))]
    inherited = {a: learned[a] or (prior is not None and prior.learned[a]) for a in AXES}
    return Widening({a: float(w[j]) for j, a in enumerate(AXES)}, inherited)


@dataclass(frozen=True)
class Fitted:
    """The two widenings: for the project's own setups (learned on its runs left out by source) and for every other
    query (learned on the quarantine; an axis the quarantine does not exercise takes the project's value)."""

    own: Widening
    unseen: Widening

    def of(self, row: Row) -> Widening:
        return self.unseen if row.x.get(UNSEEN_SOURCE) else self.own


def fit(rows: list[Row]) -> Fitted:
    """Both widenings from `rows`."""
    own = fit_kind([r for r in rows if not r.x.get(UNSEEN_SOURCE)])
    return Fitted(own, fit_kind([r for r in rows if r.x.get(UNSEEN_SOURCE)], prior=own))


def half_widths(rows: list[Row], widen: Fitted) -> list[float]:
    return [widen.of(r).half_width(r.half, _nov(r)) for r in rows]


def _nov(row: Row) -> Novelty:
    return Novelty(dict(row.x), dict(row.words))


@dataclass(frozen=True)
class Scored:
    """A row with its interval's half-width under some widening."""

    row: Row
    half: float

    @property
    def covered(self) -> bool:
        return abs(self.row.r - self.row.center) <= self.half

    @property
    def width(self) -> float:
        """(high - low) / predicted."""
        return math.exp(self.row.center + self.half) - math.exp(self.row.center - self.half)

    @property
    def error(self) -> float:
        return self.row.predicted / self.row.measured - 1


def score_in_sample(rows: list[Row], widen: Fitted) -> list[Scored]:
    return [Scored(r, float(hw)) for r, hw in zip(rows, half_widths(rows, widen), strict=True)]


def score_nested(rows: list[Row]) -> list[Scored]:
    """Every row with the widening refit without its source (leave-one-source-out over the widening fit)."""
    out: dict[str, Scored] = {}
    for source in sorted({r.source for r in rows}):
        mine = [r for r in rows if r.source == source]
        widen = fit([r for r in rows if r.source != source])
        out.update({s.row.id: s for s in score_in_sample(mine, widen)})
    return [out[r.id] for r in rows]


def unwidened(rows: list[Row]) -> list[Scored]:
    """The regime intervals alone (no novelty widening)."""
    return [Scored(r, r.half) for r in rows]


@dataclass(frozen=True)
class Figures:
    n: int
    sources: int
    coverage: float
    median_width: float
    median_error: float
    p90_error: float
    bias: float


def figures(scored: list[Scored]) -> Figures:
    errs = sorted(abs(s.error) for s in scored)
    return Figures(
        n=len(scored),
        sources=len({s.row.source for s in scored}),
        coverage=sum(s.covered for s in scored) / len(scored),
        median_width=statistics.median(s.width for s in scored),
        median_error=statistics.median(errs),
        p90_error=errs[min(len(errs) - 1, math.ceil(0.9 * len(errs)) - 1)],
        bias=statistics.median(s.error for s in scored),
    )


def by_stack(scored: list[Scored]) -> dict[str, Figures]:
    groups: dict[str, list[Scored]] = {}
    for s in scored:
        groups.setdefault(s.row.stack, []).append(s)
    return {k: figures(v) for k, v in sorted(groups.items())}


def document(support: tuple[SupportRun, ...], rows: list[Row]) -> dict[str, Any]:
    """novelty.json: the widening fitted on all rows, the support, and the nested coverage it was checked by."""
    widen = fit(rows)
    ev = evidence(rows)
    nested = score_nested(rows)
    quarantine = [s for s in nested if s.row.kind == "quarantine"]
    project = [s for s in nested if s.row.kind == "project"]

    def summary(f: Figures) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in f.__dict__.items()}

    return {
        "meta": {
            "generator": COMMAND,
            "date": datetime.date.today().isoformat(),
            "method": (__doc__ or "").split("\n\n")[1].replace("\n", " "),
            "nested_coverage": {
                "project (left out by source)": summary(figures(project)),
                "quarantine (left out by source)": summary(figures(quarantine)),
                "quarantine per stack": {k: summary(v) for k, v in by_stack(quarantine).items()},
            },
        },
        "weights": {
            kind: {a: {"value": round(w.weights[a], 4), "learned": w.learned[a]} for a in AXES}
            for kind, w in (("own", widen.own), ("unseen", widen.unseen))
        },
        "evidence_sources": ev,
        "support": [s.to_json() for s in support],
    }


def all_rows() -> tuple[tuple[SupportRun, ...], list[Row]]:
    support = support_runs()
    return support, project_rows(support) + quarantine_rows(support)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {NOVELTY_PATH}")
    args = parser.parse_args()
    support, rows = all_rows()
    doc = document(support, rows)
    for kind, ws in doc["weights"].items():
        for a, v in ws.items():
            print(
                f"{kind:6s} {a:16s} w={v['value']:.3f} (+/-{math.expm1(v['value']):.0%} at x=1) learned={v['learned']}"
            )
    print(json.dumps(doc["meta"]["nested_coverage"], indent=1))
    if args.write:
        NOVELTY_PATH.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {NOVELTY_PATH}")


if __name__ == "__main__":
    main()
