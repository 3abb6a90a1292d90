"""How long one cost-model estimate takes (the optimizer calls it a great deal). Prints a table.

Run: .venv/bin/python benchmarks/estimate_speed.py
"""

from __future__ import annotations

import statistics
import time

from rich.console import Console
from rich.table import Table

from optimizer.costmodel.estimate import estimate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

SCENARIOS: list[tuple[str, str, str, TrainingWorkload | InferenceWorkload, ParallelConfig]] = [
    (
        "llama-3-70b, 2 x DGX H100, tp8 pp2",
        "llama-3-70b",
        "dgx-h100:2",
        TrainingWorkload(global_batch_size=512, seq_len=4096),
        ParallelConfig(tp=8, pp=2, zero_stage=1, sequence_parallel=True, recompute="selective"),
    ),
    (
        "llama-3.1-405b, 16,384 H100, tp8 pp16 dp128 full recompute",
        "llama-3.1-405b",
        "dgx-h100:2048",
        TrainingWorkload(global_batch_size=2048, seq_len=8192),
        ParallelConfig(
            tp=8,
            pp=16,
            dp=128,
            vp=1,
            zero_stage=1,
            sequence_parallel=True,
            recompute="full",
            layers_per_stage=[7] + [8] * 14 + [7],
        ),
    ),
    (
        "mixtral-8x7b, 8 x DGX H100, tp2 ep8 dp32",
        "mixtral-8x7b",
        "dgx-h100:8",
        TrainingWorkload(global_batch_size=256, seq_len=4096),
        ParallelConfig(tp=2, dp=32, ep=8, zero_stage=1, sequence_parallel=True),
    ),
    (
        "deepseek-v3, 256 x HGX H800, pp16 ep64",
        "deepseek-v3",
        "hgx-h800:256",
        TrainingWorkload(global_batch_size=1920, seq_len=4096, precision="fp8"),
        ParallelConfig(
            tp=1, pp=16, dp=128, ep=64, zero_stage=1, recompute="full", layers_per_stage=[3] + [4] * 14 + [2]
        ),
    ),
    (
        "llama-2-70b inference, 1 x DGX H100, tp8",
        "llama-2-70b",
        "dgx-h100",
        InferenceWorkload(prompt_len=2048, output_len=256, batch=8),
        ParallelConfig(tp=8),
    ),
]


def bench(repeats: int = 2000) -> Table:
    table = Table(title="meshplan estimate: time per call (target: well under 1 ms)")
    for col in ("scenario", "GPUs", "median us", "p99 us", "calls/s", "feasible", "step/TPOT s"):
        table.add_column(col, justify="right" if col != "scenario" else "left")
    for label, model_name, cluster_name, workload, config in SCENARIOS:
        model, cluster = load_model_preset(model_name), load_cluster_preset(cluster_name)
        est = estimate(model, cluster, workload, config)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            estimate(model, cluster, workload, config)
            samples.append(time.perf_counter() - t0)
        samples.sort()
        med = statistics.median(samples)
        p99 = samples[int(0.99 * len(samples))]
        shown = est.tpot_s if est.tpot_s is not None else est.step_time_s
        table.add_row(
            label,
            str(config.gpus),
            f"{med * 1e6:.0f}",
            f"{p99 * 1e6:.0f}",
            f"{1 / med:,.0f}",
            str(est.feasible),
            f"{shown:.4g}",
        )
    return table


if __name__ == "__main__":
    Console(width=160).print(bench())
