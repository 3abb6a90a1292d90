"""Serving takes the engines' defaults for unset knobs [issue 50: `--tp 8 --ep 8` was refused until `--etp 1`]."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

MODEL = load_model_preset("deepseek-v3")
CLUSTER = load_cluster_preset("hgx-h200")
W = InferenceWorkload(prompt_len=1000, output_len=1000, batch=64, precision="fp8")


def test_tp8_ep8_serves_with_whole_experts() -> None:
    given = estimate(MODEL, CLUSTER, W, ParallelConfig(tp=8, ep=8), latency=False)
    explicit = estimate(MODEL, CLUSTER, W, ParallelConfig(tp=8, ep=8, etp=1), latency=False)
    assert given.tpot_s == explicit.tpot_s
    assert given.feasible


def test_an_explicit_tensor_split_under_ep_is_still_refused() -> None:
    with pytest.raises(DomainError, match="etp=8") as exc:
        estimate(MODEL, CLUSTER, W, ParallelConfig(tp=8, ep=8, etp=8), latency=False)
    assert exc.value.field == "config.ep"


def test_a_batch_the_engine_would_not_admit_is_not_feasible() -> None:
    """[issue 50 §3] The weights fit and the device holds the KV, but the engine's own share does not."""
    from optimizer.costmodel.estimate import admitted_sequences
    from optimizer.costmodel.serving_load import ReplicaLoad
    from optimizer.frameworks.validation import validate

    model, cluster, tp1 = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100"), ParallelConfig(tp=1)
    w = InferenceWorkload(prompt_len=2048, output_len=2048, batch=8, memory_fraction=0.5)
    admits = admitted_sequences(ReplicaLoad(model, cluster, w, tp1, validate(model, cluster, w, tp1)))
    assert estimate(model, cluster, w.model_copy(update={"batch": admits}), tp1, latency=False).feasible
    over = estimate(model, cluster, w.model_copy(update={"batch": admits + 1}), tp1, latency=False)
    assert not over.feasible
    assert over.reason is not None and f"admits at most {admits} sequences" in over.reason
    assert "--gpu-memory-utilization 0.5" in over.reason
