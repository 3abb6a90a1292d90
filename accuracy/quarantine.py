"""The quarantine: published training runs from sources the cost model has never been fitted on (issue 44 §1).

`accuracy/data/quarantine/<source>.json` holds one source's runs in the record shape of published_runs.json, each
with its citation and a `quarantine` block: the stack as run, the framework as run, and what the model cannot express
(`missing`: a JAX framework priced through a stand-in, a sharding the model approximates, ...). A record with
something missing is still scored and counted as such.

Rules (tests/accuracy/test_quarantine.py enforces them):
- no fitted constant, residual table or interval table of the point model reads this directory (the widening of
  intervals by novelty, optimizer/costmodel/novelty.json, does, and its coverage on the quarantine is reported
  leave-one-quarantine-source-out, accuracy/novelty_fit.py);
- a quarantine record is in no fit set (published_runs.json, megatron_bridge_summary.csv, serving_runs.json) unless
  its source is released;
- a source is released only by a `- released YYYY-MM-DD:` line in its section of LOG.md dated on or after a
  `- scored YYYY-MM-DD:` line of the same section (its score as found, logged before any model change looked at it).

Run: .venv/bin/python -m accuracy.quarantine [--source S ...] [--log]   (--log appends a dated score line per source)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import statistics
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accuracy.published_runs import Record, predict
from optimizer.costmodel.uncertainty import RunFeatures, step_time_interval, training_features, training_gpu
from optimizer.errors import DomainError

QUARANTINE_DIR = Path(__file__).parent / "data" / "quarantine"
LOG_PATH = QUARANTINE_DIR / "LOG.md"
_SECTION = re.compile(r"^## (\S+)\s*$")
_ENTRY = re.compile(r"^- (scored|released) (\d{4}-\d{2}-\d{2}):")


@dataclass(frozen=True, slots=True)
class Source:
    """One quarantined source: its metadata and records."""

    id: str
    """Source id (the file name without .json; the records' `group`)."""
    meta: dict[str, Any]
    """Title, citation, stack, date added."""
    records: tuple[Record, ...]
    """Its runs, in published_runs.json's shape plus a `quarantine` block."""


@dataclass(frozen=True, slots=True)
class QuarantineCase:
    """One quarantined run scored by the model as it stands."""

    id: str
    source: str
    stack: str
    """The stack as run (framework, release and GPU in words)."""
    gpu: str
    """Catalog name of the GPU."""
    measured: float
    """Measured (or derived from published throughput) step time, s."""
    predicted: float | None
    """Predicted step time, s (None when the model cannot price it at all)."""
    missing: tuple[str, ...]
    """What the model cannot express about the run (empty: fully expressible)."""
    features: RunFeatures | None
    """Regime features of the priced configuration."""
    low: float | None = None
    """80% interval of the prediction as shipped (None when unpriced)."""
    high: float | None = None
    basis: str = ""
    why_unpriced: str = ""

    @property
    def error(self) -> float | None:
        """predicted / measured - 1."""
        return None if self.predicted is None else self.predicted / self.measured - 1

    @property
    def residual(self) -> float | None:
        """log(measured / predicted), the residual convention of residuals.json."""
        return None if self.predicted is None else math.log(self.measured / self.predicted)

    @property
    def covered(self) -> bool:
        return self.low is not None and self.high is not None and self.low <= self.measured <= self.high

    @property
    def expressible(self) -> bool:
        return not self.missing


def load_sources(directory: Path = QUARANTINE_DIR) -> list[Source]:
    """Every quarantined training source (released ones included: `released_sources()` says which). The serving
    quarantine shares the directory as serving_*.json (benchmarks/serving_quarantine.py reads it)."""
    out = []
    for path in sorted(p for p in directory.glob("*.json") if not p.name.startswith("serving_")):
        doc = json.loads(path.read_text())
        records = tuple(doc["records"])
        for r in records:
            if r["group"] != path.stem:
                raise DomainError(
                    "quarantine", f"{path.name}: record {r['id']} has group {r['group']}, not {path.stem}"
                )
        out.append(Source(path.stem, doc["meta"], records))
    return out


def quarantined_ids(directory: Path = QUARANTINE_DIR) -> dict[str, str]:
    """Record id -> source id of every quarantined record."""
    return {r["id"]: s.id for s in load_sources(directory) for r in s.records}


def score_record(rec: Record) -> QuarantineCase:
    """Price one quarantined record as published_runs.predict prices a published one, with its shipped interval."""
    q = rec["quarantine"]
    measured = rec["measured"].get("step_time_s") or rec["derived"]["step_time_s"]
    base: dict[str, Any] = dict(
        id=rec["id"], source=rec["group"], stack=q["stack"], gpu=rec["cluster"]["gpu_type"], measured=float(measured)
    )
    try:
        case = predict(rec)
    except DomainError as exc:
        return QuarantineCase(**base, predicted=None, missing=tuple(q["missing"]), features=None, why_unpriced=exc.rule)
    assert case is not None and case.run is not None
    run = case.run
    assert not isinstance(run.workload, str)
    feats = training_features(run.model, run.cluster, run.workload, run.config)
    base["gpu"] = training_gpu(run.cluster, run.config)
    iv = step_time_interval(feats, case.predicted, gpu=base["gpu"], stand_in="; ".join(q["missing"]))
    return QuarantineCase(
        **base,
        predicted=case.predicted,
        missing=tuple(q["missing"]),
        features=feats,
        low=iv.low,
        high=iv.high,
        basis=iv.basis,
    )


def score_all(sources: Iterable[Source] | None = None) -> list[QuarantineCase]:
    """Every quarantined record scored by the model as it stands."""
    return [score_record(r) for s in (load_sources() if sources is None else sources) for r in s.records]


@dataclass(frozen=True, slots=True)
class Summary:
    """Error and coverage of a set of quarantined runs."""

    n: int
    priced: int
    expressible: int
    median: float
    """Median |predicted / measured - 1|."""
    p90: float
    bias: float
    """Median signed error."""
    coverage: float
    """Share of the priced runs inside their 80% interval."""
    median_width: float
    """Median (high - low) / predicted."""


def summarise(cases: list[QuarantineCase]) -> Summary:
    """Summary of `cases` (errors over the priced ones)."""
    priced = [c for c in cases if c.error is not None]
    errs = sorted(abs(c.error) for c in priced if c.error is not None)
    if not errs:
        return Summary(len(cases), 0, sum(c.expressible for c in cases), math.nan, math.nan, math.nan, 0.0, math.nan)
    p90 = errs[min(len(errs) - 1, math.ceil(0.9 * len(errs)) - 1)]
    widths = [
        (c.high - c.low) / c.predicted for c in priced if c.high is not None and c.low is not None and c.predicted
    ]
    return Summary(
        n=len(cases),
        priced=len(priced),
        expressible=sum(c.expressible for c in cases),
        median=statistics.median(errs),
        p90=p90,
        bias=statistics.median(c.error for c in priced if c.error is not None),
        coverage=sum(c.covered for c in priced) / len(priced),
        median_width=statistics.median(widths) if widths else math.nan,
    )


# ---- the log ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogSection:
    """One source's section of LOG.md."""

    source: str
    scored: tuple[datetime.date, ...]
    released: tuple[datetime.date, ...]


def parse_log(text: str) -> dict[str, LogSection]:
    """The sections of a quarantine log (`## <source>` headers; `- scored DATE:` / `- released DATE:` lines)."""
    found: dict[str, tuple[list[datetime.date], list[datetime.date]]] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _SECTION.match(line):
            current = m.group(1)
            found.setdefault(current, ([], []))
        elif (m := _ENTRY.match(line)) and current is not None:
            day = datetime.date.fromisoformat(m.group(2))
            found[current][0 if m.group(1) == "scored" else 1].append(day)
    return {k: LogSection(k, tuple(s), tuple(r)) for k, (s, r) in found.items()}


def released_sources(text: str | None = None) -> dict[str, datetime.date]:
    """Source -> release date of every released source. A release must follow a logged score (same section, on or
    after its earliest `scored` date): otherwise DomainError, naming the source and the rule."""
    sections = parse_log(LOG_PATH.read_text() if text is None else text)
    out: dict[str, datetime.date] = {}
    for s in sections.values():
        if not s.released:
            continue
        if not s.scored or min(s.released) < min(s.scored):
            raise DomainError(
                "quarantine",
                f"{s.source} is released in LOG.md before any score of it is logged (a source leaves quarantine only "
                "after its score as found is recorded)",
            )
        out[s.source] = min(s.released)
    return out


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=QUARANTINE_DIR
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def score_line(source: str, summary: Summary, day: datetime.date, command: str) -> str:
    """The dated log line of one source's score."""
    return (
        f"- scored {day.isoformat()}: n={summary.n} (priced {summary.priced}, fully expressible "
        f"{summary.expressible}); |error| median {summary.median:.1%}, p90 {summary.p90:.1%}; "
        f"bias {summary.bias:+.1%}; "
        f"80% interval coverage {summary.coverage:.0%} (median width {summary.median_width:.0%}); model at "
        f"{_commit()}; `{command}`"
    )


def append_scores(
    cases: list[QuarantineCase], command: str, day: datetime.date | None = None, path: Path = LOG_PATH
) -> None:
    """Append one dated score line per source to the log (a new section for a source the log has not seen)."""
    day = day or datetime.date.today()
    text = path.read_text() if path.exists() else ""
    sections = parse_log(text)
    lines = text.rstrip("\n").split("\n") if text else []
    for source in sorted({c.source for c in cases}):
        line = score_line(source, summarise([c for c in cases if c.source == source]), day, command)
        if source in sections:  # after the section's last line
            start = next(i for i, x in enumerate(lines) if _SECTION.match(x) and x.split()[1] == source)
            end = next((i for i in range(start + 1, len(lines)) if _SECTION.match(lines[i])), len(lines))
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            lines.insert(end, line)
        else:
            lines += ["", f"## {source}", "", line]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", help="score only this source (repeatable)")
    parser.add_argument("--log", action="store_true", help="append a dated score line per source to LOG.md")
    args = parser.parse_args()
    sources = [s for s in load_sources() if not args.source or s.id in args.source]
    cases = score_all(sources)
    for c in cases:
        err = "unpriced: " + c.why_unpriced if c.error is None else f"{c.error:+.1%}"
        inside = "in" if c.covered else "OUT"
        print(
            f"{c.id:55s} {c.measured:8.3f} {c.predicted or math.nan:8.3f} {err:>8s} {inside:3s} {'; '.join(c.missing)}"
        )
    for source in sorted({c.source for c in cases}):
        s = summarise([c for c in cases if c.source == source])
        print(
            f"{source:40s} n={s.n:3d} median {s.median:6.1%} p90 {s.p90:6.1%} bias {s.bias:+6.1%} cov {s.coverage:4.0%}"
        )
    s = summarise(cases)
    print(f"{'all':40s} n={s.n:3d} median {s.median:6.1%} p90 {s.p90:6.1%} bias {s.bias:+6.1%} cov {s.coverage:4.0%}")
    if args.log:
        command = ".venv/bin/python -m accuracy.quarantine" + "".join(f" --source {x}" for x in args.source or [])
        append_scores(cases, command)


if __name__ == "__main__":
    main()
