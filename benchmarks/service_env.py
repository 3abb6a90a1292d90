"""What the service benchmarks share: a migrated database with an API token, and the environment of a service
process on it (no MESHPLAN_* setting inherited from the caller)."""

from __future__ import annotations

import os

from store.db import Database
from store.migrate import upgrade
from store.repositories.tokens import TokenRepository


def migrated_with_token(url: str, token_name: str) -> tuple[Database, str]:
    """The database at `url` brought to the newest schema, and a new write token's secret."""
    upgrade(url)
    db = Database(url)
    with db.session() as session:
        _row, token = TokenRepository(session).create(token_name, ["write"])
    return db, token


def service_env(database_url: str, redis_url: str | None = None) -> dict[str, str]:
    """This process's environment for a `meshplan` service on `database_url` (embedded without `redis_url`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPLAN_") and k != "REDIS_URL"}
    env.update(DATABASE_URL=database_url, MESHPLAN_MAX_PAGE_SIZE="50")
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env
