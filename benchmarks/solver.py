"""Planner speed on the issue's scenarios: status, solve time (median of 3), the plan, and the exhaustive
oracle's time (it runs only where it can finish within 2 minutes; otherwise a lower bound on its time). Prints a
table.

Run: .venv/bin/python benchmarks/solver.py [--runs 3] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import statistics
import time
from pathlib import Path
from string import Template

from rich.console import Console
from rich.table import Table

from optimizer.costmodel.estimate import estimate
from optimizer.search.candidates import TrainingSpace
from optimizer.search.explain import describe
from optimizer.search.oracle import oracle_evaluations_lower_bound, oracle_plan
from optimizer.search.planner import plan
from optimizer.search.result import PlanResult
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_loading import load_cluster_yaml, resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def h100_a100_l40s_yaml(name: str, h100_nodes: int, a100_nodes: int, l40s_nodes: int) -> str:
    """A cluster of H100 (NVLink, 8 x 400 Gb/s), A100 (NVLink, 8 x 200 Gb/s) and L40S (PCIe 4, 2 x 200 Gb/s) nodes,
    as YAML."""
    return Template("""
name: $name
pools:
  - {name: h100, gpu: H100-SXM-80GB, nodes: $h100_nodes, gpus_per_node: 8,
     intra_node: {kind: nvlink, gbytes_per_s: 450, domain_size: 8}, inter_node: {nics_per_node: 8, gbits_per_s: 400}}
  - {name: a100, gpu: A100-SXM-80GB, nodes: $a100_nodes, gpus_per_node: 8,
     intra_node: {kind: nvlink, gbytes_per_s: 300, domain_size: 8}, inter_node: {nics_per_node: 8, gbits_per_s: 200}}
  - {name: l40s, gpu: L40S-48GB, nodes: $l40s_nodes, gpus_per_node: 4,
     intra_node: {kind: pcie, pcie_gen: 4}, inter_node: {nics_per_node: 2, gbits_per_s: 200}}
""").substitute(name=name, h100_nodes=h100_nodes, a100_nodes=a100_nodes, l40s_nodes=l40s_nodes)


HETERO = h100_a100_l40s_yaml("hetero-h100-a100-l40s", h100_nodes=16, a100_nodes=32, l40s_nodes=16)

TWO_POOLS = """
name: serve-h100-a100
pools:
  - {name: h100, gpu: H100-SXM-80GB, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 2.5,
     inter_node: {nics_per_node: 8, gbits_per_s: 400}}
  - {name: a100, gpu: A100-SXM-80GB, nodes: 4, gpus_per_node: 8, price_per_gpu_hour: 1.3,
     inter_node: {nics_per_node: 8, gbits_per_s: 200}}
"""


def scenarios() -> list[tuple[str, str, ClusterSpec, TrainingWorkload | InferenceWorkload, str]]:
    """(label, model, cluster, workload, target)."""
    return [
        (
            "(1) llama-3-70b train, 2 x 8 H100",
            "llama-3-70b",
            resolve_cluster("dgx-h100:2"),
            TrainingWorkload(global_batch_size=512, seq_len=4096),
            "< 1 s",
        ),
        (
            "(2) llama-3.1-405b train, 2048 x 8 H100",
            "llama-3.1-405b",
            resolve_cluster("dgx-h100:2048"),
            TrainingWorkload(global_batch_size=2048, seq_len=8192),
            "< 1 s",
        ),
        (
            "(3) llama-2-70b train, H100+A100+L40S",
            "llama-2-70b",
            load_cluster_yaml(HETERO),
            TrainingWorkload(global_batch_size=512, seq_len=4096),
            "<= 2 s",
        ),
        (
            "(4a) llama-2-70b serve, 1 x 8 H100",
            "llama-2-70b",
            resolve_cluster("dgx-h100"),
            InferenceWorkload(prompt_len=2048, output_len=256, batch=8),
            "< 1 s",
        ),
        (
            "(4b) llama-2-70b serve, 4 x 2 L40S PCIe",
            "llama-2-70b",
            resolve_cluster("l40s-pcie:4"),
            InferenceWorkload(prompt_len=2048, output_len=256, batch=8),
            "< 1 s",
        ),
        (
            "(6a) llama-3-70b SLA 20 req/s, H100 + A100, cheapest",
            "llama-3-70b",
            load_cluster_yaml(TWO_POOLS),
            InferenceWorkload(prompt_len=2048, output_len=512, rate=20, ttft_ms=1500, tpot_ms=50, objective="cost"),
            "< 1 s",
        ),
        (
            "(6b) llama-3-8b SLA most req/s, H100 + A100",
            "llama-3-8b",
            load_cluster_yaml(TWO_POOLS),
            InferenceWorkload(prompt_len=1024, output_len=256, ttft_ms=500, tpot_ms=30, objective="max_rate"),
            "< 1 s",
        ),
        (
            "(7) llama-3-8b train, cheapest per step, examples/priced-cluster.yaml",
            "llama-3-8b",
            load_cluster_yaml(Path("examples/priced-cluster.yaml").read_text()),
            TrainingWorkload(global_batch_size=64, seq_len=4096, objective="cost"),
            "< 2 s",
        ),
        (
            "(5a) mixtral-8x7b train, 8 x 8 H100",
            "mixtral-8x7b",
            resolve_cluster("dgx-h100:8"),
            TrainingWorkload(global_batch_size=256, seq_len=4096),
            "< 1 s",
        ),
        (
            "(5b) deepseek-v3 train fp8, 256 x 8 H800",
            "deepseek-v3",
            resolve_cluster("hgx-h800:256"),
            TrainingWorkload(global_batch_size=15360, seq_len=4096, precision="fp8"),
            "< 1 s",
        ),
    ]


ORACLE_LIMIT_S = 120


def _out_of_time(signum: int, frame: object) -> None:
    raise TimeoutError


def oracle_note(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload | InferenceWorkload, r: PlanResult) -> str:
    """The exhaustive oracle's time: run when its work fits in ORACLE_LIMIT_S (cut there if it runs longer), else
    a lower bound on it (its `estimate` calls, counted without enumerating them, x the measured time of one call)."""
    if not isinstance(w, TrainingWorkload):
        if w.sla_plan:
            return "brute force over replica counts in test_serving_sla.py (4 shapes, 2 pools)"
        return "not run at this size: the serving oracle is checked on small instances (test_serving_oracle.py)"
    ts = TrainingSpace(model, cluster, w, SearchSpace())
    calls = oracle_evaluations_lower_bound(ts)
    probe = (r.plan.config if r.plan else None) or ParallelConfig(tp=8, pp=1)
    t0, n = time.perf_counter(), 50
    for _ in range(n):
        with contextlib.suppress(Exception):  # a probe that breaks a rule still measures the call's cost
            estimate(model, cluster, w, probe)
    per_call = (time.perf_counter() - t0) / n
    floor_s = calls * per_call
    if floor_s > ORACLE_LIMIT_S:
        return f"not run: >= {calls:.3g} estimates x {per_call * 1e3:.2f} ms >= {floor_s / 3600:.3g} h"
    t0 = time.perf_counter()
    # The floor times one call on the plan's own configuration; deeper pipelines cost more per call, so the run is
    # also cut at ORACLE_LIMIT_S of wall clock (SIGALRM interrupts the enumeration).
    previous = signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(ORACLE_LIMIT_S)
    try:
        best = oracle_plan(model, cluster, w)
    except TimeoutError:
        return f"stopped after {ORACLE_LIMIT_S} s (>= {calls:.3g} estimates)"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    took = time.perf_counter() - t0
    agree = (best is None and r.plan is None) or (
        best is not None and r.objective_value is not None and abs(best[0] - r.objective_value) < 1e-6
    )
    return f"{took:.1f} s, {'agrees' if agree else 'DIFFERS'}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", type=str, default=None, help="Run scenarios whose label contains this text.")
    args = ap.parse_args()
    table = Table(title=f"meshplan plan: median of {args.runs} runs, time limit {args.time_limit:g} s")
    for col in ("scenario", "status", "solve s (median)", "target", "objective", "plan", "candidates", "oracle"):
        table.add_column(col)
    for label, model_name, cluster, workload, target in scenarios():
        if args.only and args.only not in label:
            continue
        model = load_model_preset(model_name)
        times, result = [], None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            result = plan(model, cluster, workload, top_k=3, time_limit_s=args.time_limit)
            times.append(time.perf_counter() - t0)
        assert result is not None
        status = result.status + (f" gap {result.gap:.1%}" if result.gap else "")
        obj = f"{result.objective_value:.4g} {result.objective}" if result.objective_value else "-"
        shown = (
            ", ".join(f"{g.count}x {g.shape.pool} tp{g.shape.tp}" for g in result.fleet.groups)
            if result.fleet
            else describe(result.plan.config)
            if result.plan
            else (
                result.explanation.infeasible.suggestions[0].change
                if result.explanation.infeasible and result.explanation.infeasible.suggestions
                else "none"
            )
        )
        table.add_row(
            label,
            status,
            f"{statistics.median(times):.2f}",
            target,
            obj,
            shown,
            f"{result.candidates_solved}/{result.candidates_total}",
            oracle_note(model, cluster, workload, result),
        )
    Console(width=240).print(table)


if __name__ == "__main__":
    main()
