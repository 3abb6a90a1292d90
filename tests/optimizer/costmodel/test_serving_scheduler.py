"""Latency under load as the engines schedule it [issue 50 §1]: requests wait for KV admission by each engine's own
rule, prompts sent together queue for the token budget, and a paged engine short of KV evicts and recomputes."""

from __future__ import annotations

import dataclasses

import pytest

from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_sim import simulate
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


def test_users_sent_together_spread_their_first_tokens() -> None:
    """64 users start at once: their prompts share the token budget, so TTFT is a spread, not one value (was
    p50 = p90 = p99, as if every prefill ran alone)."""
    rep = simulate(_load(InferenceWorkload(prompt_len=2048, output_len=256)), concurrency=64, requests=256)
    assert rep.ttft.p50 < rep.ttft.p99
    assert rep.ttft.p90 < rep.ttft.p99 * (1 - 1e-6)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_more_users_than_the_kv_cache_holds_wait_for_admission(engine: str) -> None:
    w = InferenceWorkload(prompt_len=2048, output_len=1024, engine=engine, memory_fraction=0.35, max_seqs=4096)
    load = _load(w)
    holds = load.kv_tokens / (w.prompt_len + w.output_len)
    few = simulate(load, concurrency=max(1, int(holds / 4)), requests=200, warmup=0.0)
    many = simulate(load, concurrency=int(4 * holds), requests=400, warmup=0.0)
    assert many.peak_running < int(4 * holds)  # the rest wait
    # Waiting for admission: the crowd's TTFT is a sizeable share of a request's whole decode.
    assert many.ttft.mean > 10 * few.ttft.mean
    assert many.ttft.mean > 0.2 * w.output_len * few.tpot.mean


def test_reserving_the_whole_request_admits_fewer_than_paging() -> None:
    """TensorRT-LLM GUARANTEED_NO_EVICT reserves prompt + output at admission; vLLM takes blocks as tokens come and
    evicts (recompute) when they run out."""
    w = InferenceWorkload(prompt_len=1024, output_len=2048, engine="vllm", memory_fraction=0.35, max_seqs=4096)
    paged = _load(w)
    reserved = _load(w)
    reserved.limits = dataclasses.replace(reserved.limits, reserves_whole_request=True)
    users = int(2 * paged.kv_tokens / (w.prompt_len + w.output_len))
    a = simulate(paged, concurrency=users, requests=2 * users, warmup=0.0)
    b = simulate(reserved, concurrency=users, requests=2 * users, warmup=0.0)
    assert b.peak_running < a.peak_running
    assert b.evictions == 0 < a.evictions


def test_a_burst_queues_behind_the_token_budget() -> None:
    """`vllm bench serve` without a rate: every prompt at t = 0; the last admitted waits for all before it."""
    load = _load(InferenceWorkload(prompt_len=4000, output_len=200))
    rep = simulate(load, burst=True, requests=300, warmup=0.0)
    prefill_all = 300 * 4000 / load.token_budget * load.iteration_s(0.0, float(load.token_budget))
    assert rep.ttft.p99 > 0.5 * prefill_all
    assert rep.ttft.p50 < 0.75 * rep.ttft.p99


def test_sglang_retraction_does_not_readmit_in_a_loop() -> None:
    """Long outputs past SGLang's 4096-token reservation clip: retracted requests wait for room instead of being
    re-admitted every few steps (the reservation once went negative: 684k evictions for 150 requests)."""
    model, cluster = load_model_preset("deepseek-v3"), load_cluster_preset("hgx-h200")
    cfg = ParallelConfig(tp=8, ep=8, etp=1)
    w = InferenceWorkload(prompt_len=1024, output_len=8192, precision="fp8", engine="sglang")
    load = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg))
    rep = simulate(load, concurrency=512, requests=150)
    assert rep.evictions < 150
    assert rep.ttft.mean > 10.0  # most of the 512 users wait for admission
