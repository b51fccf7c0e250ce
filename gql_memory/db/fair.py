"""Fair sharing of the connection pool between namespaces (tenants).

Each namespace may hold at most ``limit`` of this process's database transactions at once;
its further requests queue behind its own, not in front of other tenants'. A transaction
opened while the same task (or a task it spawned) already holds its namespace's slot passes
through, so nested or fanned-out database work can never deadlock on its own tenant's limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import NAMESPACE_SETTING
from gql_memory.db.engine import Database

SCOPE = text(f"SELECT set_config('{NAMESPACE_SETTING}', :namespace, true)")

# The namespaces whose slot the current task already holds (inherited by spawned tasks).
_HELD: ContextVar[frozenset[str]] = ContextVar("gql_memory_held_namespaces", default=frozenset())


class FairShare:
    """Per-namespace semaphores, created on first use and dropped when idle."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._gates: dict[str, tuple[asyncio.Semaphore, int]] = {}

    @asynccontextmanager
    async def slot(self, namespace: str) -> AsyncIterator[None]:
        held = _HELD.get()
        if namespace in held:
            yield
            return
        semaphore, users = self._gates.get(namespace, (asyncio.Semaphore(self.limit), 0))
        self._gates[namespace] = (semaphore, users + 1)
        token = None
        try:
            async with semaphore:
                token = _HELD.set(held | {namespace})
                yield
        finally:
            if token is not None:
                _HELD.reset(token)
            semaphore, users = self._gates[namespace]
            if users <= 1:
                del self._gates[namespace]
            else:
                self._gates[namespace] = (semaphore, users - 1)

    def in_use(self, namespace: str) -> int:
        """Transactions of the namespace running or waiting (for tests and metrics)."""
        return self._gates.get(namespace, (None, 0))[1]


class NamespacedDatabase(Database):
    """The database as one namespace's services see it: every transaction takes a slot and
    names its namespace to PostgreSQL, whose row-level security policies (migration 0007)
    then show and accept only that namespace's rows. With read replicas, its reads run on
    a replica and are scoped there the same way (the policies and roles are replicated)."""

    def __init__(self, db: Database, namespace: str, share: FairShare) -> None:
        super().__init__(db.engine, db.replicas, db.session)
        self._db = db
        self._namespace = namespace
        self._share = share

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self._share.slot(self._namespace), self._db.write() as conn:
            await self._scope(conn)
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self._share.slot(self._namespace), self._db.read() as conn:
            await self._scope(conn)
            yield conn

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[asyncpg.Connection]:
        """One autocommit statement; it must name its namespace to the policies itself."""
        async with self._share.slot(self._namespace), self._db.statement() as conn:
            yield conn

    async def _scope(self, conn: AsyncConnection) -> None:
        """SET LOCAL the namespace: it ends with the transaction, so a pooled connection
        never carries one tenant's namespace into another's transaction."""
        await conn.execute(SCOPE, {"namespace": self._namespace})
