"""Every worker's main process looks for jobs whose worker died whole (SIGKILL, the machine gone) and takes them over.

A killed pool child is noticed by its Celery parent, which puts the message back at once
(`task_reject_on_worker_lost`). A worker killed whole has no parent left: its message stays unacknowledged in Redis
until the visibility timeout (15 minutes by default), and beat's sweep runs once a minute. The job row's lease (a
heartbeat every 2 s, LEASE_S long) says sooner that its worker is gone: every live worker checks every
TAKEOVER_CHECK_S, and one of them (a conditional update) requeues and sends each expired job [issue 37 item 1].

A lease also expires when the database was away: no worker could beat. So no job is taken over until the database
has answered this watch for a full lease without a miss: by then every live worker has beaten again (every 2 s), and
only the dead ones' leases are still expired [issue 47 item 2: 6 of 8 jobs solved twice after an 18 s outage].
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from store.repositories.jobs import LEASE_S, TAKEOVER_CHECK_S
from store.settings import settings
from workers.celery_app import app
from workers.dispatch import CeleryDispatcher, Dispatcher
from workers.service import database_problem, take_over_expired

log = logging.getLogger("meshplan.workers")
_stop = threading.Event()


class Reachability:
    """Since when the database has answered every look without a miss (None: it did not answer the last one)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.since: float | None = None

    def saw(self, reachable: bool) -> None:
        if not reachable:
            self.since = None
        elif self.since is None:
            self.since = self.clock()

    def steady(self) -> bool:
        """Reachable for a full lease: a lease still expired now is a dead worker's, not the outage's."""
        return self.since is not None and self.clock() - self.since >= LEASE_S


def tick(gate: Reachability, dispatcher: Dispatcher | None = None) -> list[int]:
    """One look: whether the database answers, and, once it has for a full lease, the take-over."""
    problem = database_problem()
    gate.saw(problem is None)
    if problem is not None:
        log.warning("expired job leases not checked: %s", problem)
        return []
    return take_over_expired(dispatcher) if gate.steady() else []


def _watch() -> None:
    dispatcher = CeleryDispatcher(settings(), app)
    gate = Reachability()
    while not _stop.wait(TAKEOVER_CHECK_S):
        try:
            tick(gate, dispatcher)
        except Exception:  # the database or the broker away mid-look: it counts as a miss; look again next tick
            gate.saw(False)
            log.warning("expired job leases not checked", exc_info=True)


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start(**_: Any) -> None:
    _stop.clear()
    threading.Thread(target=_watch, name="meshplan-lease-watch", daemon=True).start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _end(**_: Any) -> None:
    _stop.set()
