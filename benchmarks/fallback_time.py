"""Fallback plans' time (issue 36 §3): for a few training plans, including 1,000+ GPU ones, the plan's time, the
fallbacks' time beyond it (target: under 10 s for a 1,000+ GPU plan), and each scenario's preferred fallback against
the running plan. Prints two tables.

Run: .venv/bin/python benchmarks/fallback_time.py [--time-limit 60] [--only 1024]
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from optimizer.search.explain import describe
from optimizer.search.fallbacks import with_fallbacks
from optimizer.search.planner import plan
from optimizer.search.result import Fallback, PlanResult
from optimizer.spec.cluster_loading import load_cluster_yaml, resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload

# The fallbacks of a 1,000+ GPU plan in under 10 s more than the plan [issue 36 §3].
TARGET_S = 10.0
GB200 = "examples/fragmented-gb200.yaml"


def with_pods(cluster: ClusterSpec, nodes: int) -> ClusterSpec:
    """`cluster` with `nodes` nodes under each leaf switch (pod_size): a DGX SuperPOD scalable unit holds 32 DGX
    H100 nodes (NVIDIA DGX SuperPOD H100 reference architecture)."""
    pools = [NodePool.model_validate({**p.model_dump(), "pod_size": nodes}) for p in cluster.pools]
    return cluster.model_copy(update={"pools": pools})


def cases() -> list[tuple[str, str, ClusterSpec, TrainingWorkload]]:
    """(label, model, cluster, workload)."""
    with open(GB200) as f:
        gb200 = load_cluster_yaml(f.read())
    return [
        (
            "llama-3-8b, 2 GB200 NVL72 racks (112 GPUs)",
            "llama-3-8b",
            gb200,
            TrainingWorkload(global_batch_size=256, seq_len=8192),
        ),
        (
            "llama-3-70b, 128 x 8 H100 (1,024 GPUs), leaves of 32 nodes",
            "llama-3-70b",
            with_pods(resolve_cluster("dgx-h100:128"), 32),
            TrainingWorkload(global_batch_size=1024, seq_len=8192),
        ),
        (
            "llama-3.1-405b, 256 x 8 H100 (2,048 GPUs)",
            "llama-3.1-405b",
            resolve_cluster("dgx-h100:256"),
            TrainingWorkload(global_batch_size=2048, seq_len=8192),
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-limit", type=float, default=60.0, help="The plan's search time limit, seconds.")
    ap.add_argument("--only", type=str, default=None, help="Run only the cases whose label contains this.")
    args = ap.parse_args()
    console = Console(width=220)
    summary = Table(title="Fallbacks' time beyond the plan (target: < 10 s for 1,000+ GPUs)")
    for col in ("plan", "GPUs", "plan s", "fallbacks s", "scenarios", "searches", "within target"):
        summary.add_column(col, justify="left" if col == "plan" else "right")
    detail = Table(title="Each scenario's preferred fallback against the running plan")
    for col in ("plan", "loses", "step time s", "vs plan", "checkpoint", "changes"):
        detail.add_column(col, justify="right" if col in ("step time s", "vs plan") else "left")
    for label, model_name, cluster, w in cases():
        if args.only and args.only not in label:
            continue
        model = load_model_preset(model_name)
        t0 = time.perf_counter()
        result = plan(model, cluster, w, time_limit_s=args.time_limit)
        plan_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        # as a job computes them (service/jobs.py)
        found = with_fallbacks(model, cluster, w, result, None, args.time_limit).fallbacks
        fb_s = time.perf_counter() - t1
        gpus = result.plan.estimate.gpus if result.plan else 0
        scenario_count = len({(f.scenario, f.pool) for f in found})
        searches = len({tuple(sorted(f.healthy_gpus.items())) for f in found if f.searched})
        ok = "yes" if fb_s < TARGET_S else "NO"
        summary.add_row(label, str(gpus), f"{plan_s:.1f}", f"{fb_s:.1f}", str(scenario_count), str(searches), ok)
        if result.plan is not None:
            detail.add_row(label, "(running plan)", f"{result.plan.estimate.step_time_s:.3g}", "", "", _cfg(result))
        for f in found:
            if f.preferred or not any(g.preferred for g in found if g.label == f.label):
                detail.add_row("", f.label, _step(f), _delta(f), _ckpt(f), f.diff)
    console.print(summary)
    console.print(detail)


def _cfg(r: PlanResult) -> str:
    return describe(r.plan.config) if r.plan is not None else "-"


def _step(f: Fallback) -> str:
    return f"{f.step_time_s:.3g}" if f.step_time_s is not None else "-"


def _delta(f: Fallback) -> str:
    return f"{f.step_time_delta_pct:+.1f}%" if f.step_time_delta_pct is not None else "-"


def _ckpt(f: Fallback) -> str:
    if f.checkpoint_compatible:
        return "loads as is"
    cost = f"+{f.reshard_cost_s:.0f} s offline" if f.reshard_cost_s else "no offline step"
    return f"reshard ({cost})" if f.config is not None else "-"


if __name__ == "__main__":
    main()
