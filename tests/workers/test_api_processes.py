"""`meshplan serve --workers 2` on PostgreSQL and Redis, as real processes: every API process answers the plan
history from memory, and each sees at once a plan a Celery worker stored and a token the CLI revoked (the change
feed's NOTIFY reaches every process; api.read_cache, store.changes)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from store.db import Database
from store.repositories.tokens import TokenRepository
from tests.api.helpers import INVENTORY, TRAINING, name
from tests.workers.conftest import MESHPLAN, Proc, service_env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _fresh_connections(base: str, secret: str) -> httpx.Client:
    """A client that opens a new connection per request, so the kernel spreads them over the API processes."""
    limits = httpx.Limits(max_keepalive_connections=0)
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, limits=limits, timeout=30)


def _job(c: httpx.Client, body: dict[str, object]) -> int:
    r = c.post("/v1/jobs", json=body)
    assert r.status_code == 202, r.text
    job_id: int = r.json()["id"]
    deadline = time.monotonic() + 90
    while (job := c.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["status"] == "succeeded", job
    plan_id: int = job["plan_id"]
    return plan_id


def test_every_api_process_sees_new_plans_and_revocations_at_once(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc], tmp_path: Path
) -> None:
    env = service_env(worker_db.url, clean_redis)
    port = _free_port()
    api = Proc([MESHPLAN, "serve", "--port", str(port), "--workers", "2", "--no-migrate"], env, tmp_path / "api.log")
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and api.p.poll() is None, api.log.read_text()[-3000:]
            time.sleep(0.1)
        start("worker", env)
        with worker_db.session() as s:
            row, secret = TokenRepository(s).create("processes", ["write"])
        with _fresh_connections(base, secret) as c:
            cluster = c.post("/v1/clusters", json={"name": name("c"), "inventory": INVENTORY}).json()
            from optimizer.spec.model_loading import load_model_preset

            spec = load_model_preset("llama-3-8b").model_dump(mode="json", exclude={"name"})
            model = c.post("/v1/models", json={"name": name("m"), "spec": spec}).json()
            body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 10}
            history = f"/v1/plans?cluster_id={cluster['id']}"
            for _ in range(3):
                for _ in range(10):  # both processes now hold a copy of the history
                    c.get(history).raise_for_status()
                newest = _job(c, body)  # stored by the Celery worker, a third process
                firsts = {c.get(history).json()["items"][0]["id"] for _ in range(20)}
                assert firsts == {newest}
            revoke = subprocess.run(
                [MESHPLAN, "token", "revoke", str(row.id)], env=env, capture_output=True, text=True, timeout=60
            )
            assert revoke.returncode == 0, revoke.stderr
            assert {c.get(history).status_code for _ in range(20)} == {401}
    finally:
        api.stop()
