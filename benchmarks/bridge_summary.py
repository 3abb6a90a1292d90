"""The cost model on every Megatron-Bridge performance-summary row it can price (accuracy/bridge_rows.py, which says
how each row is priced). Prints every row and the median and p90 |error| per GPU family, for the newest containers
and for all.

Run: .venv/bin/python benchmarks/bridge_summary.py [--all-rows]
"""

from __future__ import annotations

import argparse
import statistics

from rich.console import Console
from rich.table import Table

from accuracy.bridge_rows import NEWEST, PAIR_TIE, SYSTEMS, Row, ordered_pairs, priced_rows


def _p90(errs: list[float]) -> float:
    """The 90th percentile of sorted |errors| (the value below which 90% of them lie)."""
    return errs[min(len(errs) - 1, int(0.9 * len(errs)))]


def _summary(rows: list[Row], title: str) -> Table:
    t = Table(title=title)
    for col in ("GPU", "rows", "priced", "median |error|", "p90 |error|", "not priced"):
        t.add_column(col)
    for system in [*SYSTEMS, "all"]:
        sel = [r for r in rows if system in ("all", r.system)]
        errs = sorted(abs(r.error) for r in sel if r.error is not None)
        if not sel:
            continue
        p90 = _p90(errs) if errs else None
        t.add_row(
            system,
            str(len(sel)),
            str(len(errs)),
            f"{statistics.median(errs):.1%}" if errs else "-",
            f"{p90:.1%}" if p90 is not None else "-",
            str(len(sel) - len(errs)),
        )
    return t


def _split(priced: list[tuple[dict[str, str], Row]]) -> str:
    """Median and p90 |error| of the dense and the MoE rows."""
    parts = []
    for name, moe in (("dense", False), ("MoE", True)):
        errs = sorted(abs(r.error) for rec, r in priced if (int(rec["ep"]) > 1) == moe and r.error is not None)
        parts.append(f"{name} {len(errs)} rows: median {statistics.median(errs):.1%}, p90 {_p90(errs):.1%}")
    return "; ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--all-rows", action="store_true", help="print every row, not only the summaries")
    args = ap.parse_args()
    priced = priced_rows()
    rows = [r for _, r in priced]
    console = Console(width=160)
    if args.all_rows:
        t = Table(title="Megatron-Bridge performance-summary rows")
        for col in ("container", "system", "row", "measured s", "predicted s", "error"):
            t.add_column(col)
        for r in rows:
            t.add_row(
                r.container,
                r.system,
                r.label,
                f"{r.measured_s:.2f}",
                f"{r.predicted_s:.2f}" if r.predicted_s else r.note,
                f"{r.error:+.1%}" if r.error is not None else "infeasible",
            )
        console.print(t)
    newest = [r for r in rows if r.container.startswith(NEWEST)]
    console.print(_summary(newest, f"Newest containers ({', '.join(NEWEST)}): |error| per GPU family"))
    console.print(_summary(rows, "All containers (25.09-26.08): |error| per GPU family"))
    console.print(_split(priced))
    ok, total = ordered_pairs(priced)
    console.print(
        f"same-setup pairs (container, model, GPUs, batch) ordered as measured: {ok} of {total} ({ok / total:.1%}); "
        f"ties within {PAIR_TIE:.0%} left out"
    )


if __name__ == "__main__":
    main()
