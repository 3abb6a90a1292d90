"""A broker that accepts connections but never answers does not hold a request: the send fails (the job stays
queued for the sweep) instead of blocking (issue 16: one call blocked 19 s in send_task)."""

from __future__ import annotations

import socket
import threading
import time

from store.settings import Settings
from workers.dispatch import BrokerUnavailable, CeleryDispatcher, CommittedSender


def test_send_to_a_silent_broker_fails_instead_of_hanging() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # connections are accepted by the kernel and never answered
        port = silent.getsockname()[1]
        d = CeleryDispatcher(Settings(redis_url=f"redis://127.0.0.1:{port}/0"))
        outcome: list[object] = []

        def send() -> None:
            try:
                d.enqueue(1)
                outcome.append("sent")
            except BrokerUnavailable as exc:
                outcome.append(exc)

        t = threading.Thread(target=send, daemon=True)
        t.start()
        t.join(30)  # a hang shows as an empty outcome, not as a stuck test run
        assert outcome and isinstance(outcome[0], BrokerUnavailable), outcome
        assert d.problem() is not None


def test_a_silent_broker_does_not_hold_the_sender_s_caller() -> None:
    """A request hands its committed jobs to the process's sender and answers (issue 49): a send that hangs until
    its bound holds the sender thread, not the request."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        sender = CommittedSender(CeleryDispatcher(Settings(redis_url=f"redis://127.0.0.1:{port}/0")))
        t0 = time.monotonic()
        sender.send([1, 2])
        handed = time.monotonic() - t0
        assert handed < 0.2, handed
        assert not sender.flush(0.05)  # still trying: the first send waits for the silent broker
