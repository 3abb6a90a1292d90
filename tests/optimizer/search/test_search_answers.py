"""The planner's answer is what it says it is (issue 15): each test reproduces a wrong answer found by reading the
search, and fails on the code that had it."""

from __future__ import annotations

import pytest

from optimizer.errors import DomainError
from optimizer.search.oracle import oracle_ranked
from optimizer.search.planner import has_plan, plan
from optimizer.search.result import Progress
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.objectives import format_objective, objective_name
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from tests.optimizer.helpers import h100_a100_priced, live_and_failed_pools
from tests.optimizer.search.test_planner import SMALL_SPACE, small_cluster, tiny_model


@pytest.mark.parametrize("prices", [(4.0, 1.0), (1.0, 4.0), (2.5, 1.2)])
def test_cost_top_k_equal_the_oracles_cheapest_signatures(prices: tuple[float, float]) -> None:
    # The pool-structure pruning compared a price threshold with bounds in seconds: with two priced pools the
    # runners-up were not the next cheapest while the status read OPTIMAL.
    model = tiny_model(layers=4)
    cluster = small_cluster(2.5, gpn=2, second=3.0, prices=prices)
    w = TrainingWorkload(global_batch_size=8, seq_len=2048, objective="cost")
    got = plan(model, cluster, w, SMALL_SPACE, top_k=3, time_limit_s=120, interval_rule=False)
    want = oracle_ranked(model, cluster, w, SMALL_SPACE)[:3]
    assert got.status == "OPTIMAL" and got.objective_value is not None and len(want) == 3
    objectives = [got.objective_value] + [got.objective_value + a.delta_s for a in got.alternatives]
    assert objectives == pytest.approx([v[0] for v in want], rel=1e-6)


def test_cost_runners_up_on_the_issue_cluster() -> None:
    # The issue's reproduction: llama-2-13b on 1 x 8 H100 at 2.5 and 2 x 8 A100 at 1.2 per GPU-hour, gbs 32, seq
    # 4096, top 3. A tp=2 pp=1 dp=4 cp=1 plan on the H100 pool alone (one pool: no structure branching) was cheaper
    # than the third plan the search reported as proven, and not among the three.
    cluster = h100_a100_priced("two", h100_nodes=1)
    model = resolve_model("llama-2-13b")
    w = TrainingWorkload(global_batch_size=32, seq_len=4096, objective="cost")
    got = plan(model, cluster, w, top_k=3, time_limit_s=60)
    pinned = SearchSpace(pins=parse_pins(["tp=2", "pp=1", "dp=4", "cp=1"]), pools=["h100"])
    other = plan(model, cluster, w, pinned, top_k=1, time_limit_s=60)
    assert got.status == "OPTIMAL" and got.objective_value is not None and other.objective_value is not None
    found = [got.objective_value] + [got.objective_value + a.delta_s for a in got.alternatives]
    assert len(found) == 3
    # The pinned subspace's best is one of the top 3 or costs at least the third of them.
    listed = any(v == pytest.approx(other.objective_value, rel=1e-9) for v in found)
    assert listed or found[-1] <= other.objective_value * (1 + 1e-9), (found, other.objective_value)


def test_no_plan_within_the_limit_is_unknown_not_infeasible() -> None:
    # A search cancelled before any plan never says "no configuration fits" nor suggests more GPUs.
    model, cluster = tiny_model(layers=4), small_cluster(8.0, gpn=4)
    w = TrainingWorkload(global_batch_size=8, seq_len=2048)
    r = plan(model, cluster, w, SMALL_SPACE, time_limit_s=30, cancelled=lambda: True)
    assert r.status == "UNKNOWN" and r.plan is None
    assert r.explanation is not None and r.explanation.infeasible is None
    assert "fits" not in r.explanation.summary and "no plan found" in r.explanation.summary.lower()


def test_a_sub_solve_that_hit_its_limit_weakens_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    # A candidate's CP-SAT solve that stopped at its time limit is not exact: the overall status cannot be OPTIMAL.
    from optimizer.search import stage_model

    real = stage_model.StageModel._solve_one

    def capped(self: stage_model.StageModel, *a: object, **k: object) -> stage_model.StageLayout:
        res = real(self, *a, **k)  # type: ignore[arg-type]
        if res.layers and res.status == "OPTIMAL":  # as if the solver had stopped with this incumbent
            return stage_model.StageLayout("FEASIBLE", res.layers, res.pools, res.objective_s, res.objective_s * 0.5)
        return res

    monkeypatch.setattr(stage_model.StageModel, "_solve_one", capped)
    model, cluster = tiny_model(layers=4), small_cluster(8.0, gpn=4)
    r = plan(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE, time_limit_s=30)
    assert r.plan is not None and r.status == "FEASIBLE"
    assert r.gap is not None and r.gap > 0 and r.lower_bound is not None and r.lower_bound < r.objective_value


def test_has_plan_is_a_probe_not_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    # The feasibility probe stops at the first plan and builds no explanation.
    from optimizer.search import training_search  # where the training search builds its explanation

    calls: list[int] = []
    monkeypatch.setattr(training_search, "explain", lambda *a, **k: calls.append(1))
    model, cluster = tiny_model(layers=4), small_cluster(8.0, gpn=4)
    assert has_plan(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), SMALL_SPACE, 10.0)
    assert calls == []


def test_infeasibility_names_the_rule_when_memory_is_not_it() -> None:
    # Pins that leave no candidate at all (dp=3 does not divide the batch of 8) are not "memory".
    model, cluster = tiny_model(layers=4), small_cluster(80.0, gpn=4)
    space = SearchSpace(pins=parse_pins(["dp=3", "tp=1", "pp=1", "cp=1"]))
    r = plan(model, cluster, TrainingWorkload(global_batch_size=8, seq_len=2048), space, time_limit_s=10)
    assert r.status == "INFEASIBLE"
    assert r.explanation is not None and r.explanation.infeasible is not None
    assert r.explanation.infeasible.resource != "memory", r.explanation.infeasible.detail


def _serving_cluster() -> ClusterSpec:
    return build_cluster({"name": "serve", "pools": live_and_failed_pools("A100-SXM-80GB")})


def test_serving_on_pools_without_a_healthy_gpu_names_the_pools() -> None:
    w = InferenceWorkload(prompt_len=512, output_len=128, batch=8)
    with pytest.raises(DomainError) as exc:
        plan(resolve_model("llama-3-8b"), _serving_cluster(), w, SearchSpace(pools=("down",)), time_limit_s=10)
    assert exc.value.field == "pools" and "no healthy GPU" in exc.value.rule


def test_serving_pins_that_leave_nothing_are_named_before_the_search() -> None:
    w = InferenceWorkload(prompt_len=512, output_len=128, batch=8)
    space = SearchSpace(pins=parse_pins(["tp=3"]))
    with pytest.raises(DomainError) as exc:
        plan(resolve_model("llama-3-8b"), _serving_cluster(), w, space, time_limit_s=10)
    assert exc.value.field == "pin.tp" and "num_attention_heads=32" in exc.value.rule


def test_serving_reports_progress_and_can_be_cancelled() -> None:
    model, cluster = resolve_model("llama-3-8b"), _serving_cluster()
    w = InferenceWorkload(prompt_len=512, output_len=128, batch=8)
    seen: list[Progress] = []
    done = plan(model, cluster, w, time_limit_s=30, progress=seen.append)
    assert done.status == "OPTIMAL" and seen and seen[-1].solved == done.candidates_solved
    stopped = plan(model, cluster, w, time_limit_s=30, cancelled=lambda: True)
    assert stopped.status == "UNKNOWN" and stopped.plan is None and stopped.explanation is not None
    assert stopped.explanation.infeasible is None and "cancelled" in stopped.explanation.summary


def test_objective_names_have_one_source() -> None:
    assert objective_name(TrainingWorkload(global_batch_size=8, seq_len=2048, objective="cost")) == "price_per_step"
    assert objective_name(TrainingWorkload(global_batch_size=8, seq_len=2048)) == "step_time_s"
    assert objective_name(InferenceWorkload(prompt_len=8, output_len=8, batch=1)) == "tpot_s"
    assert format_objective("price_per_step", 0.0151) == "0.0151 per step"
    assert format_objective("tpot_s", 0.00821) == "8.21 ms"
