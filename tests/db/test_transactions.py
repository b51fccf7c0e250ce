"""Transactions: BEGIN [READ ONLY] and the namespace in one round trip, and never a connection
handed out inside a transaction (gql_memory.db.engine: read_transaction, write_transaction)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy.exc
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.engine import begin, write_transaction
from gql_memory.db.fair import FairShare, NamespacedDatabase
from gql_memory.errors import NotFoundError

CURRENT = text(
    "SELECT current_setting('app.namespace', true) AS namespace, "
    "current_setting('transaction_read_only') AS read_only, pg_backend_pid() AS pid"
)


@pytest_asyncio.fixture
async def pool(settings: Settings) -> AsyncIterator[Database]:
    """A pool of one connection, so that every read gets the connection the last one left."""
    db = Database.from_url(
        settings.database_url or "", settings.with_overrides(db_pool_size=1, db_max_overflow=0)
    )
    try:
        yield db
    finally:
        await db.dispose()


async def pool_run(pool: Database, statement: str) -> None:
    async with pool.write() as conn:
        await conn.execute(text(statement))


@contextmanager
def counted_sends(conn: Any) -> Iterator[list[bytes]]:
    """Every write of the asyncpg connection to its socket: one per round trip (a statement
    whose plan asyncpg has cached is one message batch)."""
    transport = conn._transport
    sent: list[bytes] = []
    original = transport.write

    def write(data: bytes) -> None:
        sent.append(bytes(data))
        original(data)

    transport.write = write
    try:
        yield sent
    finally:
        transport.write = original


async def test_a_scoped_read_is_its_statements_plus_two_round_trips(pool: Database) -> None:
    """BEGIN READ ONLY with the namespace, the statement, COMMIT: three sends, where a
    separate BEGIN and SET LOCAL made four."""
    scoped = NamespacedDatabase(pool, "tenant-a", FairShare(2))
    async with scoped.read() as conn:  # prepares the statement (asyncpg caches its plan)
        await conn.execute(CURRENT)
        driver = (await conn.get_raw_connection()).driver_connection
    with counted_sends(driver) as sent:  # the pool's one connection, whole next read
        async with scoped.read() as conn:
            row = (await conn.execute(CURRENT)).one()
    assert (row.namespace, row.read_only) == ("tenant-a", "on")
    assert len(sent) == 3, sent
    assert b"BEGIN READ ONLY; SET LOCAL app.namespace = E'tenant-a'" in sent[0]
    assert b"COMMIT" in sent[2]


@pytest.mark.parametrize(
    "namespace",
    ["plain", "it's", "back\\slash", "\\'; DROP TABLE insights; --", "'' E'x'", "ünï ☃", "$$a$$"],
)
async def test_the_namespace_is_named_exactly_whatever_it_holds(
    pool: Database, namespace: str
) -> None:
    async with pool.read(namespace) as conn:
        row = (await conn.execute(CURRENT)).one()
    assert (row.namespace, row.read_only) == (namespace, "on")
    async with pool.read() as conn:  # SET LOCAL: gone with the transaction
        assert (await conn.execute(CURRENT)).one().namespace in (None, "")


def test_a_nul_cannot_be_named() -> None:
    with pytest.raises(ValueError, match="NUL"):
        begin("a\x00b")


async def test_reads_cannot_write(pool: Database) -> None:
    with pytest.raises(sqlalchemy.exc.DBAPIError, match="read-only transaction"):
        async with pool.read("tenant-a") as conn:
            await conn.execute(text("CREATE TEMP TABLE nope (x int)"))


async def test_an_error_inside_a_read_rolls_back_and_the_connection_serves_again(
    pool: Database,
) -> None:
    async with pool.read("tenant-a") as conn:
        pid = (await conn.execute(CURRENT)).one().pid
    with pytest.raises(NotFoundError):
        async with pool.read("tenant-a") as conn:
            await conn.execute(CURRENT)
            raise NotFoundError("not there")
    with pytest.raises(sqlalchemy.exc.DBAPIError):
        async with pool.read("tenant-a") as conn:
            await conn.execute(text("SELECT 1 / 0"))
    async with pool.read("tenant-b") as conn:
        row = (await conn.execute(CURRENT)).one()
    # the same connection (a rollback, not a reconnect), outside the failed transactions
    assert (row.pid, row.namespace) == (pid, "tenant-b")


async def test_a_cancelled_read_leaves_no_transaction_behind(pool: Database, db: Database) -> None:
    async def slow() -> None:
        async with pool.read("tenant-a") as conn:
            await conn.execute(text("SELECT pg_sleep(30)"))

    task = asyncio.create_task(slow())
    running = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'"
    )
    async with asyncio.timeout(10):  # cancelled while PostgreSQL runs it
        while True:
            async with db.read() as conn:
                if await conn.scalar(running):
                    break
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with pool.read("tenant-b") as conn:
        row = (await conn.execute(CURRENT)).one()
        in_transaction = await conn.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'")
        )
    assert row.namespace == "tenant-b"
    assert in_transaction == 0


async def test_a_connection_left_inside_a_transaction_is_never_handed_out(
    pool: Database,
) -> None:
    """The safety net under every path that could skip the end of a read: the pool checks
    each connection it hands out, without a round trip."""
    pooled = await pool.engine.raw_connection()
    driver = pooled.driver_connection
    assert driver is not None
    await driver.execute("BEGIN READ ONLY; SELECT set_config('app.namespace', 'tenant-a', true)")
    left_pid = await driver.fetchval("SELECT pg_backend_pid()")
    pooled.close()  # back to the pool, still inside tenant-a's transaction
    async with pool.read("tenant-b") as conn:
        row = (await conn.execute(CURRENT)).one()
    assert row.namespace == "tenant-b" and row.pid != left_pid


async def test_a_scoped_write_is_its_statements_plus_two_round_trips_and_commits(
    pool: Database,
) -> None:
    scoped = NamespacedDatabase(pool, "tenant-a", FairShare(2))
    await pool_run(pool, "CREATE TEMP TABLE written (x int)")  # the pool's one session

    async def work() -> Any:
        async with scoped.write() as conn:
            row = (await conn.execute(CURRENT)).one()
            await conn.execute(text("INSERT INTO written VALUES (1)"))
            return row, (await conn.get_raw_connection()).driver_connection

    _, driver = await work()  # prepares the statements (asyncpg caches their plans)
    with counted_sends(driver) as sent:
        row, _ = await work()
    assert (row.namespace, row.read_only) == ("tenant-a", "off")
    assert len(sent) == 4, sent  # BEGIN with the namespace, two statements, COMMIT
    assert b"BEGIN; SET LOCAL app.namespace = E'tenant-a'" in sent[0]
    async with pool.read() as conn:  # both committed (the same session: its temp table)
        assert await conn.scalar(text("SELECT count(*) FROM written")) == 2


async def test_a_failed_write_leaves_nothing_and_after_commit_runs_only_after_a_commit(
    pool: Database,
) -> None:
    noted: list[int] = []

    async def note(conn: Any) -> None:  # on the same connection, outside the transaction
        noted.append((await conn.execute(CURRENT)).one().pid)

    async with write_transaction(pool.engine, note, namespace="tenant-a") as conn:
        pid = (await conn.execute(CURRENT)).one().pid
        await conn.execute(text("CREATE TEMP TABLE kept (x int)"))
    assert noted == [pid]
    with pytest.raises(sqlalchemy.exc.DBAPIError):
        async with write_transaction(pool.engine, note, namespace="tenant-a") as conn:
            await conn.execute(text("INSERT INTO kept VALUES (1)"))
            await conn.execute(text("INSERT INTO kept VALUES (1 / 0)"))
    assert noted == [pid]
    async with pool.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM kept")) == 0
