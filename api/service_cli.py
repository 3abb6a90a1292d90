"""`meshplan serve | worker | beat | replan | migrate | token`: running the service."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli_output import fail
from optimizer.errors import DomainError

if TYPE_CHECKING:  # start-up (issue 49): the settings (pydantic-settings, SQLAlchemy URLs) load when a command runs
    from store.settings import Settings

GIL_SWITCH_S = 0.001
token_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help="API tokens.")


def _settings() -> Settings:
    from store.settings import load_settings

    try:
        return load_settings()
    except DomainError as exc:
        fail(exc)


@contextmanager
def database_errors(url: str) -> Iterator[None]:
    """A database the command cannot use (unreachable, or without meshplan's tables) ends as one line naming
    DATABASE_URL, exit code 2: a command's own database errors never reach the user as a traceback."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, ProgrammingError, SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        try:
            shown = make_url(url).render_as_string(hide_password=True)
        except ArgumentError:
            shown = url[:200]
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
        if isinstance(exc, ProgrammingError) or "no such table" in reason:
            rule = f"{shown} has no meshplan schema ({reason}); run `meshplan migrate` first"
        else:
            rule = f"cannot use {shown}: {type(exc).__name__}: {reason}"
        fail(DomainError("DATABASE_URL", rule))


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("worker")(worker)
    app.command("beat")(beat)
    app.command("replan")(replan)
    app.command("migrate")(migrate)
    app.add_typer(token_app, name="token")


def migrate() -> None:
    """Bring the database (DATABASE_URL, default the SQLite file) to the newest schema."""
    from store.migrate import upgrade

    cfg = _settings()
    try:
        upgrade(cfg.database_url)
    except Exception as exc:
        fail(DomainError("DATABASE_URL", f"cannot migrate {cfg.database_url}: {type(exc).__name__}: {exc}"))
    typer.echo(f"database at the newest schema: {cfg.database_url}")


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port (1-65535).")] = 8000,
    no_migrate: Annotated[bool, typer.Option("--no-migrate", help="Do not migrate at start-up.")] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=64, help="API processes (with REDIS_URL; embedded mode runs its jobs in its one process)."
        ),
    ] = 1,
) -> None:
    """Run the API and the web pages. Without REDIS_URL, jobs run inside this process (embedded mode)."""
    import uvicorn

    from api.app import create_app
    from store.db import database
    from store.repositories.tokens import TokenRepository

    cfg = _settings()
    if workers > 1 and not cfg.redis_url:
        fail(DomainError("--workers", "more than one API process needs REDIS_URL (embedded jobs run in one process)"))
    if not no_migrate:
        migrate()
    with database_errors(cfg.database_url):  # e.g. --no-migrate on a database never migrated
        db = database(cfg.database_url)
        with db.session() as s:
            repo = TokenRepository(s)
            if not repo.list():
                _row, secret = repo.create("first-admin", ["write"])
                typer.echo(f"created the first API token (write scope; shown once): {secret}")
            else:  # the first one was shown once, at the first start [issue 48 §10]
                typer.echo(
                    "API tokens exist (the first was printed at the first start); a new one: "
                    ".venv/bin/meshplan token create --scope write"
                )
    mode = "Celery on " + cfg.redis_url if cfg.redis_url else "in-process (no REDIS_URL)"
    typer.echo(f"meshplan on http://{host}:{port}  database: {cfg.database_url}  jobs: {mode}")
    # A solve on the in-process job thread holds the GIL for CPython's default 5 ms slices; at 1 ms the event loop and
    # the request threads get it back sooner: with jobs solving back to back, history p99 at 50 clients 93 -> 64 ms,
    # with one long solve 40 -> 14 ms (benchmarks/load.py, embedded; issue 16).
    sys.setswitchinterval(GIL_SWITCH_S)
    if workers == 1:
        uvicorn.run(create_app(cfg, db), host=host, port=port, log_level="warning")
        return
    db.dispose()  # each process builds its own engine from the same settings (environment)
    uvicorn.run("api.app:create_app", factory=True, workers=workers, host=host, port=port, log_level="warning")


def worker(
    concurrency: Annotated[int, typer.Option(help="Worker processes.")] = 1,
) -> None:
    """Run a Celery worker (needs REDIS_URL)."""
    cfg = _settings()
    if not cfg.redis_url:
        fail(DomainError("REDIS_URL", "must be set to run a worker (without it, `meshplan serve` runs jobs)"))
    from workers.celery_app import app

    app.worker_main(["worker", "--loglevel=INFO", f"--concurrency={concurrency}", "--pool=prefork"])


def beat() -> None:
    """Run Celery beat: the nightly re-plan and the sweep of lost jobs (needs REDIS_URL)."""
    cfg = _settings()
    if not cfg.redis_url:
        fail(DomainError("REDIS_URL", "must be set to run beat"))
    from workers.celery_app import app

    app.Beat(loglevel="INFO", schedule=cfg.beat_schedule).run()


def replan(
    now: Annotated[bool, typer.Option("--now", help="Check every watch now (else: print when beat runs it).")] = False,
    cluster: Annotated[int | None, typer.Option(help="Only this cluster's watches.")] = None,
    wait: Annotated[bool, typer.Option(help="Embedded mode: run the jobs here and wait for them.")] = True,
) -> None:
    """Re-plan the watches whose inputs changed (what beat runs nightly)."""
    cfg = _settings()
    if not now:
        typer.echo(f"beat re-plans daily at {cfg.replan_at} {cfg.replan_timezone}; `meshplan replan --now` runs it now")
        return
    from store.db import database
    from workers.dispatch import InProcessDispatcher, make_dispatcher
    from workers.service import replan_all

    with database_errors(cfg.database_url):
        db = database(cfg.database_url)
        dispatcher = make_dispatcher(db, cfg)
        jobs = replan_all("nightly", cluster, dispatcher, db, cfg)
    typer.echo(f"{len(jobs)} watch(es) changed; jobs {jobs}" if jobs else "no watch changed")
    if isinstance(dispatcher, InProcessDispatcher) and wait:
        dispatcher.wait()


@token_app.command("create")
def token_create(
    scope: Annotated[list[str], typer.Option(help="read or write (write implies read).")],
    name: Annotated[str, typer.Option(help="Who it is for.")] = "cli",
) -> None:
    """Create an API token; the secret is printed once and stored hashed."""
    from store.db import database
    from store.repositories.tokens import TokenRepository

    cfg = _settings()
    try:
        with database_errors(cfg.database_url), database(cfg.database_url).session() as s:
            row, secret = TokenRepository(s).create(name, scope)
    except DomainError as exc:
        fail(exc)
    typer.echo(secret)
    sys.stderr.write(f"token {row.id} ({row.scopes}) for {name}\n")


@token_app.command("revoke")
def token_revoke(token_id: int) -> None:
    """Revoke a token by id."""
    from store.db import database
    from store.repositories.tokens import TokenRepository

    cfg = _settings()
    try:
        with database_errors(cfg.database_url), database(cfg.database_url).session() as s:
            TokenRepository(s).revoke(token_id)
    except DomainError as exc:
        fail(exc)
    typer.echo(f"token {token_id} revoked")
