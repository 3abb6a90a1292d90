"""Service benchmark: jobs per minute through one real worker, and API latency at 50 concurrent clients.

Needs PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379); creates and drops its own database.
Run: .venv/bin/python benchmarks/service.py [--jobs 3] [--clients 50] [--requests 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.service_env import migrated_with_token, service_env  # noqa: E402
from benchmarks.solver import HETERO  # noqa: E402
from optimizer.spec.model_loading import load_model_preset  # noqa: E402
from tests.databases import create_pg_database, drop_pg_database  # noqa: E402

MESHPLAN = str(Path(sys.executable).parent / "meshplan")
REDIS_URL = "redis://127.0.0.1:6379/8"


def h100_pools(nodes: int, *, nics: bool = False) -> dict[str, Any]:
    """An inventory of one pool of `nodes` 8-GPU H100-SXM-80GB nodes; `nics`: with 8 x 400 Gb/s NICs a node."""
    pool: dict[str, Any] = {"name": "h100", "gpu": "H100-SXM-80GB", "nodes": nodes, "gpus_per_node": 8}
    if nics:
        pool["inter_node"] = {"nics_per_node": 8, "gbits_per_s": 400}
    return {"pools": [pool]}


def training(global_batch_size: int, seq_len: int) -> dict[str, Any]:
    """A training workload: sequences of `seq_len` tokens, `global_batch_size` sequences a step."""
    return {"mode": "training", "global_batch_size": global_batch_size, "seq_len": seq_len}


SERVING = {"mode": "inference", "prompt_len": 2048, "output_len": 256, "batch": 8}
# label, model preset, inventory, workload, solver time limit (s)
SCENARIOS: list[tuple[str, str, dict[str, Any], dict[str, Any], float]] = [
    ("(1) llama-3-70b, 2 x 8 H100 (infeasible)", "llama-3-70b", h100_pools(2), training(512, 4096), 30),
    ("(2) llama-3.1-405b, 16,384 H100", "llama-3.1-405b", h100_pools(2048, nics=True), training(2048, 8192), 30),
    ("(3) llama-2-70b, H100+A100+L40S", "llama-2-70b", {"yaml": HETERO}, training(512, 4096), 30),
    ("(4a) llama-2-70b serve, 8 H100", "llama-2-70b", h100_pools(1), SERVING, 30),
    ("(5a) mixtral-8x7b, 8 x 8 H100", "mixtral-8x7b", h100_pools(8, nics=True), training(1024, 4096), 30),
]


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, env=env, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def wait_log(log: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise SystemExit(f"{text!r} not in {log}:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)


def checked(r: httpx.Response) -> Any:
    if r.status_code >= 300:
        raise SystemExit(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}")
    return r.json()


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=3, help="Jobs per scenario through the worker (0: latency only).")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=20, help="Requests per client per endpoint.")
    a = ap.parse_args()
    url, dbname = create_pg_database()
    db, token = migrated_with_token(url, "bench")
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = service_env(url, REDIS_URL)
    tmp = Path(tempfile.mkdtemp())
    port = 18000 + os.getpid() % 1000
    procs = [
        start([MESHPLAN, "serve", "--port", str(port), "--no-migrate"], env, tmp / "api.log"),
        start([MESHPLAN, "worker"], env, tmp / "worker.log"),
    ]
    try:
        wait_log(tmp / "api.log", "meshplan on")
        wait_log(tmp / "worker.log", "ready.")
        base = f"http://127.0.0.1:{port}"
        h = {"Authorization": f"Bearer {token}"}
        c = httpx.Client(base_url=base, headers=h, timeout=120)
        for _ in range(50):
            try:
                if c.get("/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        print("| scenario | jobs | status | wall s | jobs/min (1 worker) |")
        print("|---|---|---|---|---|")
        last_body: dict[str, Any] = {}
        for label, model, inv, workload, limit in SCENARIOS:
            name = label.split()[0].strip("()") + f"-{os.getpid()}"
            if "yaml" in inv:
                cl = c.post(
                    "/v1/clusters/import/yaml",
                    params={"name": "c" + name},
                    content=inv["yaml"],
                    headers={"Content-Type": "application/yaml"},
                ).json()
            else:
                cl = c.post("/v1/clusters", json={"name": "c" + name, "inventory": inv}).json()
            spec = load_model_preset(model).model_dump(mode="json", exclude={"name"})
            m = c.post("/v1/models", json={"name": "m" + name, "spec": spec}).json()
            body = {"cluster_id": cl["id"], "model_id": m["id"], "workload": workload, "time_limit_s": limit}
            last_body = body
            if a.jobs == 0:
                continue
            t0 = time.perf_counter()
            ids = [checked(c.post("/v1/jobs", json=body))["id"] for _ in range(a.jobs)]
            statuses = []
            for jid in ids:
                while (j := c.get(f"/v1/jobs/{jid}").json())["status"] in ("queued", "running"):
                    time.sleep(0.1)
                statuses.append(j["status"])
            wall = time.perf_counter() - t0
            print(f"| {label} | {a.jobs} | {','.join(sorted(set(statuses)))} | {wall:.1f} | {60 * a.jobs / wall:.1f} |")

        # API latency at N concurrent clients: submissions (queued on Redis) and history pages
        def hammer(method: str, path: str, body: dict[str, Any] | None, out: list[float], errors: list[int]) -> None:
            with httpx.Client(base_url=base, headers=h, timeout=60) as cc:
                for _ in range(a.requests):
                    t = time.perf_counter()
                    r = cc.request(method, path, json=body)
                    out.append(time.perf_counter() - t)
                    if r.status_code >= 400:
                        errors.append(r.status_code)

        subprocess.run(["pkill", "-STOP", "-g", str(procs[1].pid)], check=False)  # worker paused: jobs just queue
        print()
        print("| endpoint | clients | requests | p50 ms | p99 ms | errors |")
        print("|---|---|---|---|---|---|")
        endpoints: list[tuple[str, str, str, dict[str, Any] | None]] = [
            ("POST /v1/jobs", "POST", "/v1/jobs", last_body | {"time_limit_s": 1}),
            ("GET /v1/plans (history)", "GET", "/v1/plans?limit=50", None),
        ]
        for label, method, path, payload in endpoints:
            lat: list[float] = []
            errs: list[int] = []
            threads = [
                threading.Thread(target=hammer, args=(method, path, payload, lat, errs)) for _ in range(a.clients)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(
                f"| {label} | {a.clients} | {len(lat)} | {1000 * statistics.median(lat):.0f} | "
                f"{1000 * pct(lat, 0.99):.0f} | {len(errs)} |"
            )
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        db.dispose()
        drop_pg_database(dbname)
        redis.Redis.from_url(REDIS_URL).flushdb()


if __name__ == "__main__":
    main()
