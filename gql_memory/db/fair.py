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
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db.database import Database

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
    async def write(self, namespace: str | None = None) -> AsyncIterator[AsyncConnection]:
        """A transaction of this namespace, named with its BEGIN in one round trip."""
        self._check(namespace)
        async with self._share.slot(self._namespace), self._db.write(self._namespace) as conn:
            yield conn

    @asynccontextmanager
    async def read(self, namespace: str | None = None) -> AsyncIterator[AsyncConnection]:
        """A read of this namespace, named with its BEGIN in one round trip."""
        self._check(namespace)
        async with self._share.slot(self._namespace), self._db.read(self._namespace) as conn:
            yield conn

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[asyncpg.Connection]:
        """One autocommit statement; it must name its namespace to the policies itself."""
        async with self._share.slot(self._namespace), self._db.statement() as conn:
            yield conn

    def _check(self, namespace: str | None) -> None:
        """The argument is there for the signature's sake: a service of one namespace works
        in no other. The namespace is SET LOCAL: it ends with the transaction, so a pooled
        connection never carries one tenant's namespace into another's transaction."""
        if namespace not in (None, self._namespace):
            raise ValueError(f"work of {self._namespace!r} cannot be scoped to {namespace!r}")
