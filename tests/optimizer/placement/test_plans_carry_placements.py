"""Every training plan carries its placement, and a plan whose placement cannot give the idealised fabric says so
and is priced as placed."""

from __future__ import annotations

import pytest

from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from tests.optimizer.placement.helpers import LAST_RACK, ONE_PER_RACK, nvl_racks

PINS = SearchSpace(pins=parse_pins(["tp=8", "dp=15", "pp=2", "vp=1", "mbs=1", "recompute=none"]))
W = TrainingWorkload(global_batch_size=480, seq_len=8192)


def test_a_fragmented_cluster_s_plan_says_so_and_is_priced_as_placed() -> None:
    model = load_model_preset("llama-3-70b")
    frag = plan(model, nvl_racks(ONE_PER_RACK), W, PINS, top_k=1, time_limit_s=20)
    whole = plan(model, nvl_racks(LAST_RACK), W, PINS, top_k=1, time_limit_s=20)
    assert frag.plan is not None and whole.plan is not None and frag.plan.config.tp == whole.plan.config.tp == 8
    assert frag.placement is not None and whole.placement is not None
    assert not whole.placement.degraded and "Placement degraded" not in whole.explanation.summary
    assert any(d.startswith("TP groups") for d in frag.placement.degraded)
    assert "Placement degraded: TP groups" in frag.explanation.summary
    assert frag.plan.estimate.step_time_s > 1.1 * whole.plan.estimate.step_time_s
    assert frag.objective_value == pytest.approx(frag.plan.estimate.step_time_s, rel=1e-6)
    assert frag.lower_bound is not None and frag.lower_bound <= frag.objective_value


def test_a_serving_plan_has_no_placement() -> None:
    w = InferenceWorkload(prompt_len=1024, output_len=128, batch=4)
    space = SearchSpace(pins=parse_pins(["tp=4", "pp=1"]))
    r = plan(load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100"), w, space, top_k=1, time_limit_s=10)
    assert r.plan is not None and r.placement is None
