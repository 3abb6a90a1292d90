"""Finished responses of the plan reads, kept in memory and served without a thread or a database connection.

[issue 16] 50 clients on GET /v1/plans: a miss costs about 5 ms of Python (token lookup, two queries, 50 summaries
validated and serialized, four thread-pool hops), so one process served about 200 requests/s, p99 about 400 ms.
A hit costs a generation read and a dictionary lookup on the event loop.

A copy is right only while nothing it was built from changed: each is tagged with the change generation
(store.changes) read before its handler ran, and is served only while the generation is the same, so any commit
that can alter it, from any process, retires it (a new plan, a deleted cluster, a revoked token). An unknown
generation (the feed is down) caches nothing. The key holds the request's path, query and a hash of its
credentials: a copy goes only to the caller whose token the handler admitted. Concurrent misses of one key wait
for the first (single flight), so a retired copy costs one handler run, not one per waiting client.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import TOKEN_ID, note_use
from api.metrics import Metrics
from store.changes import ChangeFeed
from store.db import Database

CACHED_PATHS = re.compile(r"^/v1/plans(/[0-9]+)?$")  # the history and one plan: what dashboards poll
MAX_AGE_S = 60.0  # a bound on any staleness a lost notification could cause
MAX_ENTRY_SHARE = 0.1  # no single response takes more than this share of the budget


@dataclass
class Entry:
    generation: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    route: str
    token_id: int | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Flight:
    generation: int
    done: asyncio.Future[Entry | None]


Key = tuple[str, bytes, bytes]


def _credentials(scope: Scope) -> bytes:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            return hashlib.sha256(value).digest()
    return b""


class ReadCache:
    """ASGI middleware: GET of CACHED_PATHS served from memory while the change generation stands."""

    def __init__(self, app: ASGIApp, db: Database, metrics: Metrics, budget_bytes: int) -> None:
        self.app, self.db, self.metrics, self.budget = app, db, metrics, budget_bytes
        self.feed: ChangeFeed = db.changes
        self.entries: OrderedDict[Key, Entry] = OrderedDict()
        self.bytes = 0
        self.flights: dict[Key, _Flight] = {}
        self.hits = self.misses = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            self.budget <= 0
            or scope["type"] != "http"
            or scope["method"] != "GET"
            or not CACHED_PATHS.match(scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        generation = self.feed.generation()
        if generation is None:
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        key: Key = (scope["path"], scope.get("query_string", b""), _credentials(scope))
        entry = self._fresh(key, generation)
        if entry is None and (flight := self.flights.get(key)) is not None and flight.generation == generation:
            entry = await asyncio.shield(flight.done)
        if entry is not None:
            await self._replay(entry, send, t0)
            return
        await self._fill(key, generation, scope, receive, send)

    def _fresh(self, key: Key, generation: int) -> Entry | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry.generation != generation or time.monotonic() - entry.at > MAX_AGE_S:
            self._drop(key)
            return None
        self.entries.move_to_end(key)
        return entry

    async def _replay(self, entry: Entry, send: Send, t0: float) -> None:
        self.hits += 1
        await send({"type": "http.response.start", "status": 200, "headers": entry.headers})
        await send({"type": "http.response.body", "body": entry.body})
        if entry.token_id is not None:
            note_use(self.db, entry.token_id)  # the token's last use, as the token check would note it
        self.metrics.requests.labels("GET", entry.route, "200").inc()
        self.metrics.latency.labels(entry.route).observe(time.perf_counter() - t0)

    async def _fill(self, key: Key, generation: int, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the handler, pass its response on, and keep it if it is a complete 200."""
        self.misses += 1
        flight = _Flight(generation, asyncio.get_running_loop().create_future())
        self.flights[key] = flight
        start: Message | None = None
        chunks: list[bytes] = []
        complete = False

        async def capture(message: Message) -> None:
            nonlocal start, complete
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                complete = not message.get("more_body", False)
            await send(message)

        entry: Entry | None = None
        try:
            await self.app(scope, receive, capture)
            if start is not None and start["status"] == 200 and complete:
                route = str(getattr(scope.get("route"), "path", scope["path"]))
                token_id = (scope.get("state") or {}).get(TOKEN_ID)
                entry = Entry(generation, list(start.get("headers", [])), b"".join(chunks), route, token_id)
                self._keep(key, entry)
        finally:
            if self.flights.get(key) is flight:
                del self.flights[key]
            if not flight.done.done():
                flight.done.set_result(entry)

    def _keep(self, key: Key, entry: Entry) -> None:
        size = _size(key, entry)
        if size > self.budget * MAX_ENTRY_SHARE:
            return
        self._drop(key)
        self.entries[key] = entry
        self.bytes += size
        while self.bytes > self.budget and self.entries:
            self._drop(next(iter(self.entries)))

    def _drop(self, key: Key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.bytes -= _size(key, entry)


def _size(key: Key, entry: Entry) -> int:
    """Bytes a kept copy counts against the budget: its body, its key and a fixed allowance for the rest."""
    return len(entry.body) + len(key[0]) + len(key[1]) + 256
