"""Solves, plans and latency of planning jobs through database and broker outages [issue 47 item 2].

Eight jobs are submitted to two workers (one process each) with beat running; mid-run PostgreSQL is stopped for
18 s, started, stopped again for 20 s and started (`pg_ctl stop -m fast` / `pg_ctl start`), then Redis is killed and
started again empty (no persistence: every waiting message is lost, the sweep must send those jobs again). Printed
per job: claims (solves started: `attempts`), plans stored, seconds from submission to the stored plan; then the
totals and the run_job messages the workers received. A solve an outage caused twice shows as claims > 1.

Everything runs on servers of its own, never the machine's shared ones: a PostgreSQL cluster made with initdb in a
temporary directory (as the postgres user: initdb refuses root) on a free port, and a redis-server on a free port.
The sweep runs every 10 s for jobs queued 30 s (MESHPLAN_SWEEP_INTERVAL_S / _AFTER_S; the defaults are 60 s and
120 s) so that a broker loss is recovered within the run.

Run: .venv/bin/python benchmarks/outage.py   (about 4 minutes)
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, text  # noqa: E402

from benchmarks.service_env import service_env  # noqa: E402
from benchmarks.solver import HETERO  # noqa: E402
from optimizer.spec.cluster_loading import load_cluster_yaml  # noqa: E402
from optimizer.spec.model_loading import load_model_preset  # noqa: E402
from service.catalog import create_cluster, create_model  # noqa: E402
from service.job_requests import JobRequest  # noqa: E402
from service.jobs import submit  # noqa: E402
from store.db import Database  # noqa: E402
from store.migrate import upgrade  # noqa: E402

JOBS = 8
OUTAGES_S = (18.0, 20.0)  # the two PostgreSQL outages
# The code under test is the checkout this file is in (the processes run `python -m api.cli` from ROOT).
MESHPLAN = [sys.executable, "-c", "from api.cli import main; main()"]


def ephemeral_range() -> tuple[int, int]:
    """Linux's range for the ports it hands to outgoing connections (net.ipv4.ip_local_port_range; 32768-60999 by
    default, ip(7))."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(first: int = 20000, last: int = 32000) -> int:
    """A free listening port below the ephemeral range: a client reconnecting during an outage is given a port from
    that range, and one given the server's own port kept PostgreSQL from restarting for 61 s [issue 59 item 6]."""
    low, high = ephemeral_range()
    for port in range(first + os.getpid() % 4000, last):
        if low <= port <= high:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {first}-{last} outside the ephemeral range {low}-{high}")


class Postgres:
    """A private PostgreSQL cluster: initdb in `root`, its own port, run as the postgres user."""

    def __init__(self, root: Path) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not binaries:
            raise SystemExit("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
        self.bin, self.data, self.port = Path(binaries[-1]), root / "pg", free_port()
        self.data.mkdir()
        shutil.chown(root, "postgres")
        shutil.chown(self.data, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        admin = create_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres", isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as c:
            c.execute(text("CREATE DATABASE bench"))
        admin.dispose()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/bench"

    def _run(self, tool: str, *args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", str(self.bin / tool), *args]
        subprocess.run(cmd, check=True, capture_output=True, cwd="/tmp")

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.data / "log"), "-w", "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log: Path, ready: str) -> None:
        self.log = log
        self.p = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while ready not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise SystemExit(f"{args} not ready:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


def redis_server(port: int, log: Path) -> Proc:
    binary = shutil.which("redis-server") or "redis-server"
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    return Proc(args, dict(os.environ), log, "Ready to accept connections")


def state(db: Database) -> list[tuple[int, str, int, int, float | None]] | None:
    """(job, status, claims, plans, seconds to the plan) per job; None while the database does not answer."""
    try:
        with db.engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT j.id, j.status, j.attempts, (SELECT count(*) FROM plans p WHERE p.job_id = j.id), "
                    "EXTRACT(EPOCH FROM (j.finished_at - j.created_at)) FROM jobs j ORDER BY j.id"
                )
            ).all()
    except Exception:
        return None
    return [(r[0], r[1], r[2], r[3], float(r[4]) if r[4] is not None else None) for r in rows]


def received(logs: list[Path]) -> int:
    """run_job messages the workers received ("Task meshplan.run_job[task id] received"; Celery logs no args)."""
    return sum(
        1
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if "meshplan.run_job[" in line and line.rstrip().endswith("received")
    )


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="meshplan-outage-"))
    pg = Postgres(tmp)
    redis_port = free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    procs: list[Proc] = [redis_server(redis_port, tmp / "redis.log")]
    upgrade(pg.url)
    db = Database(pg.url)
    env = service_env(pg.url, redis_url) | {
        "PYTHONUNBUFFERED": "1",
        "MESHPLAN_SWEEP_INTERVAL_S": "10",
        "MESHPLAN_SWEEP_AFTER_S": "30",
        "MESHPLAN_BEAT_SCHEDULE": str(tmp / "beat-schedule"),
    }
    logs = [tmp / f"worker-{i}.log" for i in range(2)]
    try:
        for log in logs:
            procs.append(Proc([*MESHPLAN, "worker", "--concurrency", "1"], env, log, "ready."))
        procs.append(Proc([*MESHPLAN, "beat"], env, tmp / "beat.log", "beat: Starting"))
        with db.session() as s:
            cluster, _ = create_cluster(s, f"outage-{os.getpid()}", load_cluster_yaml(HETERO))
            model, _ = create_model(s, f"outage-{os.getpid()}", load_model_preset("llama-2-70b"))
            workload = {"mode": "training", "global_batch_size": 512, "seq_len": 4096}
            body = {"cluster_id": cluster.id, "model_id": model.id, "workload": workload, "time_limit_s": 20}
            ids = [submit(s, JobRequest.model_validate(body))[0].id for _ in range(JOBS)]
        from store.settings import Settings
        from workers.dispatch import CeleryDispatcher, send_committed

        send_committed(CeleryDispatcher(Settings(database_url=pg.url, redis_url=redis_url)), ids)
        t0 = time.monotonic()
        wait_for(lambda: sum(r[1] == "running" for r in state(db) or []) >= 2, 120, "two running jobs")
        time.sleep(4)  # mid-solve
        for k, seconds in enumerate(OUTAGES_S):
            pg.stop()
            print(f"t={time.monotonic() - t0:5.1f} s: PostgreSQL stopped for {seconds:.0f} s", flush=True)
            time.sleep(seconds)
            pg.start()
            print(f"t={time.monotonic() - t0:5.1f} s: PostgreSQL started", flush=True)
            time.sleep(15 if k == 0 else 5)
        procs[0].stop()
        print(f"t={time.monotonic() - t0:5.1f} s: Redis killed (its waiting messages lost)", flush=True)
        time.sleep(5)
        procs[0] = redis_server(redis_port, tmp / "redis.log")
        print(f"t={time.monotonic() - t0:5.1f} s: Redis started empty", flush=True)
        wait_for(lambda: all(r[1] in ("succeeded", "failed") for r in state(db) or [(0, "", 0, 0, None)]), 600, "jobs")
        total = time.monotonic() - t0
        rows = state(db) or []
        print()
        print("| job | status | solves (claims) | plans | s to plan |")
        print("|---|---|---|---|---|")
        for job_id, status, claims, plans, took in rows:
            print(f"| {job_id} | {status} | {claims} | {plans} | {took or 0:.0f} |")
        times = [r[4] for r in rows if r[4] is not None] or [0.0]
        print()
        print(
            f"jobs {len(rows)}, succeeded {sum(r[1] == 'succeeded' for r in rows)}, solves {sum(r[2] for r in rows)}, "
            f"plans {sum(r[3] for r in rows)}, jobs solved twice or more {sum(r[2] > 1 for r in rows)}, "
            f"jobs without a plan {sum(r[3] == 0 for r in rows)}, run_job messages received {received(logs)}; "
            "seconds to plan: median "
            f"{statistics.median(times):.0f}, max {max(times):.0f}; all done {total:.0f} s after the first submission"
        )
    finally:
        for p in procs:
            p.stop()
        db.dispose()
        with contextlib.suppress(subprocess.CalledProcessError):
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
