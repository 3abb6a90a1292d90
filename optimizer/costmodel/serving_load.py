"""One serving replica under continuous batching at a steady state [formulas G; issue 17].

An engine iteration runs every decoding sequence one token and a chunk of waiting prompts (chunked prefill). At a
request rate r per replica and iteration time T, Little's law gives the decoding sequences B = r O T and the
prefill tokens per iteration r P T (a request's P prompt tokens are spread over the O iterations of a sequence's
life); T is the fixed point of T = iteration(B, r P T) [Little 1961; vLLM V1 scheduler: decodes first, prefill
fills the rest of max_num_batched_tokens]. The replica is saturated when no fixed point keeps B within the KV cache
and max_seqs, or the iteration's tokens within the budget.

TTFT is a request's wait for its prefill chunks: the prefill budget per iteration is a deterministic server, so
the queue is M/D/1 (mean wait rho D / (2 (1 - rho)) [DistServe, Zhong et al. OSDI 2024, eq. 1]), M/G/1 when prompt
lengths vary (Pollaczek-Khinchine: x (1 + cv^2)); its p90 uses the heavy-traffic exponential tail of the wait
(Kingman 1962): P(W > t) = rho exp(-t rho / W_mean). Varying output lengths lengthen the running sequences'
mean context (length bias, E[O^2]/E[O]).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from optimizer.costmodel import network as net
from optimizer.costmodel.constants import CUDA_CONTEXT_BYTES, CUDA_GRAPHS_BYTES
from optimizer.costmodel.inference import StepWork, kv_bytes_per_token_per_layer, replica_limits, stage_time
from optimizer.costmodel.memory import stage_params
from optimizer.costmodel.moe_serving import busiest_rank_prompt_tokens
from optimizer.costmodel.request_lengths import length_spreads
from optimizer.costmodel.serving_engines import EngineLimits
from optimizer.costmodel.speculative import tokens_per_step
from optimizer.frameworks.validation import Layout
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import BYTES, InferenceWorkload

_BISECT = 48
_GRID = 24  # points of the first-fixed-point scan
_TOLERANCE = 1e-3  # relative: rates and iteration times to 0.1% (far below the model's error)


def boundary(holds: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """Where a monotone predicate turns from true (at lo) to false (at hi), to a relative _TOLERANCE: bisection."""
    for _ in range(_BISECT):
        mid = (lo + hi) / 2
        if holds(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= _TOLERANCE * hi:
            break
    return lo, hi


P90_UNIFORM = 0.9  # a request arrives uniformly within the running iteration: p90 of its wait is 0.9 T


@dataclass(frozen=True)
class LoadPoint:
    """A replica's steady state at one request rate."""

    rate: float
    """Requests per second this replica serves."""
    decoding: float
    """Sequences in the decode phase (the iteration's batch)."""
    step_s: float
    """One iteration = the mean time per output token (TPOT)."""
    ttft_mean_s: float
    ttft_p90_s: float
    kv_used: float
    """Share of the KV cache the running sequences hold."""
    tokens_per_step: float = 1.0
    """Tokens a decoding sequence emits per iteration (more than 1 under speculative decoding)."""

    @property
    def output_tokens_per_s(self) -> float:
        return self.decoding * self.tokens_per_step / self.step_s

    @property
    def tpot_s(self) -> float:
        """Mean time per output token: the iteration over the tokens it emits per sequence."""
        return self.step_s / self.tokens_per_step


@dataclass(frozen=True)
class _Stage:
    start: int
    layers: int
    pool_index: int
    last: bool


class ReplicaLoad:
    """A serving replica (a configuration with its stage layout) and its engine's limits."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        w: InferenceWorkload,
        c: ParallelConfig,
        layout: Layout,
        *,
        decode_only: bool = False,
    ) -> None:
        self.model, self.cluster, self.w, self.c = model, cluster, w, c
        self.decode_only = decode_only
        """A disaggregated decode instance: prompts arrive prefilled (their KV transferred), no prefill work."""
        self.pools = list(layout.stage_pools)
        stages, start = [], 0
        for i, layers in enumerate(layout.stage_layers):
            stages.append(_Stage(start, layers, i, i == c.pp - 1))
            start += layers
        self.stages = stages
        self.limits: EngineLimits = replica_limits(cluster, w, c, self.pools)
        # Attention data parallelism inside a replica (serving EP = tp x dp, validation.check_serving_experts):
        # each of the dp ranks holds and runs its own sequences [SGLang --enable-dp-attention].
        self.ranks = c.dp
        self.attention_dp = c.attention_dp and model.moe is not None
        """Attention-DP ranks sharing the experts: each rank schedules its own sequences, and an iteration waits for
        the rank with the prompts (costmodel/moe_serving.py)."""
        # The token budget is per rank under TensorRT-LLM (max_num_tokens and max_batch_size per rank, "Max batch
        # size in each rank" [blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md]) and vLLM (one engine per
        # DP rank); SGLang divides --chunked-prefill-size by dp_size under --enable-dp-attention
        # [python/sglang/srt/server_args.py: chunked_prefill_size // dp_size], so its budget stays the replica's.
        per_rank = self.attention_dp and w.engine != "sglang"
        self.token_budget = self.limits.max_batched_tokens * (self.ranks if per_rank else 1)
        """Tokens one iteration of the replica may carry (decodes plus prefill chunks)."""
        self.kv_tokens = min(self._kv_tokens(s) for s in stages) * self.ranks
        # A running sequence is length-biased: one with a long output stays long, so the time-average over the
        # running set weights each request by its output length: E[O^2]/E[O] = O (1 + cv^2) [renewal theory,
        # inspection paradox]. Fixed lengths (cv 0) give O.
        prompt_cv, output_cv = length_spreads(w)
        biased = w.output_len * (1 + output_cv**2)
        tokens_per_seq = w.prompt_len + (biased if self.limits.reserves_whole_request else biased / 2)
        self.max_decoding = min(float(self.limits.max_seqs) * self.ranks, self.kv_tokens / tokens_per_seq)
        self.ctx = w.prompt_len + biased / 2
        self.per_step = tokens_per_step(w.spec_tokens, w.acceptance_rate)
        """Tokens a decoding sequence emits per iteration (1; more under speculative decoding)."""
        self.steps = w.output_len / self.per_step
        """Decode iterations of a request."""
        self.positions = 1 + w.spec_tokens
        """Token-budget positions a decoding sequence takes per iteration (its drafts verified)."""
        """Mean context a decoding sequence attends to (length-biased)."""
        self.service_cv2 = prompt_cv**2
        """Squared coefficient of variation of a prefill's service time (proportional to the prompt)."""
        hop = 0.0
        if c.pp > 1:
            nb = net.neighbour_tier(net.cluster_tiers(cluster, self.pools[0]), c.tp)
            hop = net.p2p(nb.bw, nb.network, model.hidden_size * 2)
        self.hop_s = hop

    # ---- memory ---------------------------------------------------------------------------------------------
    def _kv_tokens(self, s: _Stage) -> float:
        """KV-cache tokens one stage's GPUs hold, in whole blocks, under the engine's memory rule."""
        m, w, c = self.model, self.w, self.c
        pool = self.pools[s.pool_index]
        cap = self.cluster.gpu_of(pool).memory_bytes
        moe = sum(1 for j in range(s.start, s.start + s.layers) if m.is_moe_layer(j))
        dense_p, expert_p, emb_p = stage_params(m, c, s.layers - moe, moe, s.start == 0, s.last)
        weights = (dense_p + expert_p + emb_p) * w.weight_bytes
        width = (
            m.ffn_hidden_size if m.moe is None else max(m.ffn_hidden_size, m.moe.top_k * m.moe.expert_ffn_hidden_size)
        )
        # Activation workspace of the largest iteration (the engines profile a max_num_batched_tokens forward).
        act = self.limits.max_batched_tokens * (2 * m.hidden_size + 3 * width / c.tp) * 2
        lim = self.limits
        if lim.fraction_of_free:
            free = lim.memory_fraction * (cap - CUDA_CONTEXT_BYTES - weights - act - CUDA_GRAPHS_BYTES)
        elif lim.engine == "sglang":
            free = lim.memory_fraction * cap - weights  # mem_fraction_static covers weights + KV pool
        else:
            free = lim.memory_fraction * cap - CUDA_CONTEXT_BYTES - weights - act
        per_token = s.layers * kv_bytes_per_token_per_layer(m, c.tp, BYTES[w.kv_cache_dtype])
        if free <= 0 or per_token <= 0:
            return 0.0
        blocks = math.floor(free / per_token / lim.block_tokens)
        return float(blocks * lim.block_tokens)

    # ---- time -----------------------------------------------------------------------------------------------
    def iteration_s(self, decoding: float, prefill_tokens: float) -> float:
        """One engine iteration: `decoding` sequences at the mean context plus `prefill_tokens` prompt tokens.
        With pp stages the sequences run as pp micro-batches; the iteration is pp x the slowest stage's share. The
        step is the fixed-batch estimate's (inference.estimate_inference): decodes from a CUDA graph within the
        capture limit, the engine's host time once per iteration."""
        p = self.c.pp
        per = p * self.ranks
        work = StepWork.engine_decode(self.limits, decoding / per, self.ctx, self.w.spec_tokens)
        busiest = None
        if prefill_tokens > 0:
            pre = StepWork.prefill(prefill_tokens / self.w.prompt_len / per, self.w.prompt_len)
            dec = work
            work = work + StepWork(pre.gemm_tokens, pre.attn_pairs, 0.0, pre.head_rows, True)
            if self.attention_dp:
                # Whole prompts on a few ranks; the others decode and wait for them (moe_serving.py).
                top = min(
                    busiest_rank_prompt_tokens(prefill_tokens / p, self.w.prompt_len, self.ranks),
                    float(self.limits.max_batched_tokens),  # a rank's own budget chunks a longer prompt
                )
                one = StepWork.prefill(top / self.w.prompt_len, self.w.prompt_len)
                busiest = dec + StepWork(one.gemm_tokens, one.attn_pairs, 0.0, one.head_rows, True)
        times = [
            stage_time(
                self.model,
                self.cluster,
                self.w,
                self.c,
                self.pools[s.pool_index],
                s.start,
                s.layers,
                work,
                s.last,
                busiest,
            )[0]
            for s in self.stages
        ]
        if self.w.spec_tokens and decoding > 0:
            # The k draft steps on the last stage: one layer and the LM head each (costmodel/speculative.py).
            last = self.stages[-1]
            draft = StepWork.engine_decode(self.limits, decoding / per, self.ctx)
            times[-1] += (
                self.w.spec_tokens
                * stage_time(
                    self.model,
                    self.cluster,
                    self.w,
                    self.c,
                    self.pools[last.pool_index],
                    last.start + last.layers - 1,
                    1,
                    draft,
                    True,
                )[0]
            )
        host = self.limits.host_s
        if p == 1:
            return times[0] + host
        return max(sum(times) + (p - 1) * self.hop_s, p * max(times)) + host

    def prefill_s(self, prompts: float = 1.0) -> float:
        """Prefill of `prompts` prompts alone, spread over the attention-DP ranks (the shortest possible TTFT at
        prompts=1 on one rank)."""
        work = StepWork.prefill(prompts / self.ranks, self.w.prompt_len)
        times = [
            stage_time(
                self.model, self.cluster, self.w, self.c, self.pools[s.pool_index], s.start, s.layers, work, s.last
            )[0]
            for s in self.stages
        ]
        return sum(times) + (self.c.pp - 1) * self.hop_s

    # ---- steady state ---------------------------------------------------------------------------------------
    def _chunk(self, rate: float, decoding: float, t: float) -> float:
        """Prompt tokens an iteration that carries prefill takes: the budget left after the decodes, or fewer when
        fewer prompts wait (about rate x t arrive per iteration; at least one prompt)."""
        w = self.w
        room = max(1.0, self.token_budget - decoding * self.positions)
        if not self.limits.chunked_prefill:
            room = max(room, float(w.prompt_len))  # a whole prompt per iteration, whatever the budget
        return min(room, w.prompt_len * max(1.0, rate * t))

    def mean_iteration_s(self, rate: float, t: float) -> float:
        """Mean iteration time at `rate` when the mean is `t`: decode-only iterations, and a share of iterations
        that also carry a prefill chunk. Prefill and decode iterations alternate rather than average out: a chunk
        is compute-bound while the decodes beside it are memory-bound, so their times add [vLLM V1 / TRT-LLM
        in-flight batching; Sarathi-Serve, Agrawal et al. OSDI 2024 §3]."""
        w = self.w
        decoding = rate * self.steps * t
        dec = self.iteration_s(decoding, 0.0)
        if self.decode_only:
            return dec
        chunk = self._chunk(rate, decoding, t)
        share = rate * w.prompt_len * t / chunk  # iterations per second that carry prefill x t
        return dec + share * self._prefill_extra(decoding, chunk, dec)

    def _prefill_extra(self, decoding: float, chunk: float, dec: float) -> float:
        """What an iteration carrying a prefill chunk adds to the decode steps' mean time: the chunk beside the
        decodes (vLLM V1, TensorRT-LLM in-flight batching), or a whole prefill-only iteration in which no sequence
        decodes (SGLang: enable_mixed_chunk is off by default, server_args.py)."""
        if self.limits.mixes_prefill:
            return self.iteration_s(decoding, chunk) - dec
        return self.iteration_s(0.0, chunk)

    def _ceiling(self, rate: float) -> float:
        """The largest mean iteration time the limits allow at `rate`: B <= max_decoding, and the prefill
        iterations' share of all iterations at most 1."""
        w = self.w
        by_seqs = self.max_decoding / (rate * self.steps)
        by_tokens = self.token_budget / (rate * (w.prompt_len + self.steps * self.positions))
        return min(by_seqs, by_tokens)

    def at_rate(self, rate: float) -> LoadPoint | None:
        """The steady state at `rate` requests/s, or None when the replica cannot keep up."""
        if rate <= 0 or self.max_decoding < 1:
            return None
        hi = self._ceiling(rate)

        def excess(t: float) -> float:
            return self.mean_iteration_s(rate, t) - t

        lo = self.iteration_s(0.0, 0.0)
        if lo >= hi:
            return None
        # The operating point is the first fixed point above the idle iteration: the mean iteration time settles
        # where it first stops exceeding itself. The excess need not be monotone (the prefill chunk shrinks as
        # the decode batch grows), so the first crossing is found on a geometric grid, then bisected.
        grid = [lo * (hi / lo) ** (k / _GRID) for k in range(1, _GRID + 1)]
        prev = lo
        for t in grid:
            if excess(t) <= 0:
                break
            prev = t
        else:
            return None
        _, t = boundary(lambda x: excess(x) > 0, prev, t)
        return self._point(rate, t)

    def _point(self, rate: float, t: float) -> LoadPoint | None:
        """The steady state at `rate` with mean iteration time `t` (a fixed point): batch, TTFT, KV use; None when
        a mixing engine's iterations cannot carry the prefill (more prefill iterations than iterations)."""
        w = self.w
        decoding = rate * self.steps * t
        if self.decode_only:
            kv = decoding * self.ctx / self.kv_tokens
            return LoadPoint(rate, decoding, t, 0.0, 0.0, kv, self.per_step)
        chunk = self._chunk(rate, decoding, t)
        share = rate * w.prompt_len * t / chunk
        if share > 1 + 1e-9 and self.limits.mixes_prefill:
            return None
        mixed = self.iteration_s(decoding if self.limits.mixes_prefill else 0.0, chunk)
        service = math.ceil(w.prompt_len / chunk) * mixed
        rho = min(0.999, share)
        wait = rho * mixed * (1 + self.service_cv2) / (2 * (1 - rho))  # Pollaczek-Khinchine (M/D/1 at cv 0)
        tail = (wait / rho) * math.log(10 * rho) if rho > 0.1 else 0.0
        ttft_mean = 0.5 * t + service + wait
        ttft_p90 = P90_UNIFORM * t + service + tail
        seqs = rate * (self.steps * t + ttft_mean)
        kv = seqs * self.ctx / self.kv_tokens
        return LoadPoint(rate, decoding, t, ttft_mean, ttft_p90, kv, self.per_step)

    @functools.cached_property
    def saturated_point(self) -> LoadPoint | None:
        """saturated(), computed once per replica (max_rate and steady() both start from it)."""
        return self.saturated()

    def saturated(self) -> LoadPoint | None:
        """The steady state under an infinite queue of requests (`trtllm-bench throughput`, `bench_serving
        --request-rate inf`): the decode batch is as large as the KV cache and max_seqs allow, or, for an engine
        that mixes prefill into its iterations, as the token budget allows with the prefill that keeps it full
        (B (1 + P/O) tokens per iteration). Explicit: at a fixed batch the iteration time needs no fixed point."""
        w = self.w
        if self.max_decoding < 1:
            return None
        batch = self.max_decoding
        if self.limits.mixes_prefill and not self.decode_only:
            batch = min(batch, self.token_budget / (self.positions + w.prompt_len / self.steps))
        dec = self.iteration_s(batch, 0.0)
        if self.decode_only:
            t = dec
        else:
            arriving = batch / self.steps  # prompts admitted per iteration: one per finished sequence
            chunk = min(
                max(1.0, self.token_budget - (batch * self.positions if self.limits.mixes_prefill else 0)),
                w.prompt_len * max(1.0, arriving),
            )
            share = arriving * w.prompt_len / chunk
            t = dec + share * self._prefill_extra(batch, chunk, dec)
        return self._point(batch / (self.steps * t), t)

    def steady(self, rate: float) -> LoadPoint | None:
        """The steady state at `rate`, the saturated one at or above its rate (what max_rate judged)."""
        top = self.saturated_point
        if top is not None and rate >= top.rate * (1 - 1e-9):
            return top
        return self.at_rate(rate)

    def max_rate(self, ttft_s: float | None = None, tpot_s: float | None = None) -> float:
        """The highest rate (requests/s) with a steady state that meets the targets; 0 when none does. Feasibility
        in the rate need not be monotone near saturation, so the rates below the saturated one are scanned from
        the top and the first that meets the targets is refined by bisection towards the next one up."""
        top_point = self.saturated_point
        if top_point is None:
            return 0.0
        top = top_point.rate

        def ok(r: float) -> bool:
            pt = self.at_rate(r) if r < top else top_point
            if pt is None:
                return False
            return (tpot_s is None or pt.tpot_s <= tpot_s) and (ttft_s is None or pt.ttft_p90_s <= ttft_s)

        if ok(top):
            return top
        if not ok(top * 1e-6):
            return 0.0  # the targets fail even without load
        above = top
        for k in range(_GRID - 1, 0, -1):
            r = top * k / _GRID
            if ok(r):
                return boundary(ok, r, above)[0]
            above = r
        return boundary(ok, top * 1e-6, above)[0]


@dataclass(frozen=True)
class PrefillPoint:
    """A disaggregated prefill instance's steady state at one request rate."""

    rate: float
    ttft_mean_s: float
    ttft_p90_s: float
    utilisation: float


class PrefillLoad:
    """A disaggregated prefill instance: prompts batched up to the token budget, a batch per iteration; the queue
    is M/D/1 over batches [DistServe eq. 1]."""

    def __init__(self, replica: ReplicaLoad, transfer_s: float) -> None:
        self.replica = replica
        self.transfer_s = transfer_s
        """KV-cache transfer of one prompt to its decode instance, seconds."""
        w = replica.w
        self.single_s = replica.prefill_s(float(replica.ranks))  # one prompt on each rank
        per_batch = max(1.0, replica.limits.max_batched_tokens / w.prompt_len) * replica.ranks
        self.batch_s = replica.prefill_s(per_batch)
        self.capacity = per_batch / self.batch_s
        """Prompts per second at full batches."""

    def at_rate(self, rate: float) -> PrefillPoint | None:
        rho = rate / self.capacity
        if rate <= 0 or rho >= 1:
            return None
        wait = rho * self.batch_s * (1 + self.replica.service_cv2) / (2 * (1 - rho))
        tail = (wait / rho) * math.log(10 * rho) if rho > 0.1 else 0.0
        return PrefillPoint(rate, self.single_s + wait + self.transfer_s, self.single_s + tail + self.transfer_s, rho)

    def max_rate(self, ttft_s: float | None) -> float:
        if ttft_s is not None and self.single_s + self.transfer_s > ttft_s:
            return 0.0

        def ok(rate: float) -> bool:
            pt = self.at_rate(rate)
            return pt is not None and (ttft_s is None or pt.ttft_p90_s <= ttft_s)

        return boundary(ok, 0.0, self.capacity)[0]
