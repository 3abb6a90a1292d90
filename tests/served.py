"""The real app served by uvicorn on a free port, on a thread of the test's process, for clients outside it (a CLI,
curl, httpx): the API tests' `server` fixture and the README's served examples."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI


@contextmanager
def served(app: FastAPI, start_within_s: float = 20) -> Iterator[str]:
    """`app` listening on 127.0.0.1; yields "127.0.0.1:PORT" once it accepts, stops it on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_within_s
    while not srv.started:
        assert time.monotonic() < deadline, f"the app did not start within {start_within_s} s"
        time.sleep(0.05)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)
