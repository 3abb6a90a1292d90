"""The interval rule (issue 38 §2; optimizer/search/decision.py): among plans the difference interval cannot order,
the one nearer measured territory wins; an out-of-memory-risk plan loses to one that fits with margin; a plan
clearly faster (outside the interval) still wins; the explanation says when the rule decided."""

from __future__ import annotations

import dataclasses

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.costmodel.uncertainty import difference_interval, training_features
from optimizer.search.decision import (
    DEFAULT_KNOBS,
    Contender,
    contenders,
    decide,
    knobs_off_default,
    territory_distance,
)
from optimizer.search.explain import decision_text
from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import FRAMEWORKS
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

W = TrainingWorkload(global_batch_size=64, seq_len=4096)


@pytest.fixture(scope="module")
def setup() -> tuple[ModelSpec, ClusterSpec]:
    return load_model_preset("llama-3-8b"), load_cluster_preset("two-dgx-h100")


def _est(setup: tuple[ModelSpec, ClusterSpec], cfg: ParallelConfig, oom: bool = False) -> Estimate:
    est = estimate(*setup, W, cfg)
    assert est.feasible
    if oom:  # as if the 80% upper memory bound of stage 0 exceeded the GPU
        stages = [s.model_copy(update={"oom_risk": s.index == 0}) for s in est.stages]
        est = est.model_copy(update={"stages": stages})
    return est


A = ParallelConfig(tp=2, pp=1, dp=8, mbs=1, zero_stage=1)
B = ParallelConfig(tp=4, pp=1, dp=4, mbs=1, zero_stage=1)


def _c(
    setup: tuple[ModelSpec, ClusterSpec], cfg: ParallelConfig, obj: float, dist: float, oom: bool = False
) -> Contender:
    return Contender(obj, cfg, _est(setup, cfg, oom), dist, headroom_gb=20.0, off_default=())


def test_indistinguishable_nearer_measured_territory_wins(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    fast, near = _c(setup, A, 1.000, dist=2.0), _c(setup, B, 1.004, dist=0.0)
    d = decide([fast, near], setup[1])
    assert d.pick is near and d.fastest is fast
    lo, hi = d.fastest_interval_pct
    assert lo < 0 < hi
    text = decision_text(d)
    assert text.startswith("Picked tp=4 pp=1 dp=4")
    assert "over tp=2 pp=1 dp=8" in text
    assert "(0.4% faster predicted, indistinguishable: difference interval" in text
    assert "because it is nearer measured territory (0.0 knob steps" in text


def test_headroom_decides_only_where_the_faster_plan_reaches_capacity(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    """Issue 53 §3: a plan that fits with margin keeps its speed; more headroom beside it buys nothing (this test
    asserted the old rule, the roomier slower plan winning, before)."""
    fast = dataclasses.replace(_c(setup, A, 1.0, 0.0), headroom_gb=5.0)
    roomy = dataclasses.replace(_c(setup, B, 1.01, 0.0), headroom_gb=30.0)
    d = decide([fast, roomy], setup[1])
    assert d.pick is fast and d.roomier is roomy
    text = decision_text(d)
    assert (
        "Kept it over tp=4 pp=1 dp=4 mbs=1 1f1b zero=1 recompute=none (1.0% slower predicted, 25.0 GB more headroom)"
        in text
    )
    assert "headroom decides only where the faster plan's memory interval reaches the GPU's capacity" in text
    peak = fast.estimate.stages[0].memory_gb.total
    assert f"stage 0 peaks at {peak:.1f} GB, its 80% interval reaching" in text and "below the GPU's" in text


def test_headroom_decides_when_no_plan_fits_with_margin(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    fast = dataclasses.replace(_c(setup, A, 1.0, 0.0, oom=True), headroom_gb=-5.0)
    roomy = dataclasses.replace(_c(setup, B, 1.01, 0.0, oom=True), headroom_gb=-1.0)
    d = decide([fast, roomy], setup[1])
    assert d.pick is roomy and d.all_oom and d.roomier is None
    text = decision_text(d)
    assert "because it leaves more memory headroom (-1.0 GB against -5.0 GB" in text
    assert "the faster plan's stage 0 peaks at" in text and "above the GPU's" in text


def test_defaults_break_ties(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    plain = dataclasses.replace(_c(setup, B, 1.01, 0.0), headroom_gb=5.2, off_default=())
    tuned = dataclasses.replace(_c(setup, A, 1.0, 0.0), off_default=("mbs", "vp"))
    d = decide([tuned, plain], setup[1])
    assert d.pick is plain
    assert "fewer knobs away from the framework's defaults (none against mbs, vp)" in decision_text(d)


def test_clearly_faster_plan_still_wins(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    fast, near = _c(setup, A, 1.0, dist=3.0), _c(setup, B, 1.5, dist=0.0)
    assert difference_interval(1.5)[0] > 1  # the interval of the true ratio excludes 1: B is slower
    d = decide([near, fast], setup[1])
    assert d.pick is fast
    assert decision_text(d) == ""


def test_oom_risk_plan_loses_to_one_that_fits(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    risky, safe = _c(setup, A, 1.0, 0.0, oom=True), _c(setup, B, 1.3, 0.0)
    d = decide([risky, safe], setup[1])
    assert d.pick is safe and d.skipped_oom == [risky] and not d.all_oom
    assert "Passed over tp=2 pp=1 dp=8" in decision_text(d)
    assert "its 80% upper memory bound exceeds the GPU's memory (stage 0 peaks at" in decision_text(d)


def test_all_oom_risk_picks_fastest_and_flags_it(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    risky, slower = _c(setup, A, 1.0, 0.0, oom=True), _c(setup, B, 1.3, 0.0, oom=True)
    d = decide([slower, risky], setup[1])
    assert d.pick is risky and d.all_oom
    assert "Out-of-memory risk: no plan found fits with margin" in decision_text(d)


def test_measured_configs_are_measured_territory(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    model, cluster = setup
    far = ParallelConfig(tp=8, pp=1, dp=2, mbs=32, zero_stage=1)  # mbs 32: beyond any published run (16)
    feats = training_features(model, cluster, W, far)
    assert territory_distance(feats, []) > 0
    assert territory_distance(feats, [feats]) == 0
    found = [(1.0, far, estimate(model, cluster, W, far))]
    (c,) = contenders(model, cluster, W, found, measured=[far])
    assert c.distance == 0


def test_framework_defaults() -> None:
    assert set(DEFAULT_KNOBS) == set(FRAMEWORKS)
    assert knobs_off_default(ParallelConfig(zero_stage=1), "megatron") == []
    assert knobs_off_default(ParallelConfig(zero_stage=1, mbs=2, recompute="full"), "megatron") == ["recompute", "mbs"]
    assert knobs_off_default(ParallelConfig(zero_stage=3), "torchtitan") == []


def test_planner_alternatives_carry_difference_intervals(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    r = plan(*setup, W, time_limit_s=30, top_k=3)
    assert r.plan is not None and r.alternatives
    for alt in r.alternatives:
        assert alt.delta_interval_pct is not None
        lo, hi = alt.delta_interval_pct
        assert lo <= alt.delta_pct <= hi
        assert alt.indistinguishable == (lo <= 0 <= hi)
    assert r.objective_value == pytest.approx(r.plan.estimate.step_time_s, abs=1e-6)


def test_several_plans_passed_over_are_one_sentence(setup: tuple[ModelSpec, ClusterSpec]) -> None:
    """Issue 48 §10: one "Passed over ..." sentence per skipped plan repeated itself."""
    risky_a, risky_b = _c(setup, A, 1.0, 0.0, oom=True), _c(setup, B, 1.1, 0.0, oom=True)
    safe = _c(setup, A.model_copy(update={"mbs": 2}), 1.3, 0.0)
    d = decide([risky_a, risky_b, safe], setup[1])
    text = decision_text(d)
    assert d.pick is safe and len(d.skipped_oom) == 2
    assert text.count("Passed over") == 1 and "Passed over 2 faster plans" in text, text
