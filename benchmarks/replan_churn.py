"""Re-plans that do not churn (issue 38 §3): replay a 60-night inventory trace of a watched training job and print,
night by night, what the keep-or-switch rule (optimizer/search/keep_or_switch.py) decided, then the totals.

The trace (seeded): Llama-3-70B, global batch 1024 x 4096 tokens, Megatron, on 64 DGX H100 nodes (8 racks of 8).
Every night each healthy node fails with probability FAIL_P and a failed node is repaired after 1-3 nights; rack
DRAIN_RACK is drained for maintenance on nights DRAIN_NIGHTS; a pool of 8 more nodes joins on night ADD_NIGHT.
Each night the planner re-plans (top 1, a short time limit, warm-started from the running layout) and the rule
decides against the running layout with the default 5% threshold.

Totals: layout changes (nights whose running layout differs from the night before's), switches whose gain lay
inside its interval (the interval reaches below no gain; target 0), switches below the threshold (target 0), and
the throughput lost by keeping (sum over kept nights of t_running / t_new - 1, predicted).

Run: .venv/bin/python benchmarks/replan_churn.py [--nights 60] [--seed 38] [--time-limit 5]
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from optimizer.search.explain import describe
from optimizer.search.keep_or_switch import decide, gain_words, priced
from optimizer.search.planner import plan
from optimizer.search.replan_decision import DEFAULT_SWITCH_THRESHOLD_PCT, ReplanDecision
from optimizer.search.result import PlannedConfig
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import TrainingWorkload

NODES, RACK = 64, 8
# Nightly failure probability of a node: ~1% gives about 0.6 failures a night on 64 nodes, the order of the
# Llama 3 405B pre-training's 419 unexpected interruptions in 54 days on 16,384 GPUs (2,048 nodes): 0.4% of nodes
# a day [Llama 3 paper, arXiv 2407.21783 §3.3.4], doubled so that the trace has events.
FAIL_P = 0.01
REPAIR_NIGHTS = (1, 3)
DRAIN_RACK, DRAIN_NIGHTS = 3, range(20, 24)
ADD_NIGHT, ADD_NODES = 45, 8


@dataclass
class Night:
    """One night of the trace."""

    night: int
    event: str
    cluster: ClusterSpec


def trace(nights: int, seed: int) -> list[Night]:
    """The inventory of every night (failures and repairs seeded, the drain and the added pool fixed)."""
    rng = random.Random(seed)
    base = load_cluster_preset(f"dgx-h100:{NODES}").model_dump()
    pool = base["pools"][0]
    names = [f"{pool['name']}-{i:03d}" for i in range(NODES)]
    back_on: dict[str, int] = {}
    out = []
    for n in range(nights):
        events = []
        for name, night in list(back_on.items()):
            if night == n:
                del back_on[name]
                events.append(f"{name[-3:]} back")
        for name in names:
            if name not in back_on and rng.random() < FAIL_P:
                back_on[name] = n + rng.randint(*REPAIR_NIGHTS)
                events.append(f"{name[-3:]} failed")
        states: dict[str, Any] = dict.fromkeys(back_on, "failed")
        if n in DRAIN_NIGHTS:
            for name in names[DRAIN_RACK * RACK : (DRAIN_RACK + 1) * RACK]:
                states.setdefault(name, "drained")
        if n == DRAIN_NIGHTS.start:
            events.append(f"rack {DRAIN_RACK} drained")
        if n == DRAIN_NIGHTS.stop:
            events.append(f"rack {DRAIN_RACK} back")
        doc = {**base, "pools": [{**pool, "node_states": states}]}
        if n >= ADD_NIGHT:
            doc["pools"].append({**pool, "name": "h100-b", "nodes": ADD_NODES, "node_states": {}})
        if n == ADD_NIGHT:
            events.append(f"+{ADD_NODES} nodes (pool h100-b)")
        out.append(Night(n, ", ".join(events) or "-", ClusterSpec.model_validate(doc)))
    return out


def interval_words(d: ReplanDecision) -> str:
    """'1.2% (interval -3..+5%)', or '-' when nothing was weighed."""
    if d.gain is None or d.gain_interval is None:
        return "-"
    return gain_words(d.gain, d.gain_interval).removeprefix("gain ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=60)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--time-limit", type=float, default=5.0, help="Planner time limit per night, seconds.")
    args = ap.parse_args()
    model: ModelSpec = load_model_preset("llama-3-70b")
    w = TrainingWorkload(global_batch_size=1024, seq_len=4096, framework="megatron")
    started = time.monotonic()
    table = Table(title="Nightly re-plans (keep-or-switch, threshold 5%)")
    for col in ("night", "event", "healthy GPUs", "decision", "running layout", "step s", "gain (interval)"):
        table.add_column(col, justify="right" if col in ("night", "healthy GPUs", "step s") else "left")
    running: PlannedConfig | None = None
    changes = reshapes = optimum_moves = inside = below = 0
    lost, kept = 0.0, 0
    last_optimum = None
    for night in trace(args.nights, args.seed):
        cluster = night.cluster
        new = plan(
            model, cluster, w, top_k=1, time_limit_s=args.time_limit, warm_start=running.config if running else None
        ).plan
        assert new is not None, f"night {night.night}: no plan"
        if last_optimum is not None and new.config != last_optimum:
            optimum_moves += 1
        last_optimum = new.config
        if running is None:
            running = new
            table.add_row(
                str(night.night), night.event, str(cluster.healthy_gpus), "first plan",
                describe(new.config), f"{new.estimate.step_time_s:.3f}", "-",
            )  # fmt: skip
            continue
        d = decide(model, cluster, w, running.config, new, DEFAULT_SWITCH_THRESHOLD_PCT)
        if d.config != running.config:
            changes += 1
            main_knobs = ("tp", "pp", "cp", "ep")
            reshapes += any(getattr(d.config, k) != getattr(running.config, k) for k in main_knobs)
        if d.outcome == "switched" and d.gain is not None and d.gain_interval is not None:
            inside += d.gain_interval[0] <= 0
            below += 100 * d.gain <= DEFAULT_SWITCH_THRESHOLD_PCT
        if d.outcome == "kept" and d.gain is not None:
            lost, kept = lost + d.gain, kept + 1
        running = new if d.config == new.config else priced(model, cluster, w, d.config)
        table.add_row(
            str(night.night), night.event, str(cluster.healthy_gpus), d.outcome, describe(d.config),
            f"{running.estimate.step_time_s:.3f}", interval_words(d),
        )  # fmt: skip
    console = Console(width=200)
    console.print(table)
    console.print(
        f"layout changes: {changes} ({reshapes} reshaping tp, pp, cp or ep); optimum moved {optimum_moves} nights"
    )
    console.print(f"switches whose gain was inside its interval: {inside} (target 0)")
    console.print(f"switches below the {DEFAULT_SWITCH_THRESHOLD_PCT:g}% threshold: {below} (target 0)")
    console.print(
        f"throughput lost by keeping (sum over kept nights of t_running / t_new - 1, predicted): {100 * lost:.1f}% "
        f"over {kept} kept nights (mean {100 * lost / max(1, kept):.1f}% a night)"
    )
    console.print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
