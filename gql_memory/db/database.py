"""The Database every layer holds: write and read-only transactions on the primary's pool
(gql_memory.db.engine), reads routed to read replicas when there are any."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gql_memory.config import Settings
from gql_memory.db.engine import (
    ADMIN_APPLICATION_NAME,
    SERVING_APPLICATION_NAME,
    autocommit_statement,
    pooled_engine,
    read_transaction,
    write_transaction,
)

if TYPE_CHECKING:
    from gql_memory.db.positions import ReadSession
    from gql_memory.db.replicas import ReadReplicas


class Database:
    """Owns the async engine; hands out write and read-only transactions.

    With read replicas (``replicas``, see gql_memory.db.replicas) reads are routed to
    streaming standbys and writes note their commit position; without them every method is
    exactly the plain transaction of gql_memory.db.engine, at no extra cost. ``session`` is
    the default read-your-writes session (the library store's: its reads see its own writes).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        replicas: ReadReplicas | None = None,
        session: ReadSession | None = None,
    ) -> None:
        self.engine = engine
        self.replicas = replicas
        self.session = session

    @classmethod
    def from_url(
        cls,
        url: str,
        settings: Settings | None = None,
        *,
        role: str | None = None,
        application_name: str = SERVING_APPLICATION_NAME,
    ) -> Database:
        """A pool on ``url``; with ``role``, every connection runs as that role from its
        start (PostgreSQL checks privileges and row-level security against it)."""
        return cls(pooled_engine(url, settings, role=role, application_name=application_name))

    @classmethod
    def for_maintenance(cls, url: str, settings: Settings) -> Database:
        """A small pool without statement timeouts, for migrations, re-embedding and admin
        commands: building an HNSW index over a large table takes longer than any request."""
        return cls.from_url(
            url,
            settings.with_overrides(statement_timeout_ms=0, db_pool_size=2, db_max_overflow=0),
            application_name=ADMIN_APPLICATION_NAME,
        )

    def with_replicas(self, replicas: ReadReplicas, session: ReadSession | None = None) -> Database:
        """The same primary pool, its reads routed to ``replicas``; with ``session``, every
        read sees every earlier write made through this object (the library's guarantee)."""
        return Database(self.engine, replicas, session)

    def write(self, namespace: str | None = None) -> AbstractAsyncContextManager[AsyncConnection]:
        """One read-write transaction on the primary: committed on success, rolled back on
        any error. ``namespace`` is named to the row-level security policies in the same
        round trip as the BEGIN."""
        if self.replicas is None:
            return write_transaction(self.engine, namespace=namespace)
        return self.replicas.write(self.session, namespace)

    def statement(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A pooled connection to the primary for one statement in autocommit: its own
        transaction, with no BEGIN and COMMIT round trips. For hot paths whose whole work is
        one server-side function (adding to working memory); asyncpg prepares and caches the
        statement."""
        if self.replicas is None:
            return autocommit_statement(self.engine)
        return self.replicas.statement(self.session)

    def read(self, namespace: str | None = None) -> AbstractAsyncContextManager[AsyncConnection]:
        """One READ ONLY transaction: queries can never write, by construction. With
        replicas, on a replica (or the primary when none can serve it). ``namespace`` is
        named to the row-level security policies in the same round trip as the BEGIN."""
        if self.replicas is None:
            return read_transaction(self.engine, namespace)
        return self.replicas.read(self.session, namespace)

    async def dispose(self) -> None:
        if self.replicas is not None:
            await self.replicas.close()
        await self.engine.dispose()
