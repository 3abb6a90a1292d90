"""Which committed units of work can change a cached read, and the counter that says one did.

The API keeps finished responses of immutable-looking reads (the plan history, a plan) in memory [issue 16: 50
clients on the history, p99 150 ms embedded and 50 ms on PostgreSQL, on 2 cores]. Such a copy is right only until
a commit changes what it was built from, in this process or any other (a Celery worker storing a plan, the CLI
revoking a token). So:

- Writers: every session of a `Database` notes the tables it wrote (ORM flushes and DML statements). At commit, if
  the change can alter a cached read, it is published in the same transaction: SQLite bumps the one row of
  `change_generations`; PostgreSQL sends `NOTIFY meshplan_changes` (delivered only if the transaction commits).
  A job's own bookkeeping (a job row inserted or updated: status, heartbeat, progress) and a new workload row
  change no cached read and publish nothing, so a solving job's heartbeats every 2 s keep the copies warm.
- Readers: `ChangeFeed.generation()` is a number that moves whenever such a commit happened anywhere, or None when
  it cannot be known (the feed's connection is down, the schema predates the table): then nothing is cached.
"""

from __future__ import annotations

import logging
import select
import sqlite3
import threading
import time
from typing import Any, Protocol

from sqlalchemy import URL, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import ORMExecuteState, Session, UOWTransaction, sessionmaker

log = logging.getLogger("meshplan.changes")

CHANNEL = "meshplan_changes"
CHANGED = "meshplan_changed_tables"  # Session.info key: {(table, "insert"|"update"|"delete"), ...}
PUBLISHED = "meshplan_published"

# (table, operation) pairs no cached read depends on. Everything else (any delete: ON DELETE CASCADE reaches plans)
# is published. A job row is never part of a plan response; a workload row is immutable once inserted.
SILENT = frozenset({("jobs", "insert"), ("jobs", "update"), ("workloads", "insert")})


def publishes(changed: set[tuple[str, str]]) -> bool:
    """Whether a unit of work that made these changes can alter a cached read."""
    return bool(changed - SILENT)


class ChangeFeed(Protocol):
    def generation(self) -> int | None:
        """A number that differs after any published commit (from any process); None: unknown, cache nothing."""
        ...

    def committed_here(self) -> None:
        """This process committed a published change (seen at once, before any notification comes back)."""
        ...

    def close(self) -> None: ...


def track(sessions: sessionmaker[Session], publish_sql: str, feed: ChangeFeed) -> None:
    """Note what the sessions of `sessions` write and publish it at commit with `publish_sql`."""

    def note(session: Session, table: str, op: str) -> None:
        session.info.setdefault(CHANGED, set()).add((table, op))

    @event.listens_for(sessions, "after_flush")
    def _flushed(session: Session, _ctx: UOWTransaction) -> None:
        for objs, op in ((session.new, "insert"), (session.dirty, "update"), (session.deleted, "delete")):
            for obj in objs:
                note(session, getattr(obj, "__tablename__", "?"), op)

    @event.listens_for(sessions, "do_orm_execute")
    def _statement(state: ORMExecuteState) -> None:
        if state.is_select:
            return
        table = getattr(getattr(state.statement, "table", None), "name", "?")
        op = "insert" if state.is_insert else "update" if state.is_update else "delete"
        note(state.session, table, op)

    @event.listens_for(sessions, "before_commit")
    def _publish(session: Session) -> None:
        if session.new or session.dirty or session.deleted:
            session.flush()  # the commit's own flush comes after this hook
        if publishes(session.info.get(CHANGED, set())):
            try:  # SQLite: a failed statement leaves the transaction intact; NOTIFY does not fail
                session.connection().exec_driver_sql(publish_sql)
            except DBAPIError as exc:  # a schema without the counter table: readers see no generation either
                log.warning("change not published (reads are not cached on this schema): %s", exc)
                return
            session.info[PUBLISHED] = True
            # Moved before the commit too: a copy built while it commits is tagged with a generation that the
            # move after it retires, and a read between the commit and that move already finds its tag stale.
            feed.committed_here()

    @event.listens_for(sessions, "after_commit")
    def _committed(session: Session) -> None:
        if session.info.pop(PUBLISHED, False):
            feed.committed_here()
        session.info.pop(CHANGED, None)

    @event.listens_for(sessions, "after_rollback")
    def _rolled_back(session: Session) -> None:
        session.info.pop(CHANGED, None)
        session.info.pop(PUBLISHED, None)


class SqliteChanges:
    """SQLite: the counter row `change_generations` (id 1), read on a connection of its own. A WAL reader never
    waits for the writer, so the read (about 10 us) can run on the event loop."""

    PUBLISH = "UPDATE change_generations SET n = n + 1 WHERE id = 1"

    def __init__(self, path: str | None) -> None:
        self.path = path  # None: an in-memory database, which no other connection sees; nothing is cached
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def generation(self) -> int | None:
        if self.path is None:
            return None
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = sqlite3.connect(self.path, timeout=0.2, check_same_thread=False)
                row = self._conn.execute("SELECT n FROM change_generations WHERE id = 1").fetchone()
            except sqlite3.Error:
                self._close()
                return None
        return int(row[0]) if row else None

    def committed_here(self) -> None:
        pass  # the row itself moved

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()


class PostgresChanges:
    """PostgreSQL: LISTEN on a connection of its own, in a daemon thread started at the first read. Each
    notification, and each (re)connection, moves the generation; while the listener is not connected the
    generation is unknown. TCP keepalives notice a silent network within about 10 s."""

    PUBLISH = f"NOTIFY {CHANNEL}"
    RETRY_S = 1.0

    def __init__(self, url: URL) -> None:
        self.conninfo: dict[str, Any] = {
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": url.password,
            "dbname": url.database,
            **{k: v for k, v in url.query.items() if isinstance(v, str)},
        }
        self._gen = 0
        self._listening = False
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def generation(self) -> int | None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._listen, name="meshplan-changes", daemon=True)
                    self._thread.start()
        if not self._listening:
            return None
        fd = self._fd
        if fd is not None and select.select([fd], [], [], 0)[0]:
            return None  # a notification arrived that the listener has not counted yet: do not trust copies now
        return self._gen

    def committed_here(self) -> None:
        with self._lock:
            self._gen += 1

    def _moved(self, listening: bool) -> None:
        with self._lock:
            self._gen += 1
            self._listening = listening

    def _listen(self) -> None:
        import psycopg

        keepalive: dict[str, Any] = {
            "keepalives": 1,
            "keepalives_idle": 5,
            "keepalives_interval": 2,
            "keepalives_count": 2,
        }
        while not self._stop.is_set():
            try:
                with psycopg.connect(autocommit=True, connect_timeout=2, **keepalive, **self.conninfo) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._fd = conn.fileno()
                    self._moved(listening=True)  # whatever was cached before now is stale
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self._moved(listening=True)
            except Exception as exc:
                if self._stop.is_set():
                    break
                log.warning("change feed disconnected (nothing is cached until it is back): %s", exc)
            self._fd = None
            self._moved(listening=False)
            self._stop.wait(self.RETRY_S)

    def close(self) -> None:
        self._stop.set()


def feed_for(url: URL) -> SqliteChanges | PostgresChanges:
    if url.get_backend_name() == "sqlite":
        path = url.database
        return SqliteChanges(path if path and path != ":memory:" and not path.startswith("file:") else None)
    return PostgresChanges(url)


def wait_listening(feed: ChangeFeed, timeout_s: float = 5.0) -> bool:
    """Until the feed knows its generation (tests and start-up checks)."""
    t0 = time.monotonic()
    while feed.generation() is None:
        if time.monotonic() - t0 > timeout_s:
            return False
        time.sleep(0.02)
    return True
