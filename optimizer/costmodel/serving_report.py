"""What the latency simulation reports (costmodel/serving_sim.py): each latency's mean and percentiles, and a
replica's rates under the load [issue 39, issue 55 §1]."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Percentiles:
    """mean, median, p90 and p99 of one latency, seconds."""

    mean: float
    p50: float
    p90: float
    p99: float

    @staticmethod
    def of(values: list[float]) -> Percentiles:
        a = np.asarray(values, dtype=float)
        p50, p90, p99 = (float(x) for x in np.percentile(a, [50, 90, 99]))
        return Percentiles(float(a.mean()), p50, p90, p99)

    @staticmethod
    def weighted(values: list[float], weights: list[float]) -> Percentiles:
        """Of `values` each repeated `weights` times (the inverted empirical CDF, numpy's 'inverted_cdf')."""
        if not values:
            return Percentiles(0.0, 0.0, 0.0, 0.0)
        v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
        order = np.argsort(v, kind="stable")
        v, cum = v[order], np.cumsum(w[order])
        at = [float(v[min(len(v) - 1, int(np.searchsorted(cum, q * cum[-1])))]) for q in (0.5, 0.9, 0.99)]
        return Percentiles(float(np.dot(v, w[order]) / cum[-1]), *at)


@dataclass(frozen=True)
class LatencyReport:
    """What a load gives a replica's requests."""

    ttft: Percentiles
    tpot: Percentiles
    request_rate: float
    """Completed requests per second (the offered rate in open loop, what the users reach in closed loop)."""
    output_tokens_per_s: float
    mean_decoding: float
    """Mean sequences per iteration."""
    stable: bool
    """False when the open-loop queue kept growing (the rate is above what the replica sustains)."""
    evictions: int = 0
    """Requests evicted from the KV cache and recomputed (vLLM preemption, SGLang retraction)."""
    peak_running: int = 0
    """Most sequences admitted at once (running and prefilling)."""
    itl: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    """Inter-token latency: every gap between two consecutive output tokens of the scored requests' decode
    iterations, pooled over requests (`vllm bench serve` ITL)."""
    e2e: Percentiles = Percentiles(0.0, 0.0, 0.0, 0.0)
    """End-to-end latency: arrival to the last token."""
