"""One engine step on every serving path (issue 39): the fixed-batch estimate and the request-rate load price the
same iteration (host time, CUDA-graph capture limit); the engine knobs move what they should; the latency
simulation's percentiles are ordered, grow with load, and a single closed-loop user sees a lone request's latency."""

from __future__ import annotations

import pytest

from optimizer.costmodel.constants import (
    ENGINE_ITERATION_OVERHEAD_S,
    KERNEL_LAUNCH_S,
    KERNELS_PER_LAYER,
    TRTLLM_TENSORRT_ITERATION_OVERHEAD_S,
)
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.serving_engines import engine_limits
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_sim import simulate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import validate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.gpu_catalog import BUILTIN_GPUS
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

MODEL: ModelSpec = load_model_preset("llama-3-8b")
CLUSTER: ClusterSpec = load_cluster_preset("dgx-h100")
TP1 = ParallelConfig(tp=1)


def _load(w: InferenceWorkload, c: ParallelConfig = TP1) -> ReplicaLoad:
    return ReplicaLoad(MODEL, CLUSTER, w, c, validate(MODEL, CLUSTER, w, c))


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("batch", [1, 64, 600])
def test_fixed_batch_and_rate_paths_price_the_same_step(engine: str, batch: int) -> None:
    """TPOT of a fixed batch is the request-rate path's decode iteration at that batch: same host time, same
    CUDA-graph limit (600 sequences exceed every engine's default capture limit on an H100 at TP 1)."""
    w = InferenceWorkload(prompt_len=256, output_len=64, batch=batch, engine=engine)
    est = estimate(MODEL, CLUSTER, w, TP1)
    assert est.tpot_s is not None
    assert est.tpot_s == pytest.approx(_load(w).iteration_s(float(batch), 0.0), rel=1e-12)


def test_the_fixed_batch_path_pays_the_host_time() -> None:
    """The TensorRT engine backend (C++ runtime) and the PyTorch backend differ by the host time of each step."""
    w = InferenceWorkload(prompt_len=256, output_len=64, engine="trtllm")
    pytorch = estimate(MODEL, CLUSTER, w, TP1)
    tensorrt = estimate(MODEL, CLUSTER, w.model_copy(update={"trtllm_backend": "tensorrt"}), TP1)
    assert pytorch.tpot_s is not None and tensorrt.tpot_s is not None
    gap = ENGINE_ITERATION_OVERHEAD_S["trtllm"] - TRTLLM_TENSORRT_ITERATION_OVERHEAD_S
    assert pytorch.tpot_s - tensorrt.tpot_s == pytest.approx(gap, rel=1e-9)
    assert gap > 0


def test_cuda_graph_capture_limits_follow_the_engines_code() -> None:
    h100, a100_40 = BUILTIN_GPUS["H100-SXM-80GB"], BUILTIN_GPUS["A100-SXM-40GB"]
    # vLLM: min(2 x max_num_seqs, 512, max_num_batched_tokens)
    assert engine_limits("vllm", h100, 1).graph_max_batch == 512
    assert engine_limits("vllm", h100, 1, max_seqs=8).graph_max_batch == 16
    # SGLang: by GPU memory and TP size
    assert engine_limits("sglang", h100, 1).graph_max_batch == 256
    assert engine_limits("sglang", h100, 8).graph_max_batch == 512
    assert engine_limits("sglang", a100_40, 1).graph_max_batch == 32
    # TensorRT-LLM PyTorch: CudaGraphConfig's default 128; off: 0
    assert engine_limits("trtllm", h100, 1).graph_max_batch == 128
    assert engine_limits("vllm", h100, 1, cuda_graphs=False).graph_max_batch == 0


def test_eager_decode_pays_its_kernel_launches() -> None:
    """Without CUDA graphs (or past the capture limit) every layer launches its kernels."""
    w = InferenceWorkload(prompt_len=256, output_len=64, batch=32)
    graphed = estimate(MODEL, CLUSTER, w, TP1).tpot_s
    eager = estimate(MODEL, CLUSTER, w.model_copy(update={"cuda_graphs": False}), TP1).tpot_s
    past_limit = estimate(MODEL, CLUSTER, w.model_copy(update={"cuda_graph_max_batch": 16}), TP1).tpot_s
    assert graphed is not None and eager is not None and past_limit is not None
    launches = MODEL.num_layers * KERNELS_PER_LAYER * KERNEL_LAUNCH_S
    assert eager - graphed == pytest.approx(launches, rel=1e-9)
    assert past_limit == pytest.approx(eager, rel=1e-12)


def test_a_lower_memory_fraction_holds_fewer_sequences() -> None:
    w = InferenceWorkload(prompt_len=2048, output_len=2048, engine="vllm", max_seqs=4096)
    full, half = _load(w), _load(w.model_copy(update={"memory_fraction": 0.5}))
    assert 1 <= half.max_decoding < full.max_decoding
    # and the simulated replica runs fewer sequences at once under the same crowd of users
    crowded = simulate(full, concurrency=4000, requests=4000)
    squeezed = simulate(half, concurrency=4000, requests=4000)
    assert squeezed.mean_decoding < crowded.mean_decoding
    assert squeezed.ttft.p50 > crowded.ttft.p50


def test_max_seqs_caps_the_running_batch() -> None:
    w = InferenceWorkload(prompt_len=128, output_len=256, engine="sglang", max_seqs=16)
    rep = simulate(_load(w), concurrency=64)
    assert rep.mean_decoding <= 16
    assert simulate(_load(w.model_copy(update={"max_seqs": 64})), concurrency=64).mean_decoding > 16


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_one_closed_loop_user_sees_a_lone_request(engine: str) -> None:
    w = InferenceWorkload(prompt_len=512, output_len=128, engine=engine)
    est = estimate(MODEL, CLUSTER, w, TP1)
    rep = simulate(_load(w), concurrency=1, requests=50)
    assert est.ttft_s is not None and est.tpot_s is not None
    for p in (rep.ttft.mean, rep.ttft.p50, rep.ttft.p99):
        assert p == pytest.approx(est.ttft_s, rel=1e-9)
    for p in (rep.tpot.mean, rep.tpot.p99):
        assert p == pytest.approx(est.tpot_s, rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_percentiles_are_ordered_and_grow_with_the_rate(engine: str) -> None:
    w = InferenceWorkload(prompt_len=512, output_len=128, prompt_len_cv=0.5, output_len_cv=0.5, engine=engine)
    load = _load(w)
    reports = [simulate(load, rate=r) for r in (2.0, 15.0, 30.0)]
    for rep in reports:
        for p in (rep.ttft, rep.tpot):
            assert 0 < p.p50 <= p.p90 <= p.p99
    assert reports[0].ttft.p90 < reports[1].ttft.p90 < reports[2].ttft.p90
    assert reports[0].tpot.mean < reports[1].tpot.mean < reports[2].tpot.mean
    # the completed rate follows the offered one at a sustained load
    assert reports[0].request_rate == pytest.approx(2.0, rel=0.25)


def test_the_simulation_is_deterministic_and_fast() -> None:
    import time

    load = _load(InferenceWorkload(prompt_len=512, output_len=128, prompt_len_cv=0.5))
    t0 = time.perf_counter()
    a = simulate(load, rate=20.0)
    assert time.perf_counter() - t0 < 1.0
    assert a == simulate(load, rate=20.0)


def test_closed_loop_latency_grows_with_users() -> None:
    load = _load(InferenceWorkload(prompt_len=512, output_len=128))
    few, many = simulate(load, concurrency=4), simulate(load, concurrency=256)
    assert few.tpot.mean < many.tpot.mean
    assert few.request_rate < many.request_rate


def test_estimate_reports_percentiles_at_the_workloads_load() -> None:
    base = InferenceWorkload(prompt_len=512, output_len=128)
    assert estimate(MODEL, CLUSTER, base, TP1).load_latency is None
    at_rate = estimate(
        MODEL, CLUSTER, base.model_copy(update={"rate": 8.0, "objective": "gpus"}), ParallelConfig(tp=1, dp=2)
    )
    assert at_rate.load_latency is not None
    assert at_rate.load_latency.replicas == 2 and at_rate.load_latency.rate_per_replica == 4.0
    users = estimate(MODEL, CLUSTER, base.model_copy(update={"concurrency": 16}), TP1).load_latency
    assert users is not None and users.users_per_replica == 16
    assert users.ttft.p50_s <= users.ttft.p90_s <= users.ttft.p99_s


def test_chunked_prefill_off_runs_a_long_prompt_in_one_iteration() -> None:
    """A prompt longer than the token budget: chunked, it takes several iterations (each paying the host time);
    unchunked, one."""
    w = InferenceWorkload(prompt_len=6000, output_len=16, max_batched_tokens=2048)
    chunked = simulate(_load(w), concurrency=1, requests=5).ttft.mean
    whole = simulate(_load(w.model_copy(update={"chunked_prefill": False})), concurrency=1, requests=5).ttft.mean
    assert whole < chunked


@pytest.mark.parametrize(
    ("rate", "users", "field"), [(0.0, None, "rate"), (-1.0, None, "rate"), (None, 0, "concurrency")]
)
def test_bad_loads_are_refused_naming_the_field(rate: float | None, users: int | None, field: str) -> None:
    with pytest.raises(DomainError) as exc:
        simulate(_load(InferenceWorkload(prompt_len=64, output_len=8)), rate=rate, concurrency=users)
    assert field in exc.value.field


def test_an_open_loop_rate_above_capacity_is_not_sustained() -> None:
    load = _load(InferenceWorkload(prompt_len=512, output_len=128, prompt_len_cv=0.5, output_len_cv=0.5))
    top = load.saturated_point
    assert top is not None
    assert simulate(load, rate=0.3 * top.rate).stable
    over = simulate(load, rate=1.5 * top.rate)
    assert not over.stable and over.request_rate < 1.5 * top.rate
