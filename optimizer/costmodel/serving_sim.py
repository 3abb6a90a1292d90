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

Arrivals: open loop (Poisson at `rate` requests/s, what `--request-rate R` sends; gamma of shape `burstiness` as
`--burstiness` draws them), closed loop (`concurrency` users, each sending its next request when the previous one
completes, no think time: `--max-concurrency N` with an unbounded rate), or the user's trace at its own times.
Lengths, per request: the trace's own (workload_trace), a named dataset's measured distribution
(costmodel/request_lengths.py), else the workload's means, gamma-distributed at its coefficients of variation. TTFT,
TPOT, ITL (every gap between two output tokens, as `vllm bench serve` pools them) and end-to-end latency come out as
mean / p50 / p90 / p99. The seed is fixed, so one configuration gives one answer.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from optimizer.costmodel.result import LatencyPercentiles, LoadLatency
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_report import LatencyReport, Percentiles
from optimizer.costmodel.serving_requests import check_fits, open_loop_arrivals, request_lengths
from optimizer.errors import DomainError

REQUESTS = 1200  # simulated requests per estimate (the first WARMUP_SHARE not scored: the empty start)
WARMUP_SHARE = 0.1
SEED = 20261125
STABLE_SLOPE = 0.02  # TTFT growth, s per s of arrivals, above which the open-loop queue is taken as unbounded
_DECODE_POINTS = 18
_PREFILL_POINTS = 10


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


# ---- each engine's admission and eviction rules, from its scheduler ----------------------------------------------
# SGLang python/sglang/global_config.py (sgl-project/sglang 025ea29): default_init_new_token_ratio 0.7,
# default_min_new_token_ratio_factor 0.14, default_new_token_ratio_decay_steps 600, retract_decode_steps 20. The
# PrefillAdder (srt/managers/schedule_policy.py) admits a prompt while available KV minus the running requests'
# reservation, min(max_new_tokens - generated, CLIP_MAX_NEW_TOKENS_ESTIMATION 4096) x new_token_ratio each, holds
# its prompt plus its own clipped max_new_tokens; the ratio decays by (init - min) / 600 per decode batch and a
# decode that runs out of KV retracts requests (fewest output tokens first) until 20 more steps fit, then resets the
# ratio to (generated + 20 per request) / (max_new_tokens + 1) of the batch (scheduler.py update_running_batch,
# schedule_batch.py retract_decode).
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO = 0.7 * 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_MIN_NEW_TOKEN_RATIO) / 600
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
SGLANG_RETRACT_DECODE_STEPS = 20


@dataclass(eq=False)  # identity: two requests of equal lengths sent together are still two
class _Request:
    arrival: float
    prompt: int
    output: int
    target: int = 0
    """Tokens to prefill before the next token: the prompt, or prompt + generated after an eviction (recompute)."""
    prefilled: int = 0
    generated: int = 0
    """Output tokens emitted before the request's current decode run."""
    start: int = 0
    """The decode count at which its current decode run began."""
    entry: int = 0
    """The tie of its live entry in the finish heap (older entries are stale: it was evicted meanwhile)."""
    first: float = math.nan
    done: float = math.nan
    running: bool = False


class _Kv:
    """The KV cache as the engine accounts for it: tokens held (paged engines: as tokens are computed; TensorRT-LLM
    GUARANTEED_NO_EVICT: prompt + every output token reserved at admission), and SGLang's reservation for the
    running requests' future tokens."""

    def __init__(self, load: ReplicaLoad) -> None:
        self.capacity = float(load.kv_tokens)
        self.engine = load.limits.engine
        self.whole = load.limits.reserves_whole_request
        self.used = 0.0
        self.per_step = load.per_step
        """Tokens a decoding sequence adds per iteration (more than 1 under speculative decoding)."""
        self.ratio = SGLANG_INIT_NEW_TOKEN_RATIO
        self.future = 0.0
        """SGLang: the running requests' remaining output tokens (reserved at `ratio`, each clipped)."""
        self.running = 0
        """Requests in their decode run."""

    def free(self) -> float:
        return self.capacity - self.used

    def admits(self, r: _Request, chunk: int, pending: float) -> bool:
        """Whether the engine admits waiting request `r` whose first chunk is `chunk` tokens, `pending` tokens
        already promised this iteration."""
        if self.whole:
            # TensorRT-LLM capacity scheduler GUARANTEED_NO_EVICT: the request's whole prompt + max output.
            return r.target + (r.output - r.generated) <= self.free() - pending
        if self.engine == "sglang":
            own = r.target + min(r.output - r.generated, SGLANG_CLIP_MAX_NEW_TOKENS)
            return own <= self.free() - pending - self.ratio * self.reserved()
        # vLLM V1: allocate_slots for the scheduled tokens only (vllm/v1/core/sched/scheduler.py Scheduler.schedule,
        # vllm-project/vllm 00024d31: a waiting request is scheduled when its chunk's blocks are free).
        return chunk <= self.free() - pending

    def admit(self, r: _Request) -> None:
        if self.whole:
            self.used += r.target + (r.output - r.generated)

    def add_prefill(self, tokens: int) -> None:
        if not self.whole:
            self.used += tokens

    def held(self, r: _Request, decodes: int) -> float:
        """Tokens `r` holds now."""
        if self.whole:
            return float(r.target + (r.output - r.generated))
        run = decodes - r.start if r.running else 0
        return float(r.prefilled + run * self.per_step)

    def reserved(self) -> float:
        """SGLang's reservation for the running requests' future tokens before the ratio: their remaining outputs,
        each clipped to CLIP_MAX_NEW_TOKENS (here the sum clipped to that per request)."""
        return max(0.0, min(self.future, SGLANG_CLIP_MAX_NEW_TOKENS * self.running))

    def start_running(self, r: _Request) -> None:
        self.running += 1
        self.future += r.output - r.generated

    def release(self, r: _Request, decodes: int) -> None:
        self.used -= self.held(r, decodes)
        if r.running:
            self.running -= 1
            self.future -= r.output - r.generated - (decodes - r.start) * self.per_step

    def decoded(self, n: int, k: int) -> None:
        """k decode iterations of n sequences."""
        if not self.whole:
            self.used += n * k * self.per_step
        self.future -= n * k * self.per_step
        if self.engine == "sglang":
            self.ratio = max(SGLANG_MIN_NEW_TOKEN_RATIO, self.ratio - k * SGLANG_NEW_TOKEN_RATIO_DECAY)

    def decode_room(self, n: int) -> int:
        """Decode iterations of n sequences the free KV carries (unbounded when reserved at admission)."""
        if self.whole or n == 0:
            return 1 << 40
        return int(self.free() // (n * self.per_step))


class _Run:
    """One simulation's state (the requests, the FIFO queue, the running heap, the clock) and the engine's
    scheduling steps over it."""

    def __init__(
        self,
        load: ReplicaLoad,
        kv: _Kv,
        arrivals: list[float],
        prompts: np.ndarray,
        outputs: np.ndarray,
        requests: int,
        closed_loop: bool,
    ) -> None:
        self.load, self.lim, self.kv = load, load.limits, kv
        self.arrivals, self.prompts, self.outputs = arrivals, prompts, outputs
        self.requests, self.closed_loop = requests, closed_loop
        self.reqs: list[_Request] = []
        self.waiting: deque[_Request] = deque()  # FIFO; evicted requests go back to its front
        self.sent = 0
        self.running: list[tuple[int, int, _Request]] = []  # heap of (decode count at which it finishes, tie, request)
        self.live: list[_Request] = []  # running and prefilling requests in admission order
        self.prefilling: list[_Request] = []  # admitted, prefill not finished (hold their KV)
        self.decodes = 0  # decode iterations so far: a running sequence finishes when this reaches its mark
        self.now, self.done, self.tie = 0.0, 0, 0
        self.n_running = 0
        self.busy_decoding = 0.0
        self.iterations = 0
        self.next_arrival = 0  # index into arrivals
        self.evictions = 0
        self.peak_running = 0  # peak live sequences
        self.gaps: list[tuple[float, float, float]] = []  # (iteration end, its duration, tokens it emitted)

    def arrivals_left(self) -> bool:
        return self.next_arrival < len(self.arrivals)

    def arrive_until(self, t: float) -> None:
        while self.next_arrival < len(self.arrivals) and self.arrivals[self.next_arrival] <= t:
            p = int(self.prompts[self.sent])
            r = _Request(self.arrivals[self.next_arrival], p, int(self.outputs[self.sent]), target=p)
            self.reqs.append(r)
            self.waiting.append(r)
            self.next_arrival += 1
            self.sent += 1

    def finish(self, r: _Request, t: float) -> None:
        r.done = t
        self.done += 1
        if self.closed_loop and len(self.arrivals) < self.requests:
            bisect.insort(self.arrivals, t, lo=self.next_arrival)  # the user sends its next request at once

    def leave(self, r: _Request) -> None:
        self.kv.release(r, self.decodes)
        self.live.remove(r)
        if r.running:
            self.n_running -= 1

    def evict(self, r: _Request) -> None:
        """Preemption by recompute (vLLM V1 `_preempt_request`, SGLang retract): its KV freed, back to the front
        of the queue to prefill its prompt and the tokens it generated."""
        ran = self.decodes - r.start if r.running else 0
        self.leave(r)
        r.generated = min(r.output - 1, r.generated + round(ran * self.load.per_step))
        if r in self.prefilling:
            self.prefilling.remove(r)
        r.running = False
        r.prefilled = 0
        r.target = r.prompt + r.generated
        self.waiting.appendleft(r)
        self.evictions += 1

    def clean(self) -> None:
        running = self.running
        while running and (not running[0][2].running or running[0][2].entry != running[0][1]):
            heapq.heappop(running)  # stale entries of evicted or finished requests

    def pop_finished(self) -> None:
        self.clean()
        while self.running and self.running[0][0] <= self.decodes:
            _, _, r = heapq.heappop(self.running)
            self.leave(r)
            r.running = False
            self.finish(r, self.now)
            self.clean()

    def make_room_for_decodes(self) -> None:
        """A decode iteration needs a token for each running sequence; out of KV, the engine evicts: vLLM the
        newest running request (`self.running.pop()`), SGLang the one with the fewest output tokens until 20
        steps fit, then resets its new-token ratio."""
        kv, load, live = self.kv, self.load, self.live
        if kv.whole:
            return
        if self.lim.engine == "sglang":
            if kv.free() >= self.n_running * load.per_step:
                return
            while self.n_running > 1 and kv.free() < self.n_running * SGLANG_RETRACT_DECODE_STEPS:
                victim = min(
                    (r for r in live if r.running),
                    key=lambda r: (r.generated + (self.decodes - r.start) * load.per_step, -r.prompt),
                )
                self.evict(victim)
            gen = sum(r.generated + (self.decodes - r.start) * load.per_step for r in live if r.running)
            cap = sum(r.output for r in live if r.running)
            kv.ratio = min(1.0, (gen + SGLANG_RETRACT_DECODE_STEPS * self.n_running) / (cap + 1))
            return
        while self.n_running > 1 and kv.free() < self.n_running * load.per_step:
            self.evict(live[-1])

    def admit(self, budget: float, chunked: bool, max_seqs: int) -> None:
        """Admission: FIFO while this iteration's token budget has room (the prompts already prefilling first:
        vLLM V1 schedules running requests before waiting ones), the live sequences stay within max_seqs and the
        engine's KV rule holds; the rest wait."""
        kv, lim = self.kv, self.lim
        pending = 0.0
        if lim.engine == "sglang":
            pending = sum(
                r.target - r.prefilled + kv.ratio * min(r.output - r.generated, SGLANG_CLIP_MAX_NEW_TOKENS)
                for r in self.prefilling
            )
        room_tokens = (max(1.0, budget - self.n_running * self.load.positions) if lim.mixes_prefill else budget) - sum(
            r.target - r.prefilled for r in self.prefilling
        )
        waiting, live = self.waiting, self.live
        while waiting and len(live) < max_seqs and (room_tokens >= 1 or not live):
            r = waiting[0]
            first_chunk = int(min(r.target, max(1.0, room_tokens))) if chunked else r.target
            if not chunked and first_chunk > room_tokens and (self.prefilling or self.n_running):
                break  # a whole prompt waits for an iteration with room for it
            if not kv.admits(r, first_chunk, pending):
                break
            waiting.popleft()
            kv.admit(r)
            if lim.engine == "sglang":
                pending += r.target + min(r.output - r.generated, SGLANG_CLIP_MAX_NEW_TOKENS)
            room_tokens -= first_chunk
            self.prefilling.append(r)
            live.append(r)
        self.peak_running = max(self.peak_running, len(live))

    def decode_alone(self, step: _StepTable) -> None:
        """Decodes alone: the same iteration repeats until a sequence finishes, a request arrives or the KV cache
        fills; run them in one go (an arrival is admitted after the iteration it falls in)."""
        n_dec = self.n_running
        dt = step(float(n_dec), 0.0)
        self.clean()
        k = self.running[0][0] - self.decodes
        if self.arrivals_left():
            k = min(k, max(1, math.ceil((self.arrivals[self.next_arrival] - self.now) / dt)))
        k = max(1, min(k, self.kv.decode_room(n_dec)))
        self.gaps.append((self.now + k * dt, dt, float(n_dec * k)))
        self.now += k * dt
        self.decodes += k
        self.kv.decoded(n_dec, k)
        self.busy_decoding += n_dec * k
        self.iterations += k
        self.pop_finished()

    def prefill_chunks(self, budget: float, chunked: bool) -> list[tuple[_Request, int]]:
        """The prefill chunks of this iteration: the prompts admitted, in order, within the token budget the
        decodes leave (a whole prompt, or a chunk of it when chunked), each within the KV it can allocate."""
        kv, n_dec = self.kv, self.n_running
        room = max(1.0, budget - n_dec * self.load.positions) if self.lim.mixes_prefill else budget
        chunks: list[tuple[_Request, int]] = []
        for r in self.prefilling:
            need = r.target - r.prefilled
            if not chunked:
                if chunks and need > room:
                    break
                take = need
            else:
                take = int(min(need, room))
            if not kv.whole and self.lim.engine == "vllm":
                take = int(min(take, max(0.0, kv.free() - n_dec * self.load.per_step)))  # allocate_slots
            if take <= 0:
                break
            chunks.append((r, take))
            room -= take
            if room < 1:
                break
        return chunks

    def iterate(self, chunks: list[tuple[_Request, int]], step: _StepTable) -> None:
        """One iteration with prefill chunks: the decodes beside them where the engine mixes them (or when there
        are none), then each chunk's prompt progress; a finished prefill emits its first token."""
        n_dec = self.n_running
        decode_now = self.lim.mixes_prefill or not chunks
        tokens = float(sum(t for _, t in chunks))
        dt = step(float(n_dec) if decode_now else 0.0, tokens)
        self.now += dt
        self.iterations += 1
        if decode_now and n_dec:
            self.gaps.append((self.now, dt, float(n_dec)))
            self.busy_decoding += n_dec
            self.decodes += 1
            self.kv.decoded(n_dec, 1)
            self.pop_finished()
        for r, take in chunks:
            r.prefilled += take
            self.kv.add_prefill(take)
            if r.prefilled >= r.target:
                self.prefilling.remove(r)
                if math.isnan(r.first):
                    r.first = self.now  # the prefill's iteration emits the first token
                r.generated += 1
                if r.generated >= r.output:
                    self.leave(r)
                    self.finish(r, self.now)
                else:
                    self.start_decoding(r)

    def start_decoding(self, r: _Request) -> None:
        r.running = True
        r.start = self.decodes
        self.n_running += 1
        self.kv.start_running(r)
        self.tie += 1
        r.entry = self.tie
        finish_at = self.decodes + math.ceil((r.output - r.generated) / self.load.per_step)
        heapq.heappush(self.running, (finish_at, self.tie, r))

    def report(self, open_loop: bool, warmup: float) -> LatencyReport:
        """The scored requests' percentiles and rates."""
        reqs = self.reqs
        scored = [r for r in reqs[int(len(reqs) * warmup) :] if not math.isnan(r.done)]
        ttft = [r.first - r.arrival for r in scored]
        tpot = [(r.done - r.first) / (r.output - 1) for r in scored if r.output > 1]
        start = min(r.arrival for r in scored)
        span = max(1e-12, max(r.done for r in scored) - start)
        gaps = [(dt, n) for end, dt, n in self.gaps if end > start]
        out_tokens = sum(int(r.output) for r in scored)
        # Open loop: stable when the queue does not grow. An overloaded replica's TTFT climbs with the arrival time
        # at (1 - capacity / rate) seconds per second; a stable one's does not trend. Stable when the fitted slope
        # stays below STABLE_SLOPE.
        stable = True
        times = [r.arrival for r in scored]
        if open_loop and len(ttft) >= 20 and max(times) > min(times):
            slope = float(np.polyfit(times, ttft, 1)[0])
            stable = slope < STABLE_SLOPE
        return LatencyReport(
            ttft=Percentiles.of(ttft),
            tpot=Percentiles.of(tpot if tpot else [0.0]),
            request_rate=len(scored) / span,
            output_tokens_per_s=out_tokens / span,
            mean_decoding=self.busy_decoding / max(1, self.iterations),
            stable=stable,
            evictions=self.evictions,
            peak_running=self.peak_running,
            itl=Percentiles.weighted([g for g, _ in gaps], [n for _, n in gaps]),
            e2e=Percentiles.of([r.done - r.arrival for r in scored]),
        )


def simulate(
    load: ReplicaLoad,
    *,
    rate: float | None = None,
    concurrency: int | None = None,
    burst: bool = False,
    replay: bool = False,
    replay_stride: int = 1,
    requests: int = REQUESTS,
    seed: int = SEED,
    warmup: float = WARMUP_SHARE,
    burstiness: float | None = None,
) -> LatencyReport:
    """TTFT, TPOT, ITL and end-to-end percentiles of `load`'s replica under `rate` requests/s (open loop; gamma
    inter-arrivals of shape `burstiness` where given), `concurrency` users (closed loop; the users start together,
    as `--max-concurrency N` sends its first N requests at once), a `burst` of `requests` prompts sent at once
    (`vllm bench serve` / `bench_serving` with neither) or a `replay` of the workload's trace at its own arrival
    times (every `replay_stride`-th of its requests: one replica's share of a fleet's trace); exactly one. The
    first `warmup` share of the requests is not scored (0 scores every request, as a benchmark does)."""
    if sum((rate is not None, concurrency is not None, burst, replay)) != 1:
        raise DomainError("workload.rate", "give a request rate, a concurrency, a burst or a timed trace: exactly one")
    if rate is not None and not rate > 0:
        raise DomainError("workload.rate", f"must be > 0 requests/s (got {rate})")
    if concurrency is not None and concurrency < 1:
        raise DomainError("workload.concurrency", f"must be >= 1 user (got {concurrency})")
    if load.decode_only:
        raise DomainError("workload", "latency percentiles simulate an aggregated replica (prefill and decode)")
    w, lim = load.w, load.limits
    if math.floor(load.max_decoding) < 1:
        raise DomainError("workload", "the replica holds no sequence in its KV cache: no latency to report")
    trace = w.workload_trace
    if replay:
        if trace is None or trace[0].arrival_s is None:
            raise DomainError("workload.workload_trace", "a replay needs a trace whose requests have arrival times")
        trace = trace[:: max(1, replay_stride)]
        requests = len(trace)
    max_seqs = lim.max_seqs * load.ranks
    rng = np.random.default_rng(seed)
    prompts, outputs = request_lengths(w, rng, requests, trace)
    budget = float(load.token_budget)
    chunked = lim.chunked_prefill
    max_prefill = budget if chunked else max(budget, float(prompts.max()))
    kv = _Kv(load)
    check_fits(prompts, outputs, kv.capacity, "workload.workload_trace" if trace is not None else "workload")
    top = max(1.0, min(float(max_seqs), kv.capacity / max(1.0, float(prompts.mean()))))
    step = _StepTable(load, top, max_prefill)

    if replay:
        arrivals = [float(r.arrival_s or 0.0) for r in trace or ()]
    elif rate is not None:
        arrivals = open_loop_arrivals(rng, rate, requests, burstiness)
    elif burst:
        arrivals = [0.0] * requests
    else:
        arrivals = [0.0] * min(int(concurrency or 1), requests)
    run = _Run(load, kv, arrivals, prompts, outputs, requests, concurrency is not None)
    while run.done < requests:
        run.arrive_until(run.now)
        if not run.live and not run.waiting:
            if not run.arrivals_left():
                break
            run.now = arrivals[run.next_arrival]
            continue
        run.admit(budget, chunked, max_seqs)
        run.make_room_for_decodes()
        if not run.prefilling:
            if run.n_running == 0:
                # Nothing admitted and nothing running: the queue waits for an arrival (cannot happen with KV
                # for one request, which the check above guarantees).
                if not run.arrivals_left():
                    break
                run.now = max(run.now, arrivals[run.next_arrival])
                continue
            run.decode_alone(step)
            continue
        chunks = run.prefill_chunks(budget, chunked)
        if not chunks and run.n_running == 0:
            # The only live requests cannot get KV for their next chunk: the newest is evicted (vLLM).
            run.evict(run.live[-1])
            continue
        run.iterate(chunks, step)
        if not run.arrivals_left() and not run.waiting and not run.live:
            break
    return run.report(rate is not None or replay, warmup)


def load_latency(load: ReplicaLoad, replicas: int) -> LoadLatency:
    """The percentiles of the workload's own load (rate over the whole fleet, or its users), spread evenly over
    `replicas`."""
    w = load.w
    if w.replays_trace:
        # A fleet's trace spread round-robin: each replica serves every replicas-th request at its own time.
        rep = simulate(load, replay=True, replay_stride=replicas, warmup=0.0, burstiness=None)
        rate, users, replayed = None, None, len((w.workload_trace or ())[::replicas])
    else:
        rate = w.rate / replicas if w.rate is not None else None
        users = w.concurrency / replicas if w.concurrency is not None else None
        rep = simulate(
            load,
            rate=rate,
            concurrency=None if users is None else max(1, round(users)),
            burstiness=w.burstiness,
        )
        replayed = None
    return LoadLatency(
        replicas=replicas,
        rate_per_replica=rate,
        users_per_replica=users,
        trace_requests_per_replica=replayed,
        ttft=_percentiles(rep.ttft),
        tpot=_percentiles(rep.tpot),
        itl=_percentiles(rep.itl),
        e2e=_percentiles(rep.e2e),
        request_rate=rep.request_rate,
        output_tokens_per_s=rep.output_tokens_per_s,
        sustained=rep.stable,
    )


def _percentiles(p: Percentiles) -> LatencyPercentiles:
    return LatencyPercentiles(mean_s=p.mean, p50_s=p.p50, p90_s=p.p90, p99_s=p.p99)
