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
