"""Every worker's main process looks for jobs whose worker died whole (SIGKILL, the machine gone) and takes them over.

A killed pool child is noticed by its Celery parent, which puts the message back at once
(`task_reject_on_worker_lost`). A worker killed whole has no parent left: its message stays unacknowledged in Redis
until the visibility timeout (15 minutes by default), and beat's sweep runs once a minute. The job row's lease (a
heartbeat every 2 s, LEASE_S long) says sooner that its worker is gone: every live worker checks every
TAKEOVER_CHECK_S, and one of them (a conditional update) requeues and sends each expired job [issue 37 item 1].
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from store.repositories.jobs import TAKEOVER_CHECK_S
from store.settings import settings
from workers.celery_app import app
from workers.dispatch import CeleryDispatcher
from workers.service import take_over_expired

log = logging.getLogger("meshplan.workers")
_stop = threading.Event()


def _watch() -> None:
    dispatcher = CeleryDispatcher(settings(), app)
    while not _stop.wait(TAKEOVER_CHECK_S):
        try:
            take_over_expired(dispatcher)
        except Exception:  # the database or the broker briefly away: look again at the next tick
            log.warning("expired job leases not checked", exc_info=True)


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start(**_: Any) -> None:
    _stop.clear()
    threading.Thread(target=_watch, name="meshplan-lease-watch", daemon=True).start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _end(**_: Any) -> None:
    _stop.set()
