"""Read replicas: reads on streaming standbys, read-your-writes by WAL position.

PostgreSQL's streaming replication does the replicating; this module only routes. Reads go
round-robin to the replicas that are up and within GQL_MEMORY_REPLICA_MAX_LAG_S of the
primary (gql_memory.db.health), writes to the primary, which reports each commit's position.
A read that must see a position (a client's X-Read-After-LSN, a library store's own last
write; gql_memory.db.positions) waits up to GQL_MEMORY_READ_AFTER_LSN_WAIT_S for a replica to
replay it, then reads from the primary. While the primary is down, the replicas serve every
read whatever their lag, and writes fail at once with SERVICE_UNAVAILABLE and a retry delay,
until a check finds the primary back. LISTEN is not routed here: NOTIFY is not replicated to
standbys, so the event listener always connects to the primary (gql_memory.live.listener).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import Protocol

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gql_memory.config import Settings
from gql_memory.db.engine import (
    autocommit_statement,
    pooled_engine,
    read_transaction,
    write_transaction,
)
from gql_memory.db.health import Health, HealthObserver, Probe, Replica, server_name
from gql_memory.db.positions import ReadSession, current_session, format_lsn, parse_lsn
from gql_memory.errors import ServiceUnavailableError, ValidationError

log = logging.getLogger(__name__)

# A write's commit position, asked right after its COMMIT returned. The flush position is at
# or past the end of the commit record (COMMIT waits for that flush unless synchronous_commit
# is off) and is what the primary streams to standbys at once; the insert position would
# also cover WAL that nobody has flushed yet (up to wal_writer_delay away). With
# synchronous_commit = off, only the insert position is sure to include the commit.
COMMIT_POSITION_SQL = """
SELECT CASE WHEN current_setting('synchronous_commit') = 'off' THEN pg_current_wal_insert_lsn()
            ELSE pg_current_wal_flush_lsn() END::text
"""
REPLAY_POSITION_SQL = "SELECT pg_last_wal_replay_lsn()::text"
# The end of the primary's WAL: no commit position it reported, or ever will report before
# writing more, lies beyond it (it is at or past both positions COMMIT_POSITION_SQL reads).
WAL_END_SQL = "SELECT pg_current_wal_insert_lsn()::text"
# A read waiting for a position polls the replica after 1 ms, then 2, 4 ... at most 20 ms.
WAIT_FIRST_POLL_S = 0.001
WAIT_MAX_POLL_S = 0.02


class ReplicaObserver(HealthObserver, Protocol):
    """What checks and routing report (metrics implement it)."""

    def read_served(self, server: str) -> None: ...

    def read_fell_back(self, reason: str) -> None: ...

    def read_waited(self, server: str) -> None: ...


class ReadReplicas:
    """Routes reads to replicas and writes to the primary, by what ``health`` found."""

    def __init__(
        self,
        primary: AsyncEngine,
        health: Health,
        settings: Settings,
        observer: ReplicaObserver | None = None,
    ) -> None:
        self.primary = primary
        self.health = health
        self.wait_s = settings.read_after_lsn_wait_s
        self.observer = observer
        self._turn = itertools.count()
        # the newest primary position known here (commits seen, asked): a read position
        # at or before it needs no question to the primary
        self._primary_lsn = 0

    @classmethod
    def for_settings(
        cls,
        settings: Settings,
        primary: AsyncEngine,
        *,
        role: str | None = None,
        observer: ReplicaObserver | None = None,
    ) -> ReadReplicas:
        """A pool per GQL_MEMORY_READ_DATABASE_URL entry, as the primary's (role, limits)."""
        names: set[str] = set()
        replicas = []
        for index, url in enumerate(settings.read_database_urls):
            name = server_name(url)
            name = name if name not in names else f"{name}#{index}"
            names.add(name)
            engine = pooled_engine(url, settings, role=role)
            replicas.append(Replica(name, engine, Probe(engine, settings.db_connect_timeout_s)))
        return cls(primary, Health(primary, replicas, settings, observer), settings, observer)

    @property
    def replicas(self) -> list[Replica]:
        return self.health.replicas

    @property
    def primary_up(self) -> bool:
        return self.health.primary_up

    async def start(self) -> None:
        await self.health.start()

    async def check(self) -> None:
        await self.health.check()

    async def close(self) -> None:
        await self.health.close()
        for replica in self.health.replicas:
            await replica.engine.dispose()

    @asynccontextmanager
    async def read(
        self, session: ReadSession | None = None, namespace: str | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """A READ ONLY transaction on a replica that can serve it, else on the primary;
        scoped to ``namespace`` if given (as ``Database.read``)."""
        session = current_session() or session
        after = session.after_lsn if session is not None else 0
        on_primary = session is not None and session.prefer_primary and self.health.primary_up
        async with AsyncExitStack() as stack:
            conn = None if on_primary else await self._enter_replica(stack, after, namespace)
            if conn is None:
                try:
                    conn = await stack.enter_async_context(
                        read_transaction(self.primary, namespace)
                    )
                except ServiceUnavailableError:
                    # gone since the last check: a read that preferred it moves on
                    if not on_primary or not (
                        conn := await self._enter_replica(stack, after, namespace)
                    ):
                        raise
                else:
                    self._served("primary")
            yield conn

    async def _enter_replica(
        self, stack: AsyncExitStack, after: int, namespace: str | None = None
    ) -> AsyncConnection | None:
        """A read transaction on a usable replica that has replayed ``after`` (entered on
        ``stack``), or None: read on the primary."""
        usable, reason = self.health.usable()
        if not usable:
            self._fell_back(reason)
            return None
        ready = [r for r in usable if r.replay_lsn >= after]
        if not ready:
            await self._require_written(after)
        candidates = ready or usable
        turn = next(self._turn)
        for i in range(len(candidates)):
            replica = candidates[(turn + i) % len(candidates)]
            if replica.replay_lsn < after:
                try:
                    replayed = await self._wait_for_replay(replica, after)
                except Exception as exc:  # the replica went away while we waited
                    self.health.replica_checked(replica, False, f"unreachable ({exc!r})")
                    continue
                if not replayed:
                    self._not_replayed(after)  # falls back to the primary, or raises
                    return None
            try:
                conn = await stack.enter_async_context(read_transaction(replica.engine, namespace))
            except ServiceUnavailableError as exc:
                self.health.replica_checked(replica, False, f"unreachable ({exc.__cause__!r})")
                continue
            self._served(replica.name)
            return conn
        self._fell_back("unavailable")
        return None

    async def _require_written(self, after: int) -> None:
        """Refuse (BAD_USER_INPUT) a position past the end of the primary's WAL: no replica
        will replay it within the wait, and every read of the request would hold a replica
        connection for all of it. While the primary is down it cannot be asked: the wait
        decides, as for any position."""
        if after <= self._primary_lsn or not self.health.primary_up:
            return
        try:
            async with autocommit_statement(self.primary) as conn:
                end = parse_lsn(await conn.fetchval(WAL_END_SQL))
        except ServiceUnavailableError:
            return
        self._primary_lsn = max(self._primary_lsn, end)
        if after > self._primary_lsn:
            raise ValidationError(
                f"The read position {format_lsn(after)} is past the primary database's "
                f"({format_lsn(self._primary_lsn)}): send back a position a write returned"
            )

    async def _wait_for_replay(self, replica: Replica, after: int) -> bool:
        """Poll the replica's replay position until it reaches ``after`` or time is up."""
        if self.observer:
            self.observer.read_waited(replica.name)
        deadline = time.monotonic() + self.wait_s
        poll = WAIT_FIRST_POLL_S
        pooled = await replica.engine.raw_connection()
        try:
            driver = pooled.driver_connection
            assert driver is not None
            while True:
                replayed = await driver.fetchval(REPLAY_POSITION_SQL)
                if replayed is None:
                    break  # promoted meanwhile; the next check takes it out
                replica.replay_lsn = max(replica.replay_lsn, parse_lsn(replayed))
                left = deadline - time.monotonic()
                if replica.replay_lsn >= after or left <= 0:
                    break
                await asyncio.sleep(min(poll, left))
                poll = min(poll * 2, WAIT_MAX_POLL_S)
        except BaseException:
            pooled.invalidate()
            raise
        pooled.close()
        return replica.replay_lsn >= after

    def _not_replayed(self, after: int) -> None:
        """No replica replayed ``after`` in time: the primary serves the read, or, while it is
        down, no server can and the caller should retry."""
        if self.health.primary_up:
            self._fell_back("lsn_timeout")
            return None
        raise ServiceUnavailableError(
            f"No replica has replayed the requested position {format_lsn(after)} yet and the "
            "primary database is unavailable; try again.",
            retry_after_s=max(1.0, self.health.interval_s),
        )

    @asynccontextmanager
    async def write(
        self, session: ReadSession | None = None, namespace: str | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """A read-write transaction on the primary, scoped to ``namespace`` if given; its
        commit position goes to the session."""
        self._refuse_while_primary_down()
        session = current_session() or session
        note = None if session is None else partial(self._note_transaction, session)
        async with write_transaction(self.primary, note, namespace=namespace) as conn:
            yield conn

    @asynccontextmanager
    async def statement(
        self, session: ReadSession | None = None
    ) -> AsyncIterator[asyncpg.Connection]:
        """One autocommit statement on the primary; its commit position goes to the session."""
        self._refuse_while_primary_down()
        session = current_session() or session
        note = None if session is None else partial(self._note_commit, session)
        async with autocommit_statement(self.primary, note) as conn:
            yield conn

    def _refuse_while_primary_down(self) -> None:
        if not self.health.primary_up:
            raise ServiceUnavailableError(
                "The primary database is unavailable: writes are refused until it is back "
                "(queries are still answered); try again.",
                retry_after_s=max(1.0, self.health.interval_s),
            )

    async def _note_transaction(self, session: ReadSession, conn: AsyncConnection) -> None:
        pooled = await conn.get_raw_connection()
        await self._note_commit(session, pooled.driver_connection)

    async def _note_commit(self, session: ReadSession, conn: asyncpg.Connection) -> None:
        """One round trip after the commit, on the same connection, outside any transaction.
        The write is committed whatever happens here: a failure only loses the position."""
        try:
            position = await conn.fetchval(COMMIT_POSITION_SQL)
        except Exception as exc:
            log.warning("the commit position of a write could not be read: %r", exc)
            return
        committed = parse_lsn(position)
        session.committed(committed)
        self._primary_lsn = max(self._primary_lsn, committed)

    def _served(self, server: str) -> None:
        if self.observer:
            self.observer.read_served(server)

    def _fell_back(self, reason: str) -> None:
        if self.observer:
            self.observer.read_fell_back(reason)
