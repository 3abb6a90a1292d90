"""The fit behind the two calibrated serving constants (optimizer/costmodel/constants.py): the share of HBM
bandwidth paged decode attention reaches, and each engine's exposed host time per iteration, on a grid, scored on
the serving rows of accuracy/data/serving_runs.json (TensorRT-LLM v0.6 static-batch rows left out: no scheduler).
Prints median and max |error| per engine and grid point; the shipped values are marked.

Run: .venv/bin/python benchmarks/serving_fit.py [--engine trtllm] (about 8 minutes for trtllm)
"""

from __future__ import annotations

import argparse
import statistics

from rich.console import Console
from rich.table import Table

from accuracy.serving_runs import SKIPPED, load_serving_records, predict_serving
from optimizer.costmodel import constants
from optimizer.costmodel.constants import DECODE_ATTENTION_HBM_SHARE, ENGINE_ITERATION_OVERHEAD_S

SHARES = (1.0, 0.8, 0.7, 0.6)
HOST_S = (0.0, 0.002, 0.004, 0.006, 0.008, 0.010)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default=None, help="vllm, sglang or trtllm (default: all three)")
    args = ap.parse_args()
    _, records = load_serving_records()
    shipped = dict(ENGINE_ITERATION_OVERHEAD_S)  # the grid below mutates the shared table; restored at the end
    table = Table(title="Serving constants: grid fit")
    for col in ("engine", "decode attention HBM share", "host s / iteration", "figures", "median |error|", "max"):
        table.add_column(col)
    try:
        for engine in [args.engine] if args.engine else ["trtllm", "sglang", "vllm"]:
            rows = [r for r in records if r["engine"] == engine and r["source"] != "trtllm_performance_v061"]
            for share in SHARES:
                for host in HOST_S:
                    constants.DECODE_ATTENTION_HBM_SHARE = share  # read by costmodel/inference.py at each call
                    ENGINE_ITERATION_OVERHEAD_S[engine] = host  # the table serving_load reads
                    cases = [c for r in rows for c in predict_serving(r) if (c.id, c.metric) not in SKIPPED]
                    errs = [abs(c.error) for c in cases]
                    mark = share == DECODE_ATTENTION_HBM_SHARE and host == shipped[engine]
                    table.add_row(
                        engine,
                        f"{share:g}",
                        f"{host * 1000:g} ms" + (" (shipped)" if mark else ""),
                        str(len(cases)),
                        f"{statistics.median(errs):.1%}",
                        f"{max(errs):.1%}",
                        style="bold" if mark else "",
                    )
    finally:
        constants.DECODE_ATTENTION_HBM_SHARE = DECODE_ATTENTION_HBM_SHARE
        ENGINE_ITERATION_OVERHEAD_S.update(shipped)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
