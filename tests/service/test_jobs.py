"""Running jobs through the service: one plan per job, history links, cancellation, nightly checks."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from optimizer.spec.cluster_loading import load_cluster_preset
from service import jobs as jobs_module
from service.catalog import set_node_state
from service.jobs import cancel, run_job, submit
from service.replan import check_watches
from store.db import Database
from store.repositories.jobs import LEASE_S, JobRepository
from store.repositories.paging import PageRequest
from store.repositories.plans import PlanFilter, PlanRepository
from store.repositories.watches import WatchRepository
from tests.factories import cluster_and_model, long_training_request, training_request, training_watch


def test_run_job_stores_one_plan_and_never_solves_twice(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
    assert run_job(db, job.id) == "succeeded"
    assert run_job(db, job.id) == "succeeded"  # a redelivery of a finished job
    with db.session() as s:
        j = JobRepository(s).get(job.id)
        assert j.attempts == 1 and j.best_objective is not None
        plan = PlanRepository(s).by_job(job.id)
        assert plan is not None and plan.solver_status == "OPTIMAL"
        assert plan.step_time_s == plan.result["plan"]["estimate"]["step_time_s"]
        assert abs(plan.objective_value - plan.step_time_s) < 1e-6  # type: ignore[operator]
        assert plan.gpus == 8


def test_a_job_running_when_its_worker_died_is_solved_again_and_stored_once(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
        assert JobRepository(s).claim(job.id)  # the first worker claimed it
    assert run_job(db, job.id) == "running"  # a live worker holds it: a duplicate delivery does not solve it
    with db.session() as s:
        JobRepository(s).get(job.id).heartbeat_at = datetime.now(UTC) - timedelta(seconds=LEASE_S + 1)  # it died
    # A redelivery does not take an expired lease over (the lease may have expired only because the database was
    # away [issue 47 item 2]); the lease watch does: it puts the job back to queued and sends it.
    assert run_job(db, job.id) == "running"
    with db.session() as s:
        assert JobRepository(s).requeue_expired() == [job.id]
    assert run_job(db, job.id) == "succeeded"
    with db.session() as s:
        assert JobRepository(s).get(job.id).attempts == 2
        page = PlanRepository(s).history(PlanFilter(cluster_id=cluster.id), PageRequest())
        assert page.total == 1


def test_a_solve_finished_after_its_job_was_taken_over_stores_its_plan(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage stopped the worker's heartbeats; the lease watch re-queued its job meanwhile. The solve that
    finishes first stores the plan (none existed yet); the take-over's delivery then finds the job finished and
    solves nothing [issue 47 item 2: the first worker dropped its plan, every such job was solved twice]."""
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
    real_solve = jobs_module.solve

    def solve_then_taken_over(inputs: Any, cfg: Any, watcher: Any) -> Any:
        result = real_solve(inputs, cfg, watcher)
        with db.session() as s:
            JobRepository(s).get(job.id).heartbeat_at = datetime.now(UTC) - timedelta(seconds=LEASE_S + 1)
        with db.session() as s:
            assert JobRepository(s).requeue_expired() == [job.id]
        return result

    monkeypatch.setattr(jobs_module, "solve", solve_then_taken_over)
    assert run_job(db, job.id) == "succeeded"
    monkeypatch.setattr(jobs_module, "solve", real_solve)
    assert run_job(db, job.id) == "succeeded"  # the take-over's message: nothing left to solve
    with db.session() as s:
        assert JobRepository(s).get(job.id).attempts == 1
        plan = PlanRepository(s).by_job(job.id)
        assert plan is not None and plan.step_time_s is not None


def test_cancel_stops_a_running_solver_within_a_second(db: Database) -> None:
    with db.session() as s:
        _cluster, req = long_training_request(s)
        job, _ = submit(s, req)
    outcome: list[str] = []
    t = threading.Thread(target=lambda: outcome.append(run_job(db, job.id)))
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with db.session() as s:
            j = JobRepository(s).get(job.id)
            if j.status == "running" and j.best_objective is not None:  # live progress is written
                assert j.bound is not None and j.bound <= j.best_objective and j.progress_at is not None
                break
        time.sleep(0.05)
    with db.session() as s:
        cancel(s, job.id)
    asked = time.monotonic()
    t.join(timeout=10)
    stopped_after = time.monotonic() - asked
    assert outcome == ["cancelled"]
    assert stopped_after < 1.0, stopped_after  # 0.5 s poll + 0.1 s solver stop + completion
    with db.session() as s:
        assert PlanRepository(s).by_job(job.id) is None


def test_nightly_check_replans_only_changed_watches_and_names_the_change(db: Database) -> None:
    with db.session() as s:
        c1, m = cluster_and_model(s, nodes=2)
        c2, _ = cluster_and_model(s, nodes=2)
        watches = [training_watch(s, c, m) for c in (c1, c2)]
        first = check_watches(s, "nightly")
    mine = {c.watch_id: c for c in first if c.watch_id in {x.id for x in watches}}
    assert all(c.job_id for c in mine.values())
    for c in mine.values():
        assert c.job_id is not None and run_job(db, c.job_id) == "succeeded"
    with db.session() as s:
        node = load_cluster_preset("dgx-h100:2").pools[0].node_list[1].name
        set_node_state(s, c1.id, node, "failed")
        second = {c.watch_id: c for c in check_watches(s, "nightly")}
        again = {c.watch_id: c for c in check_watches(s, "nightly")}  # before the job ran: the same job
    changed, unchanged = second[watches[0].id], second[watches[1].id]
    assert changed.job_id is not None and unchanged.job_id is None
    assert changed.changed == ["inventory revision 1→2"]
    assert again[watches[0].id].job_id == changed.job_id
    assert run_job(db, changed.job_id) == "succeeded"
    with db.session() as s:
        plan = PlanRepository(s).by_job(changed.job_id)
        assert plan is not None and plan.previous_plan_id is not None and plan.diff is not None
        assert plan.trigger == "nightly" and plan.gpus == 8
        assert plan.diff["inputs"]["cluster_revision"]["failed"] == [node]
        assert plan.diff["plan"]["gpus_before"] == 16 and plan.diff["plan"]["gpus_after"] == 8
        assert WatchRepository(s).get(watches[0].id).last_plan_id == plan.id
        assert WatchRepository(s).get(watches[1].id).last_check == "unchanged"


def test_a_failed_or_cancelled_watch_job_does_not_block_the_next_checks(db: Database) -> None:
    # The idempotency key of (watch, inputs) returned the finished job: a cancelled first attempt blocked every
    # nightly re-plan of the watch until its inputs changed.
    with db.session() as s:
        c, m = cluster_and_model(s, nodes=2)
        watch = training_watch(s, c, m)
        first = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
    assert first.job_id is not None
    with db.session() as s:
        cancel(s, first.job_id)
    assert run_job(db, first.job_id) == "cancelled"
    with db.session() as s:
        second = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
        again = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
    assert second.job_id is not None and second.job_id != first.job_id
    assert again.job_id == second.job_id  # still one job per attempt
    assert run_job(db, second.job_id) == "succeeded"


def test_nightly_pass_refits_the_calibration_and_replans_on_a_moved_constant(db: Database) -> None:
    """Measurements since the last fit: the nightly pass fits a new calibration version; a watch whose plan used
    the old one (here: none) is re-planned, and the plan diff names the calibration [issue 14]."""
    from optimizer.calibration.measurements import Measurement
    from service.calibration import recalibrate_stale, record_measurement
    from store.repositories.measurements import CalibrationRepository

    with db.session() as s:
        c, m = cluster_and_model(s, nodes=2)
        watch = training_watch(s, c, m)
        first = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
    assert first.job_id is not None and run_job(db, first.job_id) == "succeeded"
    with db.session() as s:
        plan = PlanRepository(s).by_job(first.job_id)
        assert plan is not None and plan.calibration_id is None and plan.step_time_s is not None
        assert recalibrate_stale(s, c.id) == []  # no measurement yet: nothing to fit
        for factor in (1.30, 1.32, 1.28):
            record_measurement(s, plan.id, Measurement(step_time_s=plan.step_time_s * factor))
        unchanged = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
        assert unchanged.job_id is None  # measurements alone are no reason: only a fitted calibration is
        assert recalibrate_stale(s, c.id) == [c.id]
        assert recalibrate_stale(s, c.id) == []  # fitted already: nothing newer
        cal = CalibrationRepository(s).current(c.id)
        assert cal is not None and cal.number == 1 and cal.change > 0.03
        second = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
    assert second.job_id is not None and second.changed == [f"calibration none→1 ({cal.change:.0%} on a constant)"]
    assert run_job(db, second.job_id) == "succeeded"
    with db.session() as s:
        replanned = PlanRepository(s).by_job(second.job_id)
        assert replanned is not None and replanned.calibration_id == cal.id
        assert replanned.diff is not None and replanned.diff["inputs"]["calibration"]["after"] == 1
        assert replanned.step_time_s is not None and replanned.step_time_s > plan.step_time_s * 1.05
        again = {x.watch_id: x for x in check_watches(s, "nightly", c.id)}[watch.id]
        assert again.job_id is None  # planned with the current calibration: unchanged


def test_a_pin_only_the_search_space_refuses_fails_the_job_naming_it(db: Database) -> None:
    # The submission checks what the specs decide (job_requests.check); cp=3 leaves cp no value on seq_len 4096
    # (Megatron's 2 x cp chunks), which the search space finds when the job runs.
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model, search={"pins": ["cp=3"]}))
    assert run_job(db, job.id) == "failed"
    with db.session() as s:
        error = JobRepository(s).get(job.id).error
    assert error is not None and error.startswith("pin.cp: cp=3 contradicts seq_len=4096"), error
