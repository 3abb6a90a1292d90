"""API load with `wrk` (a real load generator, outside the server's process) on both setups.

- embedded (`make run`'s defaults: SQLite file, jobs in a child process): 50 clients on GET /v1/plans?limit=50 for
  15 s while a job solves; target 0 errors, p99 <= 50 ms (issue 49; issue 16 had 150 ms). A second row keeps small
  jobs solving back to back, so a new plan lands (and retires the in-memory copy of the history, api.read_cache)
  every fraction of a second.
- PostgreSQL + Redis (`--api-workers` API processes, default 2), 50 plans stored, the token last used long ago:
  GET history p99 <= 50 ms (issue 16) and POST /v1/jobs p99 <= 250 ms (issue 49) at 50 clients, 0 errors;
  /healthz answers within 1 s of the load ending. Issue 16 asked 100 ms of the submissions, out of reach on this
  2-core machine (its note: 370 ms at 272/s; the target needs about 600/s); each row also prints the throughput
  and the machine's 1-minute load average when the row ran (the machine is shared: compare rows of like load).
- Reference rows (no target): the same history reads with the read cache off (MESHPLAN_READ_CACHE_MB=0), i.e.
  what every miss costs.

Needs `wrk` (Debian: apt-get install wrk); the PostgreSQL setup needs 127.0.0.1:5432 and 127.0.0.1:6379.
Run: .venv/bin/python benchmarks/load.py [--clients 50] [--seconds 15] [--setup embedded|postgres|both]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.service_env import migrated_with_token, service_env  # noqa: E402
from optimizer.spec.model_loading import load_model_preset  # noqa: E402
from store.db import Database  # noqa: E402
from store.models import ApiToken, now  # noqa: E402
from tests.databases import create_pg_database, drop_pg_database  # noqa: E402

MESHPLAN = str(Path(sys.executable).parent / "meshplan")
REDIS_URL = "redis://127.0.0.1:6379/9"
EMBEDDED_P99_MS = 50  # issue 49: the plan history stays quick while jobs solve (they run outside the API process)
INVENTORY = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8}]}
WORKLOAD = {"mode": "training", "global_batch_size": 64, "seq_len": 4096}
# A job that keeps solving while the load runs (the hetero scenario takes seconds; a 405B on 16k GPUs, more).
LONG = {"mode": "training", "global_batch_size": 2048, "seq_len": 8192}
LONG_INVENTORY = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 2048, "gpus_per_node": 8}]}


# Targets at 50 clients: the history's from issue 16 (PostgreSQL), the submissions' from issue 49.
HISTORY_PG_P99_MS = 50.0
POST_JOBS_P99_MS = 250.0


def wrk(url: str, token: str, clients: int, seconds: int, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run wrk and parse its report: requests, p50/p99 ms, errors (non-2xx + socket errors + timeouts)."""
    script = None
    args = ["wrk", f"-t{min(4, clients)}", f"-c{clients}", f"-d{seconds}s", "--timeout", "10s", "--latency"]
    args += ["-H", f"Authorization: Bearer {token}"]
    if body is not None:
        script = Path(tempfile.mkstemp(suffix=".lua")[1])
        payload = json.dumps(body).replace("\\", "\\\\").replace('"', '\\"')
        script.write_text(
            f'wrk.method = "POST"\nwrk.body = "{payload}"\nwrk.headers["Content-Type"] = "application/json"\n'
        )
        args += ["-s", str(script)]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    if script is not None:
        script.unlink()

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m is None:
            return float("nan")
        scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
        return float(m.group(1)) * scale

    total = re.search(r"(\d+) requests in", out)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(non2xx.group(1)) if non2xx else 0) + (sum(int(x) for x in sock.groups()) if sock else 0)
    return {
        "requests": int(total.group(1)) if total else 0,
        "rate": float(rate.group(1)) if rate else 0.0,
        "p50": ms("50"),
        "p99": ms("99"),
        "errors": errors,
        "load": os.getloadavg()[0],  # the machine's 1-minute load average as the run ends (2 cores, shared)
    }


def healthz_after(base: str) -> float:
    """Seconds until /healthz answers 200 (right after a load run)."""
    t0 = time.perf_counter()
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=30).status_code == 200:
                return time.perf_counter() - t0
        if time.perf_counter() - t0 > 120:
            return float("inf")
        time.sleep(0.05)


def start_server(env: dict[str, str], port: int, log: Path, workers: int = 1) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [MESHPLAN, "serve", "--port", str(port), "--workers", str(workers)],
        env=env,
        cwd=ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return proc
        time.sleep(0.1)
    raise SystemExit(f"server did not start:\n{log.read_text()[-2000:]}")


def seed(base: str, token: str, plans: int) -> dict[str, Any]:
    """A cluster, a model and `plans` finished plans (jobs solved by whoever runs them); the job body."""
    c = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    tag = f"{os.getpid()}-{time.time_ns()}"
    cl = c.post("/v1/clusters", json={"name": f"c{tag}", "inventory": INVENTORY}).json()
    spec = load_model_preset("llama-3-8b").model_dump(mode="json", exclude={"name"})
    m = c.post("/v1/models", json={"name": f"m{tag}", "spec": spec}).json()
    body = {"cluster_id": cl["id"], "model_id": m["id"], "workload": WORKLOAD, "time_limit_s": 10}
    return {"client": c, "body": body, "cluster": cl, "model": m, "plans": plans}


def make_plans(c: httpx.Client, body: dict[str, Any], n: int) -> None:
    ids = [c.post("/v1/jobs", json=body).json()["id"] for _ in range(n)]
    for jid in ids:
        while c.get(f"/v1/jobs/{jid}").json()["status"] in ("queued", "running"):
            time.sleep(0.1)


def long_job(c: httpx.Client) -> int:
    tag = f"{os.getpid()}-{time.time_ns()}"
    cl = c.post("/v1/clusters", json={"name": f"big{tag}", "inventory": LONG_INVENTORY}).json()
    spec = load_model_preset("llama-3.1-405b").model_dump(mode="json", exclude={"name"})
    m = c.post("/v1/models", json={"name": f"big{tag}", "spec": spec}).json()
    body = {"cluster_id": cl["id"], "model_id": m["id"], "workload": LONG, "time_limit_s": 60}
    job: int = c.post("/v1/jobs", json=body).json()["id"]
    return job


def age_tokens(db: Database) -> None:
    """Every token last used an hour ago (the case that used to lock the token row for the whole request)."""
    with db.session() as session:
        for row in session.query(ApiToken):
            row.last_used_at = now() - timedelta(hours=1)


class PlanStream:
    """Small jobs submitted back to back from a thread of this (client) process: a new plan every fraction of a
    second while the load runs."""

    def __init__(self, c: httpx.Client, body: dict[str, Any]) -> None:
        self.c, self.body, self.plans = c, body, 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            r = self.c.post("/v1/jobs", json=self.body)
            if r.status_code != 202:
                self.errors.append(f"POST /v1/jobs {r.status_code}: {r.text[:200]}")
                continue
            while not self.stop.is_set():
                job = self.c.get(f"/v1/jobs/{r.json()['id']}")
                if job.status_code != 200:
                    self.errors.append(f"GET /v1/jobs/id {job.status_code}: {job.text[:200]}")
                elif job.json()["status"] not in ("queued", "running"):
                    self.plans += 1
                    break
                time.sleep(0.05)

    def __enter__(self) -> PlanStream:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def embedded(clients: int, seconds: int, port: int, with_job: bool = True) -> list[list[str]]:
    rows = []
    for cache in (True, False):
        tmp = Path(tempfile.mkdtemp())
        url = f"sqlite:///{tmp / 'meshplan.db'}"
        db, token = migrated_with_token(url, "load")
        env = service_env(url) | ({} if cache else {"MESHPLAN_READ_CACHE_MB": "0"})
        proc = start_server(env, port, tmp / "api.log")
        base = f"http://127.0.0.1:{port}"
        try:
            seeded = seed(base, token, 50)
            make_plans(seeded["client"], seeded["body"], 50)
            age_tokens(db)
            label = "embedded (SQLite, in-process jobs" + (", one solving)" if with_job else ")")
            label += "" if cache else ", read cache off (reference)"
            if cache:
                with PlanStream(seeded["client"], seeded["body"]) as stream:
                    r = wrk(f"{base}/v1/plans?limit=50", token, clients, seconds)
                h = healthz_after(base)
                what = f"GET /v1/plans?limit=50, {stream.plans} new plans meanwhile"
                r["errors"] += len(stream.errors)
                for e in stream.errors[:5]:
                    print("plan stream:", e, file=sys.stderr)
                rows.append([label.replace("one solving", "jobs solving back to back"), what, str(clients)])
                rows[-1] += [*_cells(r, EMBEDDED_P99_MS), f"{h:.2f}"]
            if with_job:
                long_job(seeded["client"])
            r = wrk(f"{base}/v1/plans?limit=50", token, clients, seconds)
            h = healthz_after(base)
            rows.append(
                [
                    label,
                    "GET /v1/plans?limit=50",
                    str(clients),
                    *_cells(r, EMBEDDED_P99_MS if cache else None),
                    f"{h:.2f}",
                ]
            )
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            db.dispose()
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def postgres(clients: int, seconds: int, port: int, workers: int) -> list[list[str]]:
    import redis

    url, name = create_pg_database()
    db, token = migrated_with_token(url, "load")
    redis.Redis.from_url(REDIS_URL).flushdb()
    tmp = Path(tempfile.mkdtemp())
    env = service_env(url, REDIS_URL)
    proc = start_server(env, port, tmp / "api.log", workers)
    worker = subprocess.Popen(
        [MESHPLAN, "worker"],
        env=env,
        cwd=ROOT,
        stdout=(tmp / "worker.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    rows = []
    setup = f"PostgreSQL + Redis, {workers} API process" + ("es" if workers > 1 else "")
    try:
        seeded = seed(base, token, 50)
        make_plans(seeded["client"], seeded["body"], 50)
        os.killpg(worker.pid, signal.SIGKILL)  # from here on jobs only queue
        age_tokens(db)
        r = wrk(f"{base}/v1/plans?limit=50", token, clients, seconds)
        h = healthz_after(base)
        rows.append([setup, "GET /v1/plans?limit=50", str(clients), *_cells(r, HISTORY_PG_P99_MS), f"{h:.2f}"])
        age_tokens(db)
        r = wrk(f"{base}/v1/jobs", token, clients, seconds, body=seeded["body"])
        h = healthz_after(base)
        rows.append([setup, "POST /v1/jobs", str(clients), *_cells(r, POST_JOBS_P99_MS), f"{h:.2f}"])
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc = start_server(env | {"MESHPLAN_READ_CACHE_MB": "0"}, port, tmp / "api-nocache.log", workers)
        age_tokens(db)
        r = wrk(f"{base}/v1/plans?limit=50", token, clients, seconds)
        h = healthz_after(base)
        label = f"{setup}, read cache off (reference)"
        rows.append([label, "GET /v1/plans?limit=50", str(clients), *_cells(r, None), f"{h:.2f}"])
        return rows
    finally:
        for p in (proc, worker):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        db.dispose()
        drop_pg_database(name)
        redis.Redis.from_url(REDIS_URL).flushdb()
        shutil.rmtree(tmp, ignore_errors=True)


def _cells(r: dict[str, Any], target_p99_ms: float | None) -> list[str]:
    """requests, per second, p50, p99, target, errors, met, load; a reference row (no target) says "-" for met."""
    ok = r["requests"] > 0 and r["errors"] == 0 and (target_p99_ms is None or r["p99"] <= target_p99_ms)
    met = "-" if target_p99_ms is None and ok else "yes" if ok else "NO"
    target = "-" if target_p99_ms is None else f"<= {target_p99_ms:g}"
    return [
        str(r["requests"]),
        f"{r['rate']:.0f}",
        f"{r['p50']:.1f}",
        f"{r['p99']:.1f}",
        target,
        str(r["errors"]),
        met,
        f"{r['load']:.1f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--setup", choices=["embedded", "postgres", "both"], default="both")
    ap.add_argument("--no-job", action="store_true", help="Embedded: no job solving during the load.")
    ap.add_argument("--api-workers", type=int, default=2, help="PostgreSQL setup: API processes (serve --workers).")
    a = ap.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk)")
    port = 19000 + os.getpid() % 1000
    rows: list[list[str]] = []
    if a.setup in ("embedded", "both"):
        rows += embedded(a.clients, a.seconds, port, not a.no_job)
    if a.setup in ("postgres", "both"):
        rows += postgres(a.clients, a.seconds, port + 1, a.api_workers)
    head = ["setup", "endpoint", "clients", "requests", "req/s", "p50 ms", "p99 ms", "target p99", "errors", "met"]
    head += ["load 1 min", "healthz s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
