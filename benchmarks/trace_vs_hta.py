"""The trace reader (optimizer/calibration/trace_breakdown.py) beside HolisticTraceAnalysis on HTA's own test traces
[issue 54 §2]: per trace and rank, each figure as the reader computes it and as HTA 0.5.0 does (the pinned
environment tests/frameworks/hta, built by `.venv/bin/python tests/frameworks/install.py hta`; the traces are
unpacked beside it from the HTA snapshot). The same comparison, with its tolerance, is
tests/optimizer/calibration/test_trace_breakdown.py. Prints a table; a few minutes on 2 busy cores (HTA's share).

Run: .venv/bin/python benchmarks/trace_vs_hta.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.calibration.trace_breakdown import RankBreakdown, trace_breakdown  # noqa: E402
from optimizer.calibration.trace_files import read_trace_path  # noqa: E402
from tests.frameworks.harness import check, source  # noqa: E402
from tests.optimizer.calibration.test_trace_breakdown import TRACES  # noqa: E402

FIGURES = ("kernel_time_us", "idle_us", "compute_us", "non_compute_us")


def _mine(r: RankBreakdown) -> dict[str, float | None]:
    w = r.window
    out: dict[str, float | None] = {f: getattr(w, f) for f in FIGURES}
    out["overlap_ratio"] = w.overlap_ratio
    out["COMPUTATION"] = sum(w.sums_us.get(c, 0.0) for c in ("gemm", "attention", "other_compute"))
    out["COMMUNICATION"] = w.sums_us.get("communication", 0.0)
    out["MEMORY"] = w.sums_us.get("memory", 0.0)
    return out


def _theirs(ref: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {f: ref[f] for f in FIGURES}
    out["overlap_ratio"] = ref["overlap_ratio"]
    for k in ("COMPUTATION", "COMMUNICATION", "MEMORY"):
        out[k] = ref.get("type_sums_us", {}).get(k, 0.0)
    return out


def _cell(v: float | None, ratio: bool) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if ratio else f"{v:,.0f}"


def main() -> None:
    root = source("hta") / "tests" / "data"
    t0 = time.perf_counter()
    mine = {name: trace_breakdown(read_trace_path(root / name)) for name in TRACES}
    t_mine = time.perf_counter() - t0
    t0 = time.perf_counter()
    figures = check("hta", {"trace_dirs": [str(root / n) for n in TRACES]}, timeout=3600)
    t_hta = time.perf_counter() - t0
    table = Table(title="trace reader vs HolisticTraceAnalysis 0.5.0 (us; overlap: ratio): ours / HTA's")
    table.add_column("trace")
    table.add_column("rank", justify="right")
    cols = [*FIGURES, "overlap_ratio", "COMPUTATION", "COMMUNICATION", "MEMORY"]
    for c in cols:
        table.add_column(c.removesuffix("_us"), justify="right")
    worst = 0.0
    for name in TRACES:
        hta = figures[str(root / name)]
        for r in mine[name]:
            a, b = _mine(r), _theirs(hta[str(r.rank)])
            cells = []
            for c in cols:
                x, y = a[c], b[c]
                cells.append(f"{_cell(x, c == 'overlap_ratio')} / {_cell(y, c == 'overlap_ratio')}")
                if x is not None and y is not None and c != "overlap_ratio":
                    worst = max(worst, abs(x - y) / max(1.0, float(b["kernel_time_us"] or 1.0)))
            table.add_row(name, str(r.rank), *cells)
    console = Console(width=250)
    console.print(table)
    console.print(
        f"largest difference: {worst:.2e} of the rank's kernel time; reader {t_mine:.1f} s, HTA {t_hta:.1f} s "
        "(both on this machine, HTA's including its start-up)"
    )


if __name__ == "__main__":
    main()
