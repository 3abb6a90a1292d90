"""On Celery a submission answers once its job is committed; the API process's sender thread sends it right after
(issue 49), and what it still holds when the API stops is sent before it stops."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from api.app import create_app
from store.db import Database
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.api.helpers import TRAINING, make_cluster, make_model, ok
from workers.dispatch import CeleryDispatcher


def test_a_submitted_job_is_sent_after_its_answer_and_before_the_api_stops(
    worker_db: Database, clean_redis: str
) -> None:
    cfg = Settings(database_url=worker_db.url, redis_url=clean_redis, max_time_limit_s=120)
    app = create_app(cfg, worker_db, CeleryDispatcher(cfg))
    with worker_db.session() as s:
        _row, secret = TokenRepository(s).create("sender-tests", ["write"])
    queued = redis.Redis.from_url(clean_redis)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {secret}"
        cluster, model = make_cluster(c), make_model(c)
        body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}
        ok(c.post("/v1/jobs", json=body), 202)
        assert app.state.sender.flush(5)
        assert queued.llen("celery") == 1
        for _ in range(5):  # the lifespan's end sends what the thread has not sent yet
            ok(c.post("/v1/jobs", json=body), 202)
    assert queued.llen("celery") == 6
