"""Request-scoped dependencies: the session (committed at the request boundary) and the caller's token."""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from store.db import Database
from store.models import MAX_ID
from store.repositories.paging import PageRequest
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from workers.dispatch import CommittedSender, Dispatcher, send_committed

log = logging.getLogger("meshplan.api")
RowId = Annotated[int, Path(ge=1, le=MAX_ID, description="Row id.")]
NameQuery = Annotated[str, Query(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$")]

_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _not_a_timestamp(value: Any) -> Any:
    """Pydantic reads a number as Unix seconds (`until=0.5` was 1970); the document says date-time, so only that."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date-time (e.g. 2026-11-21T00:00:00Z), not a number")
    return value


IsoTime = Annotated[datetime, BeforeValidator(_not_a_timestamp)]

bearer = HTTPBearer(auto_error=False, description="An API token from `meshplan token create`.")


async def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


async def get_settings(request: Request) -> Settings:
    cfg: Settings = request.app.state.settings
    return cfg


async def get_dispatcher(request: Request) -> Dispatcher:
    d: Dispatcher = request.app.state.dispatcher
    return d


READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


SEND_AFTER_COMMIT = "meshplan_send_after_commit"
TOKEN_ID = "meshplan_token_id"  # request state: the admitted token (api.read_cache notes its use on a hit)


def get_session(
    request: Request, db: Annotated[Database, Depends(get_db)], d: Annotated[Dispatcher, Depends(get_dispatcher)]
) -> Iterator[Session]:
    """One unit of work per request: committed when the handler returns, rolled back when it raises; then the
    jobs the handler queued (`send_after_commit`) go to the dispatcher: on Celery through the process's sender
    thread (workers.dispatch.CommittedSender), so that the answer does not wait for the broker; in process at once
    (a job pool's submit). Reads take no write lock (SQLite)."""
    with db.session(read_only=request.method in READ_METHODS) as s:
        yield s
    job_ids = s.info.get(SEND_AFTER_COMMIT, [])
    sender: CommittedSender | None = getattr(request.app.state, "sender", None)
    if sender is not None:
        sender.send(job_ids)
    else:
        send_committed(d, job_ids)


def send_after_commit(s: Session, job_ids: list[int]) -> None:
    """Jobs to send once the request's transaction has committed (never before: a worker must find them)."""
    s.info.setdefault(SEND_AFTER_COMMIT, []).extend(job_ids)


# scope="function": the unit of work commits (and its jobs are sent) before the response goes out, so a client
# that has its 201/202 finds what it wrote, and a failed commit is answered as an error, never as a success.
# FastAPI's default ("request") runs the exit after the response is sent [fastapi routing.request_response;
# FastAPI 0.121 release notes]; a POST /v1/jobs answered 202 was then not yet readable (issue 16, load benchmark).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]


@dataclass(frozen=True)
class Caller:
    """Who sent the request."""

    name: str
    scopes: frozenset[str]


def require(scope: str) -> Callable[..., Caller]:
    """A dependency that admits a live token with `scope` (401 without one, 403 without the scope). With the
    open_reads setting, reads need no token."""

    def check(
        request: Request,
        s: SessionDep,
        cfg: SettingsDep,
        db: Annotated[Database, Depends(get_db)],
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> Caller:
        if creds is None:
            if scope == "read" and cfg.open_reads:
                return Caller("anonymous", frozenset({"read"}))
            raise HTTPException(401, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"})
        token = TokenRepository(s).authenticate(creds.credentials)
        if token is None:
            raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
        scopes = frozenset(token.scopes.split(","))
        if scope not in scopes:
            raise HTTPException(403, f"this token lacks the {scope!r} scope")
        note_use(db, token.id)
        setattr(request.state, TOKEN_ID, token.id)
        return Caller(f"token:{token.id}", scopes)

    return check


_last_noted: dict[tuple[str, int], float] = {}  # (database URL, token id) -> when noted
NOTE_EVERY_S = 60.0


def note_use(db: Database, token_id: int) -> None:
    """Record a token's last use at most once a minute per process, in its own short unit of work on a background
    thread: the request's transaction never writes (or locks) the token row [issue 16: 50 clients queued on that
    row lock], and the request never waits for it (on SQLite a write request holds the database's write lock
    until it commits, so a note written from inside it waited the whole 30 s busy timeout and failed). Best
    effort: a busy or absent database does not fail anything."""
    t = time.monotonic()
    key = (db.url, token_id)  # token ids repeat across databases
    if t - _last_noted.get(key, -math.inf) < NOTE_EVERY_S:
        return
    _last_noted[key] = t
    _noter.submit(_touch, db, token_id)


def _touch(db: Database, token_id: int) -> None:
    try:
        with db.session() as s:
            TokenRepository(s).touch(token_id, NOTE_EVERY_S)
    except SQLAlchemyError as exc:
        log.warning("token %s last use not recorded: %s", token_id, type(exc).__name__)


_noter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="token-use")


Reader = Annotated[Caller, Depends(require("read"))]
Writer = Annotated[Caller, Depends(require("write"))]


async def page_request(
    cfg: SettingsDep, offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0, limit: Annotated[int, Query(ge=1)] = 50
) -> PageRequest:
    """offset and limit query parameters; limit capped by the max_page_size setting."""
    from optimizer.errors import DomainError

    if limit > cfg.max_page_size:
        raise DomainError("limit", f"must be at most {cfg.max_page_size} (got {limit})")
    return PageRequest(offset=offset, limit=limit)


Paging = Annotated[PageRequest, Depends(page_request)]
