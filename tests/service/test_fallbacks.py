"""Fallbacks through the service: a training job stores its plan's fallbacks (unless asked not to), and a watch's
re-plan after the inventory lost a fallback's nodes starts from that fallback and says how fast it answered."""

from __future__ import annotations

from optimizer.search.result import PlanResult
from service.catalog import set_node_state
from service.job_requests import SearchOptions
from service.jobs import run_job, submit
from service.replan import check_watch
from store.db import Database
from store.repositories.plans import PlanRepository
from store.repositories.watches import WatchRepository
from tests.factories import cluster_and_model, training_request, training_watch


def test_a_training_job_stores_its_fallbacks_and_none_when_turned_off(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s, nodes=2)
        on, _ = submit(s, training_request(cluster, model))
        off, _ = submit(s, training_request(cluster, model, search=SearchOptions(fallbacks=False).model_dump()))
    assert run_job(db, on.id) == "succeeded" and run_job(db, off.id) == "succeeded"
    with db.session() as s:
        plans = PlanRepository(s)
        with_fb, without = plans.by_job(on.id), plans.by_job(off.id)
        assert with_fb is not None and without is not None
        r = PlanResult.model_validate(with_fb.result)
        assert r.plan is not None and r.fallbacks and r.fallbacks_time_s is not None
        node = [f for f in r.fallbacks if f.scenario == "node"]
        assert node and all(f.healthy_gpus == {cluster_pool(r): 8} for f in node)
        assert sum(f.preferred for f in node) == 1
        bare = PlanResult.model_validate(without.result)
        assert bare.fallbacks == [] and bare.fallbacks_time_s is None
        assert bare.plan is not None and bare.plan.config == r.plan.config  # the plan itself is the same


def cluster_pool(r: PlanResult) -> str:
    assert r.placement is not None
    return r.placement.hosts[0].pool


def test_a_replan_after_losing_a_fallbacks_node_starts_from_it(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s, nodes=4)
        watch = training_watch(s, cluster, model)
        first = check_watch(s, watch, "nightly").job_id
    assert first is not None and run_job(db, first) == "succeeded"
    with db.session() as s:
        row = PlanRepository(s).by_job(first)
        assert row is not None
        stored = PlanResult.model_validate(row.result)
        one = next(f for f in stored.fallbacks if f.scenario == "node" and f.preferred)
        set_node_state(s, cluster.id, one.lost_nodes[0], "failed")
        again = check_watch(s, WatchRepository(s).get(watch.id), "inventory").job_id
    assert again is not None and run_job(db, again) == "succeeded"
    with db.session() as s:
        replan = PlanRepository(s).by_job(again)
        assert replan is not None
        r = PlanResult.model_validate(replan.result)
        start = r.started_from_fallback
        assert start is not None and start.plan_id == row.id and start.matched_by == "nodes"
        assert start.scenario == "node" and start.config == one.config
        assert start.step_time_s is not None and abs(start.step_time_s - (one.step_time_s or 0)) < 1e-9
        assert 0 <= start.time_to_answer_s < start.search_time_s + 1.0
        assert f"Started from plan {row.id}'s fallback" in r.explanation.summary
        assert r.fallbacks  # the new plan has its own, for the next loss
