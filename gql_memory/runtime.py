"""One startup, shared by the server's lifespan, the library and the command line.

    async with runtime.open(settings, Purpose.LIBRARY) as rt:
        memory = Memory(rt.db, settings, namespace, rt.embedder)

The steps, in this order and nowhere else:

1. reach PostgreSQL: DATABASE_URL, or start the embedded server (``database``);
2. as the owner, migrate, check that the embeddings fit the database and that the text-search
   configuration exists (``prepare``);
3. open the pool the work runs on (``Purpose``): the server's requests as the row-level
   security role, the library as the owner, maintenance commands on a small pool without
   statement timeouts; then the read replicas, if configured.

What a step started is stopped on exit, in reverse order, also when a later step fails (a
refused migration does not leave PostgreSQL running).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, allow_role_login, login_url, start_embedded
from gql_memory.db.migrate import ensure_text_search_config, upgrade
from gql_memory.db.positions import ReadSession
from gql_memory.db.replicas import ReadReplicas, ReplicaObserver
from gql_memory.db.supervision import StateFile, Supervisor
from gql_memory.embeddings import EmbeddingProvider, make_provider
from gql_memory.embeddings.breaker import CircuitBreakerEmbedder, breaker_of
from gql_memory.memory.consolidation.schedule import ConsolidationWorker
from gql_memory.memory.embedding_config import verify_embedding_config
from gql_memory.memory.turn_embedding import TurnRecipe
from gql_memory.memory.waiting import BackfillWorker
from gql_memory.tracing import tracing_for

if TYPE_CHECKING:
    from gql_memory.tracing.spans import Tracing

log = logging.getLogger(__name__)


class Purpose(enum.Enum):
    """What the runtime's pool (``Runtime.db``) is for."""

    # the server's requests: as the row-level security role, reads on the replicas
    SERVER = "server"
    # the in-process library: as the owner, reads on the replicas seeing its own writes
    LIBRARY = "library"
    # migrate, re-embed, manage keys: as the owner, a small pool without statement timeouts
    MAINTENANCE = "maintenance"


@dataclass(frozen=True)
class Runtime:
    """What startup built; valid inside ``open``'s block."""

    settings: Settings
    url: str  # the owner's URL: DATABASE_URL or the embedded server's
    db: Database  # the pool of the purpose, with its replicas
    db_url: str  # the URL that pool connects with (the server's: as the role)
    embedder: EmbeddingProvider
    embedded: EmbeddedPostgres | None  # the embedded server, when this runtime started it
    # where the supervisor of that server publishes its state (the server's runtime only)
    embedded_state: StateFile | None = None
    # OpenTelemetry, when the otel extra is installed and OTEL_* asks for traces (tracing/)
    tracing: Tracing | None = None
    # embeds the rows stored while the embedder was down (memory/waiting.py)
    backfill: BackfillWorker | None = None


@contextmanager
def database(settings: Settings) -> Iterator[tuple[str, EmbeddedPostgres | None]]:
    """Step 1: DATABASE_URL if set; otherwise the embedded PostgreSQL, started for the block.

    Synchronous, so that ``gql-memory serve`` can keep the embedded server running while
    uvicorn's workers (other processes) use it."""
    if settings.database_url:
        yield settings.database_url, None
        return
    embedded = start_embedded(settings.data_dir)
    log.info("embedded PostgreSQL running, data in %s", embedded.data_dir)
    try:
        yield embedded.url, embedded
    finally:
        embedded.stop()


@contextmanager
def supervised(embedded: EmbeddedPostgres | None, settings: Settings) -> Iterator[StateFile | None]:
    """Supervise the embedded server started by ``database`` (restarts, disk full; see
    db.supervision) for the block; yield the file its state is published in. Leave this
    block before ``database``'s: the server's own stop is not a death to repair."""
    if embedded is None:
        yield None
        return
    supervisor = Supervisor(embedded, settings)
    supervisor.start()
    try:
        yield supervisor.state_file
    finally:
        supervisor.stop()


async def prepare(
    owner: Database, settings: Settings, embedder: EmbeddingProvider, *, migrate: bool = True
) -> None:
    """Step 2, on the owner's connection: migrate (unless ``migrate=False``), then refuse an
    embedding provider that does not fit the stored vectors and create the text-search
    configuration the settings name if it is missing."""
    if migrate:
        await upgrade(owner, embedder.dim, settings.database_role)
    await verify_embedding_config(owner, embedder, TurnRecipe.from_settings(settings))
    await ensure_text_search_config(owner, settings.text_search_config)


async def requests_url(owner: Database, settings: Settings, url: str, embedded: bool) -> str:
    """The URL the server's requests connect with: GQL_MEMORY_APP_DATABASE_URL, or on the
    embedded server a login as the role itself; otherwise DATABASE_URL (its connections
    SET ROLE at start)."""
    role = settings.database_role
    if embedded and not settings.app_database_url:
        await allow_role_login(owner, role)
        return login_url(url, role)
    await warn_if_text_search_scans(owner)
    return settings.app_database_url or url


async def warn_if_text_search_scans(owner: Database) -> None:
    """Say how to fix full-text search scanning under row-level security (see 0007)."""
    async with owner.read() as conn:
        leakproof = await conn.scalar(
            text("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq'::regproc")
        )
    if not leakproof:
        log.warning(
            "full-text search cannot use its index under row-level security until a "
            "superuser runs: ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"
        )


@asynccontextmanager
async def open(  # noqa: A001 - runtime.open(settings) reads as what it does
    settings: Settings,
    purpose: Purpose,
    *,
    embedder: EmbeddingProvider | None = None,
    migrate: bool = True,
    check_embeddings: bool = True,
    replica_observer: ReplicaObserver | None = None,
) -> AsyncIterator[Runtime]:
    """Reach, migrate and check the database, then connect for ``purpose`` (module doc).

    ``embedder`` defaults to the configured provider; the runtime closes it either way.
    ``check_embeddings=False`` (re-embedding, key management) migrates without refusing a
    provider that does not fit the stored vectors."""
    async with AsyncExitStack() as stack:
        url, embedded, embedded_state = await _reach(settings, stack, purpose)
        embedder = embedder or make_provider(settings)
        stack.push_async_callback(embedder.aclose)
        if purpose is not Purpose.MAINTENANCE and breaker_of(embedder) is None:
            # a provider that is down costs a call no wait once it has failed repeatedly
            embedder = CircuitBreakerEmbedder.for_settings(embedder, settings)
        tracing = tracing_for(settings) if purpose is not Purpose.MAINTENANCE else None
        if tracing is not None:
            # embedding calls and the pool's statements become children of the operation
            from gql_memory.tracing.embedder import TracedEmbedder

            embedder = TracedEmbedder(embedder, tracing)
        owner = Database.for_maintenance(url, settings)
        if purpose is Purpose.MAINTENANCE:
            stack.push_async_callback(owner.dispose)
        app_url = url
        try:
            if check_embeddings:
                await prepare(owner, settings, embedder, migrate=migrate)
            elif migrate:
                await upgrade(owner, embedder.dim, settings.database_role)
            if purpose is Purpose.SERVER:
                app_url = await requests_url(owner, settings, url, embedded is not None)
        finally:
            if purpose is not Purpose.MAINTENANCE:
                await owner.dispose()
        if purpose is Purpose.MAINTENANCE:
            db = owner
        else:
            base = Database.from_url(
                app_url,
                settings,
                role=settings.database_role if purpose is Purpose.SERVER else None,
            )
            db = _with_replicas(base, settings, purpose, replica_observer)
            stack.push_async_callback(db.dispose)  # the pool and its replicas' pools
            if tracing is not None:
                from gql_memory.tracing.database import trace_statements

                trace_statements(db.engine.sync_engine, tracing)
            if db.replicas is not None:
                await db.replicas.start()
        backfill = None
        background = purpose is not Purpose.MAINTENANCE
        if background and (
            settings.embedding_backfill_interval_s > 0 or settings.consolidation_interval_s > 0
        ):
            # the background workers read every namespace, so they work as the owner (the
            # server's pool is the row-level security role's), on the primary: in a server on
            # a small pool of their own
            owner_db = Database(db.engine)
            if purpose is Purpose.SERVER:
                owner_db = Database.from_url(
                    url, settings.with_overrides(db_pool_size=2, db_max_overflow=1)
                )
                stack.push_async_callback(owner_db.dispose)
            if settings.embedding_backfill_interval_s > 0:
                # rows stored while the embedder was down get their vectors once it is back
                backfill = BackfillWorker(owner_db, embedder, settings)
                backfill.start()
                stack.push_async_callback(backfill.stop)
            if settings.consolidation_interval_s > 0:
                # duplicates merged, changed facts superseded (memory.consolidation.schedule)
                consolidation = ConsolidationWorker(owner_db, embedder, settings)
                consolidation.start()
                stack.push_async_callback(consolidation.stop)
        yield Runtime(
            settings,
            url,
            db,
            app_url,
            embedder,
            embedded,
            embedded_state,
            tracing=tracing,
            backfill=backfill,
        )


async def _reach(
    settings: Settings, stack: AsyncExitStack, purpose: Purpose
) -> tuple[str, EmbeddedPostgres | None, StateFile | None]:
    if settings.database_url:
        return settings.database_url, None, None
    embedded = await asyncio.to_thread(start_embedded, settings.data_dir)
    stack.push_async_callback(asyncio.to_thread, embedded.stop)
    if purpose is not Purpose.SERVER:
        return embedded.url, embedded, None
    supervisor = Supervisor(embedded, settings)  # a server started it: it keeps it running
    supervisor.start()
    stack.push_async_callback(asyncio.to_thread, supervisor.stop)  # before the server's stop
    return embedded.url, embedded, supervisor.state_file


def _with_replicas(
    db: Database, settings: Settings, purpose: Purpose, observer: ReplicaObserver | None
) -> Database:
    """Reads on the replicas (as the same role, under the same policies). The library's own
    session makes each read see every earlier write of the store (read-your-writes with
    nothing to pass around); the server's requests carry their position themselves."""
    if not settings.read_database_urls:
        return db
    if purpose is Purpose.SERVER:
        replicas = ReadReplicas.for_settings(
            settings, db.engine, role=settings.database_role, observer=observer
        )
        return db.with_replicas(replicas)
    return db.with_replicas(ReadReplicas.for_settings(settings, db.engine), ReadSession())
