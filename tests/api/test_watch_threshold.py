"""A watch's switch threshold (issue 38 §3): 0-100 percent at creation, else 422 naming the field and nothing
stored; a watch's re-plan carries its keep-or-switch decision in the plan output."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from store.db import Database
from store.models import Watch
from tests.api.helpers import TRAINING, make_cluster, make_model, name, ok, wait_job


def _watches(db: Database) -> int:
    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Watch)) or 0)


def test_a_threshold_outside_0_to_100_is_422_and_stores_nothing(client: TestClient, api_db: Database) -> None:
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 30}
    before = _watches(api_db)
    for bad in (-1, 100.5, "lots"):
        r = client.post("/v1/watches", json={**body, "name": name("w"), "switch_threshold_pct": bad})
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "switch_threshold_pct"]
    assert _watches(api_db) == before
    w = ok(client.post("/v1/watches", json={**body, "name": name("w"), "switch_threshold_pct": 12.5}), 201)
    assert w["switch_threshold_pct"] == 12.5
    assert ok(client.get(f"/v1/watches/{w['id']}"))["switch_threshold_pct"] == 12.5
    default = ok(client.post("/v1/watches", json={**body, "name": name("w")}), 201)
    assert default["switch_threshold_pct"] is None  # the default, 5%


def test_a_watch_replan_shows_its_decision(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 30}
    w = ok(client.post("/v1/watches", json={**body, "name": name("w")}), 201)
    plans = []
    for _ in range(2):
        job = ok(client.post(f"/v1/watches/{w['id']}/replan"), 202)["job"]
        plans.append(ok(client.get(f"/v1/plans/{wait_job(client, job['id'])['plan_id']}")))
    assert plans[0]["decision"] is None  # nothing ran before the first plan
    decision = plans[1]["decision"]  # the same inventory: the optimum is the running layout
    assert decision["outcome"] == "kept" and decision["text"].startswith("kept: gain 0% (interval -")
    assert plans[1]["result"]["decision"] == decision
    assert ok(client.get(f"/v1/watches/{w['id']}"))["last_check"] == decision["text"]
