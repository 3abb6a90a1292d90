"""The latency simulation runs requests with their own lengths and arrivals (costmodel/serving_sim.py, issue 55 §1):
a trace's lone request takes exactly the step model's prefill and decodes, a trace is replayed at its own times
and split over replicas, a named dataset's lengths spread the latencies, gamma arrivals are vLLM's, and every answer
is the same twice."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_requests import open_loop_arrivals, request_lengths
from optimizer.costmodel.serving_sim import load_latency, simulate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import validate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

MODEL = load_model_preset("llama-3-8b")
CLUSTER = load_cluster_preset("dgx-h100")
TP1 = ParallelConfig(tp=1)


def _load(w: InferenceWorkload) -> ReplicaLoad:
    return ReplicaLoad(MODEL, CLUSTER, w, TP1, validate(MODEL, CLUSTER, w, TP1))


def _traced(requests: list[dict[str, float]], **fields: object) -> InferenceWorkload:
    return InferenceWorkload.model_validate({"mode": "inference", "workload_trace": requests, **fields})


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_lone_request_takes_one_prefill_and_its_decodes(engine: str) -> None:
    """By hand: TTFT = the step with the 256-token prompt alone; each of the 63 later tokens one decode step of one
    sequence; end-to-end = TTFT + 63 decode steps; TPOT = ITL = one decode step."""
    load = _load(_traced([{"arrival_s": 0.0, "input_tokens": 256, "output_tokens": 64}], engine=engine))
    rep = simulate(load, replay=True, warmup=0.0)
    prefill, decode = load.iteration_s(0.0, 256.0), load.iteration_s(1.0, 0.0)
    assert load.per_step == 1.0 and load.token_budget >= 256
    assert rep.ttft.mean == pytest.approx(prefill, rel=1e-9)
    assert rep.e2e.mean == pytest.approx(prefill + 63 * decode, rel=1e-9)
    assert rep.tpot.mean == pytest.approx(decode, rel=1e-9) and rep.itl.p99 == pytest.approx(decode, rel=1e-9)


def test_a_request_arriving_after_the_first_finished_sees_the_same() -> None:
    first = {"arrival_s": 0.0, "input_tokens": 256, "output_tokens": 64}
    load = _load(_traced([first, {**first, "arrival_s": 30.0}]))
    rep = simulate(load, replay=True, warmup=0.0)
    assert rep.ttft.p50 == pytest.approx(rep.ttft.p99) and rep.e2e.p50 == pytest.approx(rep.e2e.p99)
    assert rep.request_rate == pytest.approx(2 / (30.0 + rep.e2e.mean))


def test_a_trace_is_replayed_at_its_times_and_split_over_replicas() -> None:
    rng = np.random.default_rng(5)
    times = np.cumsum(rng.exponential(0.1, 400))
    reqs = [
        {"arrival_s": float(t), "input_tokens": int(p), "output_tokens": int(o)}
        for t, p, o in zip(times, rng.integers(50, 2000, 400), rng.integers(10, 400, 400), strict=True)
    ]
    w = _traced(reqs)
    one = load_latency(_load(w), replicas=1)
    two = load_latency(_load(w), replicas=2)
    assert one.trace_requests_per_replica == 400 and two.trace_requests_per_replica == 200
    assert one.itl is not None and one.e2e is not None
    span = times[-1] - times[0]  # the trace's own rate, over its span and the last request's drain
    assert 400 / (span + one.e2e.p99_s) <= one.request_rate <= 400 / span
    assert two.request_rate == pytest.approx(one.request_rate / 2, rel=0.1)
    assert two.ttft.p90_s <= one.ttft.p90_s
    # The same requests at a rate instead of their times: their lengths, in order, cycled.
    prompts, outputs = request_lengths(w.model_copy(update={"rate": 1.0}), rng, 1000)
    assert list(prompts[:400]) == [r["input_tokens"] for r in reqs] and list(outputs[400:800]) == list(outputs[:400])


def test_an_untimed_trace_cannot_be_replayed() -> None:
    w = _traced([{"input_tokens": 100, "output_tokens": 10}], concurrency=2)
    with pytest.raises(DomainError, match="arrival times"):
        simulate(_load(w), replay=True)
    assert simulate(_load(w), concurrency=2, requests=20).ttft.mean > 0  # its lengths, sent by two users


def test_a_request_longer_than_the_kv_cache_is_refused_not_waited_for() -> None:
    small = [{"arrival_s": 0.1 * i, "input_tokens": 500, "output_tokens": 50} for i in range(20)]
    load = _load(_traced(small))
    giant = {"arrival_s": 1.05, "input_tokens": int(load.kv_tokens) + 1, "output_tokens": 10}
    with pytest.raises(DomainError, match=r"request 12 \(in arrival order\) needs") as err:
        simulate(_load(_traced([*small, giant])), replay=True)
    assert err.value.field == "workload.workload_trace"


def test_a_named_dataset_spreads_the_latencies_the_means_leave_in_lockstep() -> None:
    """32 users of fixed 300 / 200-token requests finish together and prefill together (every TTFT alike); ShareGPT's
    measured lengths at the same means spread end-to-end latency and stagger the prefills."""
    base = InferenceWorkload(prompt_len=300, output_len=200, concurrency=32)
    means = simulate(_load(base), concurrency=32, requests=600)
    shared = simulate(_load(base.model_copy(update={"length_distribution": "sharegpt"})), concurrency=32, requests=600)
    assert means.e2e.p90 / means.e2e.p50 < 1.05 < 1.5 < shared.e2e.p90 / shared.e2e.p50
    assert shared.ttft.p50 < means.ttft.p50


def test_every_path_is_deterministic_and_the_seed_moves_it() -> None:
    w = InferenceWorkload(prompt_len=500, output_len=100, length_distribution="arxiv-summarization")
    a = simulate(_load(w), rate=8.0, requests=300, burstiness=0.5)
    assert a == simulate(_load(w), rate=8.0, requests=300, burstiness=0.5)
    assert a != simulate(_load(w), rate=8.0, requests=300, burstiness=0.5, seed=1)


def test_gamma_arrivals_as_vllm_bench_serve_draws_them() -> None:
    """get_request: gamma intervals of shape b, scale 1 / (rate b), scaled so the last arrival is at n / rate."""
    rng = np.random.default_rng(11)
    t = np.asarray(open_loop_arrivals(rng, 4.0, 20_000, 0.25))
    gaps = np.diff(t)
    assert t[-1] == pytest.approx(20_000 / 4.0) and gaps.mean() == pytest.approx(0.25, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(0.25**-0.5, rel=0.05)  # cv of a gamma of shape b: 1 / sqrt(b)
    load = _load(InferenceWorkload(prompt_len=1024, output_len=128, rate=20.0, objective="gpus"))
    bursty, poisson = simulate(load, rate=20.0, burstiness=0.2), simulate(load, rate=20.0)
    assert bursty.ttft.p99 > poisson.ttft.p99
