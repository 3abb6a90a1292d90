"""Latency percentiles of one serving replica: a discrete-event simulation of the engine's continuous batching over
its step model [issue 39].

Each engine iteration is the step every other serving path prices (serving_load.ReplicaLoad.iteration_s: decodes
from a CUDA graph within the capture limit, the prefill tokens beside them, the engine's host time), tabulated once
on a grid of (decoding sequences, prefill tokens) and read by bilinear interpolation so that thousands of iterations
cost milliseconds. The scheduler is the engines': a FIFO queue of prompts; an iteration carries every running
sequence one token and prefill chunks up to the token budget that is left (vLLM V1 `Scheduler.schedule`: running
requests first, then waiting ones within max_num_batched_tokens; TensorRT-LLM in-flight batching), or, for SGLang
(no mixed chunks by default, server_args.py enable_mixed_chunk False), a prefill batch alone whenever prompts wait
and there is room (`Scheduler.get_next_batch_to_run`: a new prefill batch before decoding). A prompt is admitted
while the running sequences stay within max_seqs and the KV cache (ReplicaLoad.max_decoding). The first token is
emitted by the iteration that finishes a prompt's prefill; TPOT is a request's (last token - first token) / (output
- 1), as `vllm bench serve` and `sglang.bench_serving` report it.

Arrivals: open loop (Poisson at `rate` requests/s, what `--request-rate R` sends) or closed loop (`concurrency` users,
each sending its next request when the previous one completes, no think time: `--max-concurrency N` with an
unbounded rate). Lengths: the workload's means, gamma-distributed at its coefficients of variation. The seed is
fixed, so one configuration gives one answer.
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass

import numpy as np

from optimizer.costmodel.result import LatencyPercentiles, LoadLatency
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.errors import DomainError

REQUESTS = 1200  # simulated requests per estimate (the first WARMUP_SHARE not scored: the empty start)
WARMUP_SHARE = 0.1
SEED = 20261125
STABLE_SLOPE = 0.02  # TTFT growth, s per s of arrivals, above which the open-loop queue is taken as unbounded
_DECODE_POINTS = 18
_PREFILL_POINTS = 10


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


class _StepTable:
    """iteration_s(decoding, prefill_tokens) on a grid, read by bilinear interpolation (the step is smooth in both
    but for the CUDA-graph limit, which is a grid line)."""

    def __init__(self, load: ReplicaLoad, max_decoding: float, max_prefill: float) -> None:
        top = max(1, math.ceil(max_decoding))
        d = {0, 1, top}
        d.update(round(x) for x in np.geomspace(1, top, _DECODE_POINTS))
        graph = load.limits.graph_max_batch * load.ranks * load.c.pp
        if 0 < graph < top:
            d.update((graph, graph + 1))
        ptop = max(1, math.ceil(max_prefill))
        q = {0, 1, ptop}
        q.update(round(x) for x in np.geomspace(1, ptop, _PREFILL_POINTS))
        if load.w.prompt_len <= ptop:
            q.add(load.w.prompt_len)  # a lone prompt's prefill read exactly
        self.d = np.array(sorted(d), dtype=float)
        self.q = np.array(sorted(q), dtype=float)
        self.t = np.array([[load.iteration_s(float(a), float(b)) for b in self.q] for a in self.d])

    def __call__(self, decoding: float, prefill: float) -> float:
        i = min(int(np.searchsorted(self.d, decoding, side="right")) - 1, len(self.d) - 2)
        j = min(int(np.searchsorted(self.q, prefill, side="right")) - 1, len(self.q) - 2)
        i, j = max(i, 0), max(j, 0)
        d0, d1, q0, q1 = self.d[i], self.d[i + 1], self.q[j], self.q[j + 1]
        u = 0.0 if d1 == d0 else (decoding - d0) / (d1 - d0)
        v = 0.0 if q1 == q0 else (prefill - q0) / (q1 - q0)
        t = self.t
        return float(
            (1 - u) * (1 - v) * t[i, j]
            + u * (1 - v) * t[i + 1, j]
            + (1 - u) * v * t[i, j + 1]
            + u * v * t[i + 1, j + 1]
        )


def _lengths(rng: np.random.Generator, mean: int, cv: float, n: int) -> np.ndarray:
    """n lengths of mean `mean` and coefficient of variation `cv` (gamma), at least 1 token."""
    if cv <= 0:
        return np.full(n, mean, dtype=np.int64)
    shape = 1.0 / cv**2
    return np.maximum(1, np.rint(rng.gamma(shape, mean / shape, n))).astype(np.int64)


@dataclass
class _Request:
    arrival: float
    prompt: int
    output: int
    prefilled: int = 0
    first: float = math.nan
    done: float = math.nan


def simulate(
    load: ReplicaLoad,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    requests: int = REQUESTS,
    seed: int = SEED,
) -> LatencyReport:
    """TTFT and TPOT percentiles of `load`'s replica under `rate` requests/s (open loop) or `concurrency` users
    (closed loop); exactly one of the two."""
    if (rate is None) == (concurrency is None):
        raise DomainError("workload.rate", "give a request rate or a concurrency, not both")
    if rate is not None and not rate > 0:
        raise DomainError("workload.rate", f"must be > 0 requests/s (got {rate})")
    if concurrency is not None and concurrency < 1:
        raise DomainError("workload.concurrency", f"must be >= 1 user (got {concurrency})")
    if load.decode_only:
        raise DomainError("workload", "latency percentiles simulate an aggregated replica (prefill and decode)")
    w, lim = load.w, load.limits
    cap = math.floor(load.max_decoding)
    if cap < 1:
        raise DomainError("workload", "the replica holds no sequence in its KV cache: no latency to report")
    rng = np.random.default_rng(seed)
    prompts = _lengths(rng, w.prompt_len, w.prompt_len_cv, requests)
    outputs = _lengths(rng, w.output_len, w.output_len_cv, requests)
    budget = float(lim.max_batched_tokens)
    chunked = lim.chunked_prefill
    max_prefill = budget if chunked else max(budget, float(prompts.max()))
    step = _StepTable(load, float(cap), max_prefill)

    if rate is not None:
        arrivals = np.cumsum(rng.exponential(1.0 / rate, requests)).tolist()
    else:
        # Closed loop: the users' first requests are spread over one lone request's latency (users do not start
        # in lockstep); each later request is sent when its user's previous one completes.
        users = min(int(concurrency or 1), requests)
        lone = step(0.0, float(w.prompt_len)) + max(0, w.output_len - 1) * step(1.0, 0.0)
        arrivals = [k * lone / users for k in range(users)]
    reqs: list[_Request] = []
    waiting: list[_Request] = []  # FIFO: admitted in order
    sent = 0
    running: list[tuple[int, int, _Request]] = []  # heap of (decode count at which it finishes, tie, request)
    prefilling: list[_Request] = []  # admitted, prefill not finished (hold their KV)
    decodes = 0  # decode iterations so far: a running sequence finishes when this reaches its mark
    now, done, tie = 0.0, 0, 0
    busy_decoding = 0.0
    iterations = 0
    next_arrival = 0  # index into arrivals

    def arrive_until(t: float) -> None:
        nonlocal next_arrival, sent
        while next_arrival < len(arrivals) and arrivals[next_arrival] <= t:
            r = _Request(arrivals[next_arrival], int(prompts[sent]), int(outputs[sent]))
            reqs.append(r)
            waiting.append(r)
            next_arrival += 1
            sent += 1

    def finish(r: _Request, t: float) -> None:
        nonlocal done
        r.done = t
        done += 1
        if concurrency is not None and len(arrivals) < requests:
            bisect.insort(arrivals, t, lo=next_arrival)  # the user sends its next request at once

    while done < requests:
        arrive_until(now)
        if not running and not prefilling and not waiting:
            if next_arrival >= len(arrivals):
                break
            now = arrivals[next_arrival]
            continue
        # Admission: FIFO while the running and prefilling sequences stay within the limits.
        while waiting and len(running) + len(prefilling) < cap:
            prefilling.append(waiting.pop(0))
        n_dec = len(running)
        if not prefilling and not waiting:
            # Decodes alone: the same iteration repeats until a sequence finishes or a request arrives; run them
            # in one go (the arrival is admitted after the iteration it falls in).
            dt = step(float(n_dec), 0.0)
            k = running[0][0] - decodes
            if next_arrival < len(arrivals):
                k = min(k, max(1, math.ceil((arrivals[next_arrival] - now) / dt)))
            k = max(1, k)
            now += k * dt
            decodes += k
            busy_decoding += n_dec * k
            iterations += k
            while running and running[0][0] <= decodes:
                _, _, r = heapq.heappop(running)
                finish(r, now)
            continue
        mixed = lim.mixes_prefill
        # The prefill this iteration carries: the budget left after the decodes (mixing engines), or a prefill
        # batch alone (SGLang) when prompts are admitted.
        room = max(1.0, budget - n_dec) if mixed else budget
        chunks: list[tuple[_Request, int]] = []
        if prefilling:
            for r in prefilling:
                need = r.prompt - r.prefilled
                if not chunked:
                    if chunks and need > room:
                        break
                    take = need
                else:
                    take = int(min(need, room))
                if take <= 0:
                    break
                chunks.append((r, take))
                room -= take
                if room < 1:
                    break
        decode_now = mixed or not chunks
        tokens = float(sum(t for _, t in chunks))
        dt = step(float(n_dec) if decode_now else 0.0, tokens)
        now += dt
        iterations += 1
        if decode_now and n_dec:
            busy_decoding += n_dec
            decodes += 1
            while running and running[0][0] <= decodes:
                _, _, r = heapq.heappop(running)
                finish(r, now)
        for r, take in chunks:
            r.prefilled += take
            if r.prefilled >= r.prompt:
                prefilling.remove(r)
                r.first = now  # the prefill's iteration emits the first token
                if r.output <= 1:
                    finish(r, now)
                else:
                    tie += 1
                    heapq.heappush(running, (decodes + r.output - 1, tie, r))
        if next_arrival >= len(arrivals) and not waiting and not prefilling and not running:
            break

    scored = [r for r in reqs[int(len(reqs) * WARMUP_SHARE) :] if not math.isnan(r.done)]
    ttft = [r.first - r.arrival for r in scored]
    tpot = [(r.done - r.first) / (r.output - 1) for r in scored if r.output > 1]
    span = max(1e-12, max(r.done for r in scored) - min(r.arrival for r in scored))
    out_tokens = sum(int(r.output) for r in scored)
    # Open loop: stable when the queue does not grow. An overloaded replica's TTFT climbs with the arrival time at
    # (1 - capacity / rate) seconds per second; a stable one's does not trend. Stable when the fitted slope stays
    # below STABLE_SLOPE.
    stable = True
    if rate is not None and len(ttft) >= 20:
        slope = float(np.polyfit([r.arrival for r in scored], ttft, 1)[0])
        stable = slope < STABLE_SLOPE
    return LatencyReport(
        ttft=Percentiles.of(ttft),
        tpot=Percentiles.of(tpot if tpot else [0.0]),
        request_rate=len(scored) / span,
        output_tokens_per_s=out_tokens / span,
        mean_decoding=busy_decoding / max(1, iterations),
        stable=stable,
    )


def load_latency(load: ReplicaLoad, replicas: int) -> LoadLatency:
    """The percentiles of the workload's own load (rate over the whole fleet, or its users), spread evenly over
    `replicas`."""
    w = load.w
    rate = w.rate / replicas if w.rate is not None else None
    users = w.concurrency / replicas if w.concurrency is not None else None
    rep = simulate(load, rate=rate, concurrency=None if users is None else max(1, round(users)))
    return LoadLatency(
        replicas=replicas,
        rate_per_replica=rate,
        users_per_replica=users,
        ttft=_percentiles(rep.ttft),
        tpot=_percentiles(rep.tpot),
        request_rate=rep.request_rate,
        output_tokens_per_s=rep.output_tokens_per_s,
        sustained=rep.stable,
    )


def _percentiles(p: Percentiles) -> LatencyPercentiles:
    return LatencyPercentiles(mean_s=p.mean, p50_s=p.p50, p90_s=p.p90, p99_s=p.p99)
