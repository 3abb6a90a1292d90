"""Real Redis, real PostgreSQL and real worker processes started by the fixtures."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import update

from store.db import Database
from store.models import Job
from tests.databases import migrated_pg_database, require

ROOT = Path(__file__).resolve().parents[2]
MESHPLAN = str(Path(sys.executable).parent / "meshplan")


def redis_up(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def machine_redis() -> str:
    if not redis_up(6379):
        require("Redis at 127.0.0.1:6379 is not reachable")
    return "redis://127.0.0.1:6379/7"


@pytest.fixture
def clean_redis(machine_redis: str) -> Iterator[str]:
    """The machine's Redis (database 7), emptied before and after the test."""
    redis.Redis.from_url(machine_redis).flushdb()
    yield machine_redis
    redis.Redis.from_url(machine_redis).flushdb()


@pytest.fixture(scope="session")
def worker_db_url() -> Iterator[str]:
    with migrated_pg_database() as url:
        yield url


@pytest.fixture(scope="session")
def worker_db(worker_db_url: str) -> Iterator[Database]:
    db = Database(worker_db_url)
    yield db
    db.dispose()


@pytest.fixture
def no_leftover_jobs(worker_db: Database) -> None:
    """The session's database without the jobs earlier tests left queued or running: an API process sends every
    queued job whose message the broker does not hold as it starts (issue 59 item 2), and the lease watch takes
    over every running job whose lease expired; a test counting messages or take-overs starts from none."""
    with worker_db.session() as s:
        s.execute(update(Job).where(Job.status.in_(("queued", "running"))).values(status="cancelled"))


class Proc:
    """A service process in its own session (so that SIGKILL takes its children too), logging to a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.p = subprocess.Popen(
            args, env=env, cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_for(self, text: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            assert self.p.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not seen in {self.log}:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def service_env(db_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPLAN_")}
    env.update(DATABASE_URL=db_url, REDIS_URL=redis_url, PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """start("worker" | "beat", env) -> a running service process; all stopped at the end of the test."""
    procs: list[Proc] = []

    def _start(command: str, env: dict[str, str]) -> Proc:
        log = tmp_path / f"{command}-{len(procs)}.log"
        args = [MESHPLAN, command]
        if command == "beat":
            env = {**env, "MESHPLAN_BEAT_SCHEDULE": str(tmp_path / "beat-schedule")}
        proc = Proc(args, env, log)
        procs.append(proc)
        proc.wait_for("ready." if command == "worker" else "beat: Starting")
        return proc

    yield _start
    for p in procs:
        p.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[[], Proc]]:
    """A Redis server of this test's own (restartable without disturbing the machine's), on a free port."""
    binary = shutil.which("redis-server")
    if binary is None:
        require("redis-server is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs: list[Proc] = []

    def _start() -> Proc:
        args = [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        proc = Proc(args, dict(os.environ), tmp_path / f"redis-{len(procs)}.log")
        procs.append(proc)
        proc.wait_for("Ready to accept connections", 20)
        proc.port = port  # type: ignore[attr-defined]
        return proc

    yield _start
    for p in procs:
        p.kill()
