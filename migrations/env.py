"""Alembic environment: runs migrations on the connection gql_memory hands over.

gql_memory.db.migrate calls Alembic with an open (sync-adapted) connection in
``config.attributes["connection"]``; the ``alembic`` CLI works too, with DATABASE_URL set.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.ext.asyncio import create_async_engine

from gql_memory.config import Settings
from gql_memory.db.tables import metadata

config = context.config
target_metadata = metadata


def run_with_connection(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    url = Settings().database_url
    if not url:
        raise SystemExit("Set DATABASE_URL, or use `gql-memory migrate` for the embedded database.")
    engine = create_async_engine(url)
    async with engine.connect() as conn:
        await conn.run_sync(run_with_connection)
        await conn.commit()
    await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    run_with_connection(connection)
else:
    asyncio.run(_run_online())
