"""Engine and transactions. Every write runs in one transaction; every read is READ ONLY.

The ``Database`` every layer holds, which routes them to the primary or to read replicas,
is in gql_memory.db.database."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import asyncpg
import sqlalchemy.exc
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from gql_memory.config import LIVE_EVENTS_OPTION, NAMESPACE_SETTING, Settings
from gql_memory.db.refusals import operator_advice, shard_moved
from gql_memory.errors import DatabaseMisconfiguredError, GqlMemoryError, ServiceUnavailableError

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_MARGIN_S = 2.0
# When a client should try again after the database was unreachable (a restart, a failover,
# a Citus worker that holds its namespace down): ``extensions.retryAfterMs``.
UNAVAILABLE_RETRY_AFTER_S = 1.0
MISCONFIGURED_MESSAGE = (
    "The database refused this server: a configuration problem its operator must fix "
    "(the server's log names it)."
)
# How connections name themselves in pg_stat_activity: servers and library users (they
# read and write memories) apart from migrations and admin commands.
SERVING_APPLICATION_NAME = "gql-memory"
ADMIN_APPLICATION_NAME = "gql-memory-admin"

# Failures that mean "the database is not there right now", not "your request is wrong".
_UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.QueryCanceledError,
    # no space left for the write: a full disk, to be freed (the supervisor of the embedded
    # server names it on /readyz), never a wrong request
    asyncpg.exceptions.DiskFullError,
    asyncpg.exceptions.InterfaceError,
    sqlalchemy.exc.TimeoutError,
)


def _is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, _UNAVAILABLE) or shard_moved(exc):
        return True
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        cause = getattr(exc.orig, "__cause__", None)
        return isinstance(exc.orig, _UNAVAILABLE) or isinstance(cause, _UNAVAILABLE)
    return isinstance(exc, sqlalchemy.exc.InterfaceError | sqlalchemy.exc.OperationalError)


def _discard_unusable(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Hand out no connection the database has closed (a restart, an administrator's
    pg_terminate_backend): asyncpg notices the closed socket without a round trip, and the
    pool replaces the connection. A connection that dies mid-request fails that request
    with SERVICE_UNAVAILABLE, as any connection loss does. Nor one left inside a
    transaction (a read whose end never came): its next user would run in it, under its
    namespace. asyncpg knows that from the last message of the server, also without a
    round trip."""
    driver = dbapi_connection.driver_connection
    if driver.is_closed():
        raise sqlalchemy.exc.DisconnectionError("connection closed by the database")
    if driver.is_in_transaction():
        raise sqlalchemy.exc.DisconnectionError("connection left inside a transaction")


def pooled_engine(
    url: str,
    settings: Settings | None = None,
    *,
    role: str | None = None,
    application_name: str = SERVING_APPLICATION_NAME,
) -> AsyncEngine:
    """A pool on ``url``; with ``role``, every connection runs as that role from its start
    (PostgreSQL checks privileges and row-level security against it)."""
    settings = settings or Settings()
    server_settings = {
        "application_name": application_name,
        "hnsw.ef_search": str(settings.hnsw_ef_search),
        # With a namespace filter, keep scanning the HNSW index until enough rows match.
        "hnsw.iterative_scan": "relaxed_order",
        # Requests are short and many run at once: parallel workers would only add their
        # start-up to each (a Gather starts them even where its plan branch never runs,
        # as search's exact scan of a large namespace) and take cores from other tenants.
        "max_parallel_workers_per_gather": "0",
    }
    if role is not None:
        server_settings["role"] = role
    command_timeout = None
    if settings.statement_timeout_ms:
        server_settings["statement_timeout"] = str(settings.statement_timeout_ms)
        # A server that stops answering (hung host, network partition) cannot enforce its
        # own statement_timeout: the client gives up a little later, so nothing hangs.
        command_timeout = settings.statement_timeout_ms / 1000 + CLIENT_TIMEOUT_MARGIN_S
    engine = create_async_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_s,
        # not pool_pre_ping: that costs three round trips (BEGIN, ping, ROLLBACK) on
        # every checkout; see _discard_unusable
        connect_args={
            "timeout": settings.db_connect_timeout_s,
            "command_timeout": command_timeout,
            "server_settings": server_settings,
        },
        execution_options={LIVE_EVENTS_OPTION: settings.live_events},
        # A failed statement's parameters are the tenant's text and vectors: they stay
        # out of exception messages, so out of every log and traceback.
        hide_parameters=True,
    )
    event.listen(engine.sync_engine, "checkout", _discard_unusable)
    return engine


@contextmanager
def database_errors() -> Iterator[None]:
    """The database's failures as callers handle them: one that means "not there right now"
    is SERVICE_UNAVAILABLE, and an error of asyncpg itself (the autocommit statements run on
    the driver's connection) is the DBAPIError a statement through SQLAlchemy would raise."""
    try:
        yield
    except GqlMemoryError:
        raise
    except Exception as exc:
        advice = operator_advice(exc)
        if advice is not None:
            cause, remedy = advice
            log.error("the database refused this server: %s; %s", cause, remedy)
            raise DatabaseMisconfiguredError(MISCONFIGURED_MESSAGE) from exc
        if _is_unavailable(exc):
            raise ServiceUnavailableError(
                "The database is unavailable; try again.", retry_after_s=UNAVAILABLE_RETRY_AFTER_S
            ) from exc
        if isinstance(exc, asyncpg.PostgresError):
            raise sqlalchemy.exc.DBAPIError(None, None, exc) from exc
        raise


@asynccontextmanager
async def write_transaction(
    engine: AsyncEngine,
    after_commit: Callable[[AsyncConnection], Awaitable[None]] | None = None,
    *,
    namespace: str | None = None,
) -> AsyncIterator[AsyncConnection]:
    """One read-write transaction on ``engine``, scoped to ``namespace`` if given (see
    ``begin``); ``after_commit`` runs on the same connection once the commit is through
    (read replicas note its WAL position)."""
    async with _transaction(engine, begin(namespace), after_commit) as conn:
        yield conn


@asynccontextmanager
async def autocommit_statement(
    engine: AsyncEngine,
    after_statement: Callable[[asyncpg.Connection], Awaitable[None]] | None = None,
) -> AsyncIterator[asyncpg.Connection]:
    """A pooled asyncpg connection for one autocommit statement (see ``Database.statement``);
    ``after_statement`` runs on it once the caller's statement has committed."""
    with database_errors():
        # the pool's own connection, without SQLAlchemy's Connection around it (a quarter
        # of the cost); it never holds a transaction, so handing it back needs no await,
        # and one the database closed is discarded at its next checkout
        pooled = await engine.raw_connection()
        try:
            yield pooled.driver_connection
            if after_statement is not None:
                await after_statement(pooled.driver_connection)
        finally:
            pooled.close()


def begin(namespace: str | None, *, read_only: bool = False) -> str:
    """The script that opens a transaction: ``BEGIN`` (``READ ONLY`` for reads), and with a
    namespace its ``SET LOCAL`` for the row-level security policies. Sent as one simple
    query, that is one round trip instead of two. A ``SET LOCAL`` statement, not
    ``set_config()``: Citus forwards it to the workers the transaction uses, where the
    policies of the shards are evaluated (docs/scaling.md, step 5). The namespace is an E''
    literal (its meaning does not depend on standard_conforming_strings); a NUL, which no
    literal can hold, is refused."""
    opening = "BEGIN READ ONLY" if read_only else "BEGIN"
    if namespace is None:
        return opening
    return f"{opening}; {namespace_setting(namespace)}"


def namespace_setting(namespace: str) -> str:
    """The ``SET LOCAL`` that names ``namespace`` to the row-level security policies for the
    rest of the transaction (see ``begin``)."""
    if "\x00" in namespace:
        raise ValueError("a namespace cannot contain NUL")
    literal = "E'" + namespace.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"SET LOCAL {NAMESPACE_SETTING} = {literal}"


@asynccontextmanager
async def read_transaction(
    engine: AsyncEngine, namespace: str | None = None
) -> AsyncIterator[AsyncConnection]:
    """One READ ONLY transaction on ``engine`` (the primary or a replica), scoped to
    ``namespace`` if given (see ``begin``)."""
    async with _transaction(engine, begin(namespace, read_only=True)) as conn:
        yield conn


@asynccontextmanager
async def _transaction(
    engine: AsyncEngine,
    opening: str,
    after_commit: Callable[[AsyncConnection], Awaitable[None]] | None = None,
) -> AsyncIterator[AsyncConnection]:
    """A transaction opened by the ``opening`` script, committed when the block ends (then
    ``after_commit`` runs on the same connection), rolled back when it raises.

    SQLAlchemy's Connection runs in autocommit mode here, so that it sends no BEGIN of its
    own: the transaction is ours, opened with the namespace in one round trip. A
    connection that could not be ended cleanly (cancelled, or the database went away) is
    closed, never pooled; and the pool discards any connection found inside a transaction
    at checkout (``_discard_unusable``)."""
    with database_errors():
        async with engine.connect() as raw:
            conn = await raw.execution_options(isolation_level="AUTOCOMMIT")
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            try:
                await driver.execute(opening)
                yield conn
                await driver.execute("COMMIT")
            except BaseException:
                await _abandon(conn, driver)
                raise
            if after_commit is not None:
                await after_commit(conn)


async def _abandon(conn: AsyncConnection, driver: asyncpg.Connection) -> None:
    """End a transaction that failed: ROLLBACK, or if that cannot be done, close the
    connection. The transaction's own error is what the caller sees, never this cleanup's."""
    if driver.is_closed():
        return  # (a cancelled statement can close it): the pool replaces it at checkout
    try:
        await driver.execute("ROLLBACK")
    except Exception:
        await conn.invalidate()
