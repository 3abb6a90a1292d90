"""Re-claim time of a job whose worker is killed mid-solve: a pool child killed (Celery's parent requeues the message)
against the whole worker killed (main process and pool: SIGKILL to its process group; the job row's lease says it is
gone). Two workers run; the one holding the job is killed; the time printed runs from the kill until the other
worker has claimed the job again (its attempts count reads 2). No beat runs; the visibility timeout is the default.

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); creates and drops its own database.
Run: .venv/bin/python benchmarks/worker_kill.py [--trials 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from benchmarks.service_env import migrated_with_token, service_env  # noqa: E402
from benchmarks.solver import HETERO  # noqa: E402
from optimizer.spec.model_loading import load_model_preset  # noqa: E402
from store.repositories.jobs import LEASE_S, TAKEOVER_CHECK_S  # noqa: E402
from store.settings import Settings  # noqa: E402
from tests.databases import create_pg_database, drop_pg_database  # noqa: E402
from workers.dispatch import CeleryDispatcher  # noqa: E402

MESHPLAN = str(Path(sys.executable).parent / "meshplan")
REDIS_URL = "redis://127.0.0.1:6379/10"


class Worker:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self.p = subprocess.Popen(
            [MESHPLAN, "worker"],
            env=env,
            cwd=ROOT,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while "ready." not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise SystemExit(f"worker not ready:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)

    def holds_a_job(self) -> bool:
        return "] received" in self.log.read_text(errors="replace")

    def child_pid(self) -> int:
        """A pool process (concurrency 1: the one solving)."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.p.pid:
                    return int(entry.name)
        raise SystemExit("no pool process")

    def kill(self, whole: bool) -> None:
        if whole:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        else:
            os.kill(self.child_pid(), signal.SIGKILL)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def ok(r: Any, code: int = 200) -> Any:
    if r.status_code != code:
        raise SystemExit(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}")
    return r.json()


def trial(c: TestClient, body: dict[str, Any], workers: list[Worker], whole: bool) -> float:
    """Seconds from the kill to the job's second claim; the job is then cancelled."""
    for w in workers:
        w.log.write_text("")
    job = ok(c.post("/v1/jobs", json=body), 202)
    deadline = time.monotonic() + 60
    while ok(c.get(f"/v1/jobs/{job['id']}"))["progress"]["best_objective"] is None:
        if time.monotonic() > deadline:
            raise SystemExit("the job never solved")
        time.sleep(0.1)
    holder = next(w for w in workers if w.holds_a_job())
    holder.kill(whole)
    t0 = time.monotonic()
    while ok(c.get(f"/v1/jobs/{job['id']}"))["attempts"] < 2:
        if time.monotonic() - t0 > 300:
            return float("inf")
        time.sleep(0.1)
    waited = time.monotonic() - t0
    ok(c.delete(f"/v1/jobs/{job['id']}"))
    return waited


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3, help="Kills of each kind.")
    a = ap.parse_args()
    url, dbname = create_pg_database()
    db, token = migrated_with_token(url, "bench")
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = service_env(url, REDIS_URL) | {"PYTHONUNBUFFERED": "1"}
    tmp = Path(tempfile.mkdtemp())
    cfg = Settings(database_url=url, redis_url=REDIS_URL, max_time_limit_s=120)
    workers = [Worker(env, tmp / f"w{i}.log") for i in range(2)]
    try:
        with TestClient(create_app(cfg, db, CeleryDispatcher(cfg))) as c:
            c.headers["Authorization"] = f"Bearer {token}"
            cl = ok(
                c.post(
                    "/v1/clusters/import/yaml",
                    params={"name": f"kill-{os.getpid()}"},
                    content=HETERO,
                    headers={"Content-Type": "application/yaml"},
                ),
                201,
            )
            spec = load_model_preset("llama-2-70b").model_dump(mode="json", exclude={"name"})
            m = ok(c.post("/v1/models", json={"name": f"kill-{os.getpid()}", "spec": spec}), 201)
            workload = {"mode": "training", "global_batch_size": 512, "seq_len": 4096}
            body = {"cluster_id": cl["id"], "model_id": m["id"], "workload": workload, "time_limit_s": 30}
            print(
                f"| killed | trials | median s | max s | bound s (lease {LEASE_S:.0f} + check {TAKEOVER_CHECK_S:.0f}) |"
            )
            print("|---|---|---|---|---|")
            for whole in (False, True):
                times = []
                for _ in range(a.trials):
                    times.append(trial(c, body, workers, whole))
                    for i, w in enumerate(workers):  # the killed worker is started again (a child: Celery did)
                        if w.p.poll() is not None:
                            workers[i] = Worker(env, w.log)
                label = "whole worker (process group)" if whole else "pool child"
                bound = LEASE_S + TAKEOVER_CHECK_S
                print(f"| {label} | {a.trials} | {statistics.median(times):.1f} | {max(times):.1f} | {bound:.0f} |")
    finally:
        for w in workers:
            w.stop()
        db.dispose()
        drop_pg_database(dbname)
        redis.Redis.from_url(REDIS_URL).flushdb()


if __name__ == "__main__":
    main()
