"""Alembic environment: the schema is store.models; the URL is the `sqlalchemy.url` option or DATABASE_URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from store.db import make_engine
from store.models import Base
from store.settings import settings

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # a caller (the tests, the service) lends its connection
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url") or settings().database_url
    engine = make_engine(url)
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            # SQLite alters a table by copying it and dropping the old one; with foreign keys on, that drop
            # would cascade into the tables that reference it. Off for this connection (outside a transaction).
            conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or settings().database_url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
