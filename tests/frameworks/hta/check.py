"""Runs HolisticTraceAnalysis's own TraceAnalysis on a trace directory and prints its figures per rank: the temporal
breakdown (idle / compute / non-compute / kernel time), the communication-computation overlap and the kernel-type
breakdown (summed durations of COMMUNICATION, MEMORY, COMPUTATION kernels) [hta/trace_analysis.py
get_temporal_breakdown, get_comm_comp_overlap, get_gpu_kernel_breakdown].

stdin: {"trace_dirs": ["<dir>", ...], "ns_rounding": false}; each directory is one job's traces (a file per rank).
HTA rounds the timestamps of nanosecond (float) traces inward (ts up, end down) by default
[hta/common/trace_parser.py round_down_time_stamps]; "ns_rounding": false sets its own switch
HTA_DISABLE_NS_ROUNDING=1 [hta/configs/env_options.py] so both sides read the same times.
Runs under the pinned environment (tests/frameworks/hta/requirements.txt), not the project's."""

import json
import logging
import math
import os
import sys
import warnings


def main() -> dict:
    payload = json.loads(sys.stdin.read())
    if not payload.get("ns_rounding", False):
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    return {d: figures(d) for d in payload["trace_dirs"]}


def figures(trace_dir: str) -> dict:
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=trace_dir)
    temporal = analysis.get_temporal_breakdown(visualize=False)
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    ranks: dict = {}
    for row in temporal.to_dict("records"):
        ranks[str(int(row["rank"]))] = {
            "idle_us": float(row["idle_time(us)"]),
            "compute_us": float(row["compute_time(us)"]),
            "non_compute_us": float(row["non_compute_time(us)"]),
            "kernel_time_us": float(row["kernel_time(us)"]),
        }
    for row in overlap.to_dict("records"):
        pct = float(row["comp_comm_overlap_pctg"])  # rounded to 0.01% by HTA
        ranks[str(int(row["rank"]))]["overlap_ratio"] = None if math.isnan(pct) else pct / 100
    # per rank: the kernel table's rows (one per kernel name and rank) summed by kernel_type
    _, per_kernel = analysis.get_gpu_kernel_breakdown(
        visualize=False, include_memory_kernels=True, num_kernels=10**9, duration_ratio=1.0
    )
    for row in per_kernel.to_dict("records"):
        sums = ranks[str(int(row["rank"]))].setdefault("type_sums_us", {})
        sums[row["kernel_type"]] = sums.get(row["kernel_type"], 0.0) + float(row["sum (us)"])
    return ranks


if __name__ == "__main__":
    try:
        result = main()
    except Exception as exc:  # what HTA said, for the harness's Rejected
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
    else:
        print(json.dumps({"ok": True, "result": result}))
