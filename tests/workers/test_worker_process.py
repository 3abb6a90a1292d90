"""Jobs through real worker processes on Redis: finished, killed mid-solve, broker restarted, nightly re-plans."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from store.db import Database
from store.repositories.jobs import LEASE_S, TAKEOVER_CHECK_S
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.api.helpers import TRAINING, make_cluster, make_model, name, ok, training_job, wait_job
from tests.factories import hetero_yaml
from tests.workers.conftest import Proc, service_env
from workers import names
from workers.celery_app import make_celery
from workers.dispatch import CeleryDispatcher

pytestmark = pytest.mark.usefixtures("no_leftover_jobs")


def api_client(db: Database, redis_url: str) -> TestClient:
    cfg = Settings(database_url=db.url, redis_url=redis_url, max_time_limit_s=120)
    client = TestClient(create_app(cfg, db, CeleryDispatcher(cfg)), raise_server_exceptions=False)
    with db.session() as s:
        _row, secret = TokenRepository(s).create("worker-tests", ["write"])
    client.headers["Authorization"] = f"Bearer {secret}"
    return client


def plans_of_job(client: TestClient, cluster_id: int, job_id: int) -> list[dict[str, object]]:
    items = ok(client.get("/v1/plans", params={"cluster_id": cluster_id}))["items"]
    return [p for p in items if p["job_id"] == job_id]


def test_submitted_job_is_finished_by_a_worker(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc]
) -> None:
    start("worker", service_env(worker_db.url, clean_redis))
    with api_client(worker_db, clean_redis) as c:
        assert ok(c.get("/readyz"))["mode"] == "celery"
        cluster, model = make_cluster(c), make_model(c)
        job = ok(
            c.post("/v1/jobs", json={"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}), 202
        )
        done = wait_job(c, job["id"], timeout=90)
        assert done["status"] == "succeeded" and done["attempts"] == 1
        assert [p["id"] for p in plans_of_job(c, cluster["id"], job["id"])] == [done["plan_id"]]


def test_worker_killed_mid_solve_job_finishes_once(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc]
) -> None:
    env = service_env(worker_db.url, clean_redis, MESHPLAN_VISIBILITY_TIMEOUT_S="3")
    first = start("worker", env)
    with api_client(worker_db, clean_redis) as c:
        cluster = ok(
            c.post(
                "/v1/clusters/import/yaml",
                params={"name": name("hetero")},
                content=hetero_yaml(pools=4),  # a solve of seconds: caught mid-way
                headers={"Content-Type": "application/yaml"},
            ),
            201,
        )
        model = make_model(c, "llama-2-70b")
        body = training_job(cluster, model, gbs=512, time_limit_s=15)
        job = ok(c.post("/v1/jobs", json=body), 202)
        deadline = time.monotonic() + 60
        while ok(c.get(f"/v1/jobs/{job['id']}"))["progress"]["best_objective"] is None:  # mid-solve
            assert time.monotonic() < deadline
            time.sleep(0.2)
        first.kill()
        assert ok(c.get(f"/v1/jobs/{job['id']}"))["status"] == "running"
        start("worker", env)
        done = wait_job(c, job["id"], timeout=120)
        assert done["status"] == "succeeded" and done["attempts"] == 2
        assert len(plans_of_job(c, cluster["id"], job["id"])) == 1


def test_worker_killed_whole_job_taken_over_within_its_lease(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc]
) -> None:
    """Main process and pool killed together (SIGKILL to the process group): no Celery parent requeues the message,
    the broker holds it for the visibility timeout (the default 900 s here) and no beat runs; the live worker takes
    the job over once its lease expires: within LEASE_S + TAKEOVER_CHECK_S of the kill (plus 3 s of slack for
    this shared 2-core machine), solved again once, one plan."""
    env = service_env(worker_db.url, clean_redis)
    workers = [start("worker", env), start("worker", env)]
    with api_client(worker_db, clean_redis) as c:
        cluster = ok(
            c.post(
                "/v1/clusters/import/yaml",
                params={"name": name("hetero")},
                content=hetero_yaml(pools=4),
                headers={"Content-Type": "application/yaml"},
            ),
            201,
        )
        body = training_job(cluster, make_model(c, "llama-2-70b"), gbs=512, time_limit_s=15)
        job = ok(c.post("/v1/jobs", json=body), 202)
        deadline = time.monotonic() + 60
        while ok(c.get(f"/v1/jobs/{job['id']}"))["progress"]["best_objective"] is None:  # mid-solve
            assert time.monotonic() < deadline
            time.sleep(0.2)
        holder = next(w for w in workers if "] received" in w.log.read_text(errors="replace"))
        holder.kill()
        killed_at = time.monotonic()
        bound = LEASE_S + TAKEOVER_CHECK_S + 3
        while (state := ok(c.get(f"/v1/jobs/{job['id']}")))["attempts"] < 2:
            assert state["status"] in {"running", "queued"}
            waited = time.monotonic() - killed_at
            assert waited < bound, f"not re-claimed {waited:.1f} s after the kill (bound {bound:.0f} s)"
            time.sleep(0.2)
        done = wait_job(c, job["id"], timeout=120)
        assert done["status"] == "succeeded" and done["attempts"] == 2
        assert len(plans_of_job(c, cluster["id"], job["id"])) == 1


def test_redis_restart_between_submission_and_execution_loses_nothing(
    worker_db: Database, private_redis: Callable[[], Proc], start: Callable[..., Proc]
) -> None:
    server = private_redis()
    url = f"redis://127.0.0.1:{server.port}/0"  # type: ignore[attr-defined]
    with api_client(worker_db, url) as c:
        cluster, model = make_cluster(c), make_model(c)
        job = ok(
            c.post("/v1/jobs", json={"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}), 202
        )
        # the API's sender thread sends it once committed, right after the answer (issue 49); then it waits in Redis
        assert c.app.state.sender.flush(5)  # type: ignore[attr-defined]
        assert redis.Redis.from_url(url).llen("celery") == 1
        server.kill()  # Redis keeps nothing on disk: the message is gone
        private_redis()
        assert redis.Redis.from_url(url).llen("celery") == 0
        env = service_env(worker_db.url, url, MESHPLAN_SWEEP_INTERVAL_S="1", MESHPLAN_SWEEP_AFTER_S="1")
        start("beat", env)
        start("worker", env)
        done = wait_job(c, job["id"], timeout=90)
        assert done["status"] == "succeeded"
        assert len(plans_of_job(c, cluster["id"], job["id"])) == 1


def test_nightly_task_replans_only_changed_watches(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc]
) -> None:
    start("worker", service_env(worker_db.url, clean_redis))
    celery = make_celery(Settings(database_url=worker_db.url, redis_url=clean_redis))
    with api_client(worker_db, clean_redis) as c:
        model = make_model(c)
        clusters = [make_cluster(c) for _ in range(2)]
        watches = [
            ok(
                c.post(
                    "/v1/watches",
                    json={
                        "name": name("w"),
                        "cluster_id": cl["id"],
                        "model_id": model["id"],
                        "workload": TRAINING,
                        "time_limit_s": 30,
                    },
                ),
                201,
            )
            for cl in clusters
        ]
        first = celery.send_task(names.REPLAN, args=["nightly"]).get(timeout=60)
        mine = [j for j in first if ok(c.get(f"/v1/jobs/{j}"))["watch_id"] in {w["id"] for w in watches}]
        assert len(mine) == 2
        for j in mine:
            assert wait_job(c, j, timeout=90)["status"] == "succeeded"
        node = clusters[0]["inventory"]["pools"][0]["name"] + "-000"
        ok(c.patch(f"/v1/clusters/{clusters[0]['id']}/nodes/{node}", json={"state": "drained"}))
        second = celery.send_task(names.REPLAN, args=["nightly"]).get(timeout=60)
        assert len(second) == 1
        done = wait_job(c, second[0], timeout=90)
        assert done["watch_id"] == watches[0]["id"] and done["trigger"] == "nightly"
        plan = ok(c.get(f"/v1/plans/{done['plan_id']}"))
        assert plan["diff"]["inputs"]["cluster_revision"]["drained"] == [node]
        assert "drained" in plan["diff"]["inputs"]["cluster_revision"]["summary"]
        assert ok(c.get(f"/v1/watches/{watches[1]['id']}"))["last_check"] == "unchanged"
        assert ok(c.get("/v1/plans", params={"watch_id": watches[1]["id"]}))["total"] == 1
