"""The keep-or-switch rule of a watch's re-plan (issue 38 §3): keep inside the interval, switch when significant,
shrink dp when nodes are lost. The difference interval is fixed here (x/÷ 1.05) so that the rule, not the
interval's width, is under test; the last test checks the shipped interval's shape."""

from __future__ import annotations

import math
import re

import pytest

from optimizer.costmodel.uncertainty import difference_interval
from optimizer.search import keep_or_switch
from optimizer.search.keep_or_switch import applied, decide, gain_words, priced
from optimizer.search.result import Explanation, PlannedConfig, PlanResult
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

MODEL = load_model_preset("llama-3-8b")
# 96 sequences split over 16 replicas and over 12: a node lost leaves dp 12 a whole split of the batch.
W = TrainingWorkload(global_batch_size=96, seq_len=4096, framework="megatron")
RUNNING = ParallelConfig(tp=2, dp=16, sequence_parallel=True, zero_stage=1, stage_pools=["dgx-h100"])
OTHER = ParallelConfig(tp=1, dp=32, zero_stage=1, stage_pools=["dgx-h100"])


@pytest.fixture(autouse=True)
def five_percent_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keep_or_switch, "difference_interval", lambda r: (r / 1.05, r * 1.05))


def cluster(failed: int = 0) -> ClusterSpec:
    doc = load_cluster_preset("dgx-h100:4").model_dump()
    pool = doc["pools"][0]
    pool["node_states"] = {f"{pool['name']}-{i:03d}": "failed" for i in range(failed)}
    return ClusterSpec.model_validate(doc)


def faster_by(base: PlannedConfig, config: ParallelConfig, gain: float) -> PlannedConfig:
    """`config` as the new search's best, predicted `gain` faster than `base`."""
    est = base.estimate.model_copy(update={"step_time_s": base.estimate.step_time_s / (1 + gain)})
    return PlannedConfig(config=config, estimate=est)


def test_a_gain_inside_its_interval_keeps_the_running_layout() -> None:
    c = cluster()
    running = priced(MODEL, c, W, RUNNING)
    d = decide(MODEL, c, W, RUNNING, faster_by(running, OTHER, 0.03))
    assert d.outcome == "kept" and d.config == RUNNING
    assert d.gain == pytest.approx(0.03) and d.gain_interval is not None and d.gain_interval[0] < 0
    assert re.fullmatch(r"kept: gain 3(\.0)?% \(interval -2\.\.\+8%\)", d.text), d.text


def test_a_significant_gain_switches() -> None:
    c = cluster()
    running = priced(MODEL, c, W, RUNNING)
    d = decide(MODEL, c, W, RUNNING, faster_by(running, OTHER, 0.14))
    assert d.outcome == "switched" and d.config == OTHER
    assert d.text == "switched: gain 14% (interval 9..20%)"


def test_a_significant_gain_below_the_watch_threshold_keeps() -> None:
    c = cluster()
    running = priced(MODEL, c, W, RUNNING)
    d = decide(MODEL, c, W, RUNNING, faster_by(running, OTHER, 0.14), threshold_pct=20)
    assert d.outcome == "kept" and d.threshold_pct == 20
    assert d.text.endswith("below the 20% threshold")
    assert decide(MODEL, c, W, RUNNING, faster_by(running, OTHER, 0.07)).outcome == "switched"  # default 5%


def test_lost_nodes_shrink_dp_before_reshaping() -> None:
    c = cluster(failed=1)  # 24 GPUs: the running layout needs 32
    small = priced(MODEL, c, W, RUNNING.model_copy(update={"dp": 12}))
    d = decide(MODEL, c, W, RUNNING, faster_by(small, OTHER.model_copy(update={"dp": 24}), 0.03))
    assert d.outcome == "shrunk" and d.running_step_time_s is None
    assert d.config == RUNNING.model_copy(update={"dp": 12})
    assert d.no_longer_fits == "lacks 8 GPUs (1 node)"
    assert d.text.startswith("shrunk: dp 16 -> 12 (the running layout lacks 8 GPUs (1 node)); the reshaped optimum's")
    assert d.text.endswith("is not significant")


def test_lost_nodes_switch_when_the_reshaped_optimum_is_significantly_faster() -> None:
    c = cluster(failed=1)
    small = priced(MODEL, c, W, RUNNING.model_copy(update={"dp": 12}))
    reshaped = OTHER.model_copy(update={"dp": 24})
    d = decide(MODEL, c, W, RUNNING, faster_by(small, reshaped, 0.3))
    assert d.outcome == "switched" and d.config == reshaped and d.gain == pytest.approx(0.3)


def test_kept_plan_result_runs_the_running_layout_with_the_optimum_beside_it() -> None:
    c = cluster()
    running = priced(MODEL, c, W, RUNNING)
    new = faster_by(running, OTHER, 0.03)
    result = PlanResult(
        status="OPTIMAL",
        objective="step_time_s",
        objective_value=new.estimate.step_time_s,
        lower_bound=new.estimate.step_time_s,
        plan=new,
        explanation=Explanation(summary="optimum"),
        solve_time_s=1.0,
        candidates_total=1,
        candidates_solved=1,
    )
    d = decide(MODEL, c, W, RUNNING, new)
    out = applied(MODEL, c, W, result, d)
    assert out.plan is not None and out.plan.config == RUNNING and out.decision == d
    assert out.status == "FEASIBLE" and out.objective_value == running.estimate.step_time_s
    assert out.alternatives[0].config == OTHER and out.alternatives[0].delta_pct < 0
    assert out.explanation.summary.startswith("kept: gain 3")
    switched = decide(MODEL, c, W, RUNNING, faster_by(running, OTHER, 0.3))
    assert applied(MODEL, c, W, result, switched) == result.model_copy(update={"decision": switched})


def test_gain_words() -> None:
    assert gain_words(0.012, (-0.03, 0.05)) == "gain 1.2% (interval -3..+5%)"
    assert gain_words(0.14, (0.09, 0.19)) == "gain 14% (interval 9..19%)"


def test_the_shipped_difference_interval_brackets_the_ratio() -> None:
    lo, hi = difference_interval(1.1)
    assert lo < 1.1 < hi and math.log(hi / 1.1) > 0
