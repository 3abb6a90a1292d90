"""A database outage under real worker processes (issue 16): the worker reaches PostgreSQL through a TCP proxy
that the test cuts and restores. Jobs queued while the database is gone, and a job whose solve ends while it is
gone, all finish once when it returns, without beat's sweep; none is left `running`."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from store.db import Database
from tests.api.helpers import TRAINING, make_cluster, make_model, ok, wait_job
from tests.workers.conftest import Proc, service_env
from tests.workers.test_worker_process import api_client, plans_of_job

pytestmark = pytest.mark.usefixtures("no_leftover_jobs")


class Proxy:
    """A TCP forwarder on a fixed local port: `cut()` closes the listener and every forwarded connection (the
    database vanishes: new connections are refused, open ones reset); `restore()` listens again."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            socks, self._socks = self._socks, []
            listener, self._listener = self._listener, None
        for s in [*socks, *([listener] if listener else [])]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    server.close()
                    return
                self._socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()


@pytest.fixture
def proxied_db_url(worker_db: Database) -> Iterator[tuple[str, Proxy]]:
    parts = urlsplit(worker_db.url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    yield urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host)), proxy
    proxy.cut()


def test_jobs_queued_during_an_outage_finish_once_it_ends(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc], proxied_db_url: tuple[str, Proxy]
) -> None:
    url, proxy = proxied_db_url
    worker = start("worker", service_env(url, clean_redis))
    with api_client(worker_db, clean_redis) as c:  # the API reaches the database directly
        cluster, model = make_cluster(c), make_model(c)
        body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING}
        proxy.cut()
        jobs = [ok(c.post("/v1/jobs", json=body), 202) for _ in range(3)]
        worker.wait_for("retry: Retry in", timeout=60)  # the worker took a message and met the outage
        assert "OperationalError" in worker.log.read_text()
        assert all(ok(c.get(f"/v1/jobs/{j['id']}"))["status"] in ("queued", "running") for j in jobs)
        proxy.restore()
        for j in jobs:
            done = wait_job(c, j["id"], timeout=150)
            assert done["status"] == "succeeded", done
            assert len(plans_of_job(c, cluster["id"], j["id"])) == 1


def test_a_solve_that_ends_during_an_outage_is_stored_when_it_returns(
    worker_db: Database, clean_redis: str, start: Callable[..., Proc], proxied_db_url: tuple[str, Proxy]
) -> None:
    url, proxy = proxied_db_url
    worker = start("worker", service_env(url, clean_redis))
    with api_client(worker_db, clean_redis) as c:
        cluster, model = make_cluster(c), make_model(c, "llama-2-70b")
        body = {
            "cluster_id": cluster["id"],
            "model_id": model["id"],
            "workload": {"mode": "training", "global_batch_size": 512, "seq_len": 4096},
        }
        job = ok(c.post("/v1/jobs", json=body), 202)
        deadline = time.monotonic() + 60
        while ok(c.get(f"/v1/jobs/{job['id']}"))["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        proxy.cut()  # the solve goes on and ends; its final write meets the outage
        worker.wait_for("outcome not written (database unreachable)", timeout=90)
        proxy.restore()
        done = wait_job(c, job["id"], timeout=150)
        assert done["status"] == "succeeded", done
        assert len(plans_of_job(c, cluster["id"], job["id"])) == 1
        assert done["attempts"] == 1  # stored by the delivery that solved it, not re-solved
