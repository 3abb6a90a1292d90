"""The requests a latency simulation runs (costmodel/serving_sim.py): each one's prompt and output tokens (the
user's trace, a named dataset's measured distribution, or gamma lengths at the workload's means) and the open-loop
arrival times, as the benchmarks send them [issue 55 §1]."""

from __future__ import annotations

import numpy as np

from optimizer.costmodel.request_lengths import draw_lengths
from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload
from optimizer.spec.workload_trace import TraceRequest


def gamma_lengths(rng: np.random.Generator, mean: int, cv: float, n: int) -> np.ndarray:
    """n lengths of mean `mean` and coefficient of variation `cv` (gamma), at least 1 token."""
    if cv <= 0:
        return np.full(n, mean, dtype=np.int64)
    shape = 1.0 / cv**2
    return np.maximum(1, np.rint(rng.gamma(shape, mean / shape, n))).astype(np.int64)


def request_lengths(
    w: InferenceWorkload, rng: np.random.Generator, n: int, trace: tuple[TraceRequest, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """n requests' (prompt, output) tokens: the trace's own in its order (`trace`, else the workload's; repeated from
    its start when more are asked for), a named dataset's draw, else gamma lengths at the workload's means and
    spreads."""
    trace = trace if trace is not None else w.workload_trace
    if trace is not None:
        idx = np.arange(n) % len(trace)
        p = np.array([r.input_tokens for r in trace], dtype=np.int64)
        o = np.array([r.output_tokens for r in trace], dtype=np.int64)
        return p[idx], o[idx]
    if w.length_distribution is not None:
        return draw_lengths(w.length_distribution, rng, n, w.prompt_len, w.output_len)
    return gamma_lengths(rng, w.prompt_len, w.prompt_len_cv, n), gamma_lengths(rng, w.output_len, w.output_len_cv, n)


def check_fits(prompts: np.ndarray, outputs: np.ndarray, capacity: float, field: str) -> None:
    """Every request's prompt and output within the replica's KV cache: the engines refuse a longer one (vLLM: longer
    than max_model_len) rather than queue it, and the simulation would wait for it forever."""
    too_long = np.flatnonzero(prompts + outputs > capacity)
    if too_long.size:
        i = int(too_long[0])
        raise DomainError(
            field,
            f"request {i + 1} (in arrival order) needs {int(prompts[i] + outputs[i]):,} tokens of KV cache, more than "
            f"the replica holds ({capacity:,.0f})",
        )


def open_loop_arrivals(rng: np.random.Generator, rate: float, n: int, burstiness: float | None) -> list[float]:
    """Arrival times at `rate`: Poisson, or as `vllm bench serve --burstiness b` draws them (vllm/benchmarks/serve.py
    get_request, vllm-project/vllm 009e6d4a: gamma intervals of shape b and scale 1 / (rate b), then scaled so the
    last arrival falls at n / rate)."""
    if burstiness is None:
        return [float(x) for x in np.cumsum(rng.exponential(1.0 / rate, n))]
    t = np.cumsum(rng.gamma(burstiness, 1.0 / (rate * burstiness), n))
    if t[-1] > 0:
        t = t * (n / rate / t[-1])
    return [float(x) for x in t]
