"""Speculative decoding (MTP / EAGLE) with the acceptance rate as an input [issue 50 §2]."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_sim import simulate
from optimizer.costmodel.speculative import tokens_per_step
from optimizer.frameworks.validation import validate
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

MODEL = load_model_preset("deepseek-v3")
CLUSTER = load_cluster_preset("hgx-h200")
CFG = ParallelConfig(tp=8, ep=8, etp=1)
BASE = InferenceWorkload(prompt_len=1000, output_len=500, batch=16, precision="fp8")


def test_tokens_per_step_is_leviathans_expectation() -> None:
    assert tokens_per_step(0, None) == 1.0
    assert tokens_per_step(1, 0.8) == pytest.approx(1.8)
    assert tokens_per_step(3, 0.5) == pytest.approx(1.875)


def test_mtp_trades_a_dearer_iteration_for_fewer_of_them() -> None:
    plain = estimate(MODEL, CLUSTER, BASE, CFG, latency=False)
    mtp_w = BASE.model_copy(update={"spec_tokens": 1, "acceptance_rate": 0.8})
    mtp = estimate(MODEL, CLUSTER, mtp_w, CFG, latency=False)
    assert plain.tpot_s is not None and mtp.tpot_s is not None
    # An iteration costs more (two positions verified and a draft layer) but emits 1.8 tokens.
    assert mtp.tpot_s * 1.8 > plain.tpot_s
    assert mtp.tpot_s < plain.tpot_s
    # A draft nobody accepts only costs.
    none = estimate(MODEL, CLUSTER, mtp_w.model_copy(update={"acceptance_rate": 0.0}), CFG, latency=False)
    assert none.tpot_s is not None and none.tpot_s > plain.tpot_s


def test_the_simulation_and_the_steady_state_price_the_same_speedup() -> None:
    w = BASE.model_copy(update={"spec_tokens": 1, "acceptance_rate": 0.8})
    load = ReplicaLoad(MODEL, CLUSTER, w, CFG, validate(MODEL, CLUSTER, w, CFG))
    plain = ReplicaLoad(MODEL, CLUSTER, BASE, CFG, validate(MODEL, CLUSTER, BASE, CFG))
    a = simulate(load, concurrency=8, requests=40)
    b = simulate(plain, concurrency=8, requests=40)
    assert a.tpot.mean < b.tpot.mean
    pt = load.at_rate(0.5)
    assert pt is not None and pt.tpot_s == pytest.approx(pt.step_s / 1.8)


def test_speculation_without_an_acceptance_rate_names_the_field() -> None:
    with pytest.raises(ValidationError, match="acceptance_rate"):
        InferenceWorkload(prompt_len=10, output_len=10, spec_tokens=2)
