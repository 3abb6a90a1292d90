"""A watch's re-plan weighs its optimum against the layout the watch runs (service/replan_decisions.py): on kept,
the stored plan runs the running layout, the optimum beside it, the decision in the document and last_check."""

from __future__ import annotations

import pytest

from optimizer.search import keep_or_switch
from optimizer.spec.parallel_config import ParallelConfig
from service.jobs import run_job
from service.replan import check_watch
from store.db import Database
from store.repositories.plans import PlanRepository
from store.repositories.watches import WatchRepository
from tests.factories import cluster_and_model, training_watch


def test_a_replan_below_the_watch_threshold_keeps_the_running_layout(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A narrow interval (+-1%): the gain is significant, so the threshold alone decides.
    monkeypatch.setattr(keep_or_switch, "difference_interval", lambda r: (r / 1.01, r * 1.01))
    with db.session() as s:
        cluster, model = cluster_and_model(s, nodes=2)
        watch = training_watch(s, cluster, model)
        watch.switch_threshold_pct = 20.0
        first = check_watch(s, watch, "nightly").job_id
    assert first is not None and run_job(db, first) == "succeeded"
    with db.session() as s:
        plan = PlanRepository(s).by_job(first)
        assert plan is not None and plan.result["decision"] is None  # a first plan weighs nothing
        # The watch runs a slower layout than the optimum (gradient reduction not overlapped: a few percent).
        optimum = ParallelConfig.model_validate(plan.result["plan"]["config"])
        running = optimum.model_copy(update={"overlap_grad_reduce": False})
        doc = plan.document.result
        plan.document.result = {**doc, "plan": {**doc["plan"], "config": running.model_dump(mode="json")}}
        again = check_watch(s, WatchRepository(s).get(watch.id), "user", force=True).job_id
    assert again is not None and run_job(db, again) == "succeeded"
    with db.session() as s:
        kept = PlanRepository(s).by_job(again)
        assert kept is not None
        decision = kept.result["decision"]
        assert decision["outcome"] == "kept" and decision["threshold_pct"] == 20.0
        assert 0.01 < decision["gain"] < 0.2 and decision["text"].endswith("below the 20% threshold")
        assert ParallelConfig.model_validate(kept.result["plan"]["config"]) == running
        assert ParallelConfig.model_validate(kept.result["alternatives"][0]["config"]) == optimum
        assert kept.step_time_s == kept.result["plan"]["estimate"]["step_time_s"]
        w = WatchRepository(s).get(watch.id)
        assert w.last_plan_id == kept.id and w.last_check == decision["text"]
        assert kept.diff is not None and kept.diff["plan"]["changes"] == []
