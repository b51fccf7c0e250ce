"""Rows that wait for their vector: stored while the embedder was down, embedded once it is back.

No write loses its row to the embedding provider. When it fails or hangs (within
GQL_MEMORY_EMBEDDING_BUDGET_S, or at once while its circuit breaker is open), a raw turn, an
insight or an episode is stored without its vector and marked ``embedding_waiting``
(migration 0016); search finds it by its text meanwhile. ``BackfillWorker`` embeds the waiting
rows in the background once the provider answers again: every server and library process runs
one, and a PostgreSQL advisory lock lets one of them work per database at a time.
``gql-memory reembed --missing`` runs the same ``embed_waiting`` on demand, also while servers
are up. Each row is embedded as it would have been when stored (a raw turn after the end of
the turn before it, memory/turn_embedding.py), with the database's own provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.tables import ALL_NAMESPACES
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.embeddings.breaker import embedder_health
from gql_memory.embeddings.provider import EmbeddingRejectedError
from gql_memory.embeddings.windows import token_counter
from gql_memory.errors import ServiceUnavailableError
from gql_memory.memory.embedding_config import EMBEDDED_TABLES, PREVIOUS_TURN_SQL
from gql_memory.memory.turn_embedding import TurnRecipe, turn_document, turn_vectors
from gql_memory.memory.vectors import vector_literal

log = logging.getLogger(__name__)

# table -> the SQL of the text embedded for a row, as a re-embed embeds it
WAITING_TABLES: dict[str, str] = {table: body for table, (body, _) in EMBEDDED_TABLES.items()}
BATCH = 64
# one process per database embeds waiting rows: whoever holds this advisory lock
ADVISORY_LOCK_KEY = 0x67716C_77616974  # "gql" "wait"
Progress = Callable[[str, int], None]
# Without a row stored waiting by this process, a worker looks for other processes' (or an
# earlier run's) waiting rows this seldom: the look reads every namespace (on a distributed
# database, every shard), so it is not repeated every interval for nothing.
FULL_LOOK_EVERY_S = 300.0
_stored_waiting = 0  # rows this process stored waiting (memory.raw, insights, episodes)


def note_waiting(count: int) -> None:
    """Tell this process's worker that rows were stored waiting: it looks at its next pass."""
    global _stored_waiting
    _stored_waiting += count


async def vectors_or_wait(
    embedder: EmbeddingProvider, texts: list[str], table: str
) -> list[Vector] | None:
    """The documents' vectors, or None when the provider cannot give them now: the caller
    stores its rows waiting (the worker embeds them later)."""
    try:
        return await embedder.embed(texts, role=TextRole.DOCUMENT)
    except ServiceUnavailableError as exc:
        log.warning("storing %d %s waiting for their embeddings: %s", len(texts), table, exc)
        note_waiting(len(texts))
        return None


async def waiting_counts(db: Database, namespace: str | None = None) -> dict[str, int]:
    """Rows waiting for their vector, per table: of ``namespace``, or of every namespace."""
    counts = {}
    async with db.read(namespace) as conn:
        for table in WAITING_TABLES:
            if namespace is None:
                sql = f"SELECT count(*) {ALL_NAMESPACES} FROM {table} WHERE embedding_waiting"
            else:
                sql = f"SELECT count(*) FROM {table} WHERE namespace = :ns AND embedding_waiting"
            counts[table] = int(await conn.scalar(text(sql), {"ns": namespace}) or 0)
    return counts


async def embed_waiting(
    db: Database,
    provider: EmbeddingProvider,
    recipe: TurnRecipe,
    *,
    batch_size: int = BATCH,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Embed every waiting row (``db`` as the owner: it reads every namespace), batch by
    batch, each in its own transaction; returns how many per table. A row deleted or
    embedded by someone else meanwhile is left alone. ServiceUnavailableError when the
    provider fails again: what was embedded stays embedded."""
    done = dict.fromkeys(WAITING_TABLES, 0)
    for table in WAITING_TABLES:
        async with db.read() as conn:
            found = await conn.execute(
                text(
                    f"SELECT DISTINCT namespace {ALL_NAMESPACES} FROM {table} "
                    "WHERE embedding_waiting"
                )
            )
            namespaces = list(found.scalars())
        for namespace in namespaces:
            while embedded := await _embed_batch(
                db, provider, recipe, table, namespace, batch_size
            ):
                done[table] += embedded
                if progress is not None:
                    progress(table, done[table])
    return done


async def _embed_batch(
    db: Database,
    provider: EmbeddingProvider,
    recipe: TurnRecipe,
    table: str,
    namespace: str,
    batch_size: int,
) -> int:
    """One batch of a namespace's waiting rows; how many were embedded (0: none left)."""
    contextual = table == "raw_dialogue" and recipe.context_tokens > 0
    previous = PREVIOUS_TURN_SQL if contextual else "NULL"
    async with db.read(namespace) as conn:
        rows = (
            await conn.execute(
                text(
                    f"SELECT t.id, {WAITING_TABLES[table]} AS body, {previous} AS previous "
                    f"FROM {table} t WHERE t.namespace = :ns AND t.embedding_waiting "
                    "ORDER BY t.id LIMIT :n"
                ),
                {"ns": namespace, "n": batch_size},
            )
        ).all()
    if not rows:
        return 0
    vectors: list[Vector | None]
    try:
        vectors = list(await _vectors(provider, recipe, table, rows))
    except EmbeddingRejectedError:
        # the provider is up but refuses some of these texts: one by one, so that the
        # others get their vectors and a refused row stops waiting (it keeps no vector, as
        # a text too long to embed: the text leg finds it) instead of blocking the rest
        vectors = [await _vector_or_refused(provider, recipe, table, row) for row in rows]
        refused = [r.id for r, v in zip(rows, vectors, strict=True) if v is None]
        log.warning(
            "%s: the embedding provider refused %d waiting rows; they stay without a "
            "vector: ids %s",
            table,
            len(refused),
            refused[:20],
        )
    async with db.write(namespace) as conn:
        await conn.execute(
            text(
                f"UPDATE {table} t SET embedding = CAST(u.v AS vector), embedding_waiting = false "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:vs AS text[])) AS u(id, v) "
                "WHERE t.namespace = :ns AND t.id = u.id AND t.embedding_waiting"
            ),
            {
                "ns": namespace,
                "ids": [r.id for r in rows],
                "vs": [None if v is None else vector_literal(v) for v in vectors],
            },
        )
    return len(rows)


async def _vector_or_refused(
    provider: EmbeddingProvider, recipe: TurnRecipe, table: str, row: object
) -> Vector | None:
    try:
        [vector] = await _vectors(provider, recipe, table, [row])
    except EmbeddingRejectedError:
        return None
    return vector


async def _vectors(
    provider: EmbeddingProvider, recipe: TurnRecipe, table: str, rows: Sequence[object]
) -> list[Vector]:
    bodies: list[str] = [r.body for r in rows]  # type: ignore[attr-defined]
    if table != "raw_dialogue":
        return await provider.embed(bodies, role=TextRole.DOCUMENT)
    tokens = token_counter(provider)
    documents = [
        turn_document(r.previous, r.body, tokens, recipe)  # type: ignore[attr-defined]
        for r in rows
    ]
    return await turn_vectors(provider, documents, bodies if recipe.pooled_alone else documents)


@dataclass
class BackfillState:
    """What the worker last saw: for the metrics and the logs."""

    waiting: dict[str, int] | None = None
    embedded: int = 0


class BackfillWorker:
    """Embeds the waiting rows every GQL_MEMORY_EMBEDDING_BACKFILL_INTERVAL_S, while the
    embedder answers (its circuit breaker is not open), in the process that holds the
    database's advisory lock for the pass. ``db`` reads every namespace (the owner)."""

    def __init__(
        self,
        db: Database,
        provider: EmbeddingProvider,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.clock = clock
        self.seen_stored = -1  # _stored_waiting at the last look (-1: never looked)
        self.looked_at = 0.0
        self.provider = provider
        self.recipe = TurnRecipe.from_settings(settings)
        self.interval_s = settings.embedding_backfill_interval_s
        self.state = BackfillState()
        # told each pass's embedded and waiting counts per table (the server's metrics)
        self.observer: Callable[[dict[str, int], dict[str, int]], None] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval_s > 0:
            self._task = asyncio.create_task(self._run(), name="gql-memory embedding backfill")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def due(self) -> bool:
        """Whether to look for waiting rows now: this process stored some since its last
        look (or rows it looked at are still waiting), it never looked, or it has not
        looked for FULL_LOOK_EVERY_S."""
        return (
            self.seen_stored != _stored_waiting
            or bool(self.state.waiting and any(self.state.waiting.values()))
            or self.clock() - self.looked_at >= FULL_LOOK_EVERY_S
        )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if not self.due():
                continue
            try:
                await self.run_once()
            except ServiceUnavailableError as exc:
                log.info("embedding waiting rows: the embedder failed again (%s)", exc)
            except Exception as exc:  # the worker must outlive a bad pass; say what it was
                log.warning("embedding waiting rows failed: %s", type(exc).__name__)

    async def run_once(self) -> dict[str, int] | None:
        """One pass, if this process gets the lock and the embedder is not known to be
        down; what it embedded per table (None: not this process's turn)."""
        if embedder_health(self.provider).state == "down":
            health = embedder_health(self.provider)
            if health.retry_in_s:  # the breaker would refuse every call until then
                return None
        done: dict[str, int] | None = None
        self.seen_stored, self.looked_at = _stored_waiting, self.clock()
        async with self.db.engine.connect() as lock:
            got = await lock.scalar(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY}
            )
            await lock.commit()
            if got:
                try:
                    done = await embed_waiting(self.db, self.provider, self.recipe)
                finally:
                    await lock.execute(
                        text("SELECT pg_advisory_unlock(:key)"), {"key": ADVISORY_LOCK_KEY}
                    )
                    await lock.commit()
        self.state.waiting = await waiting_counts(self.db)
        if self.observer is not None:
            self.observer(done or {}, self.state.waiting)
        if done is None:
            return None
        if any(done.values()):
            self.state.embedded += sum(done.values())
            log.info(
                "embedded %d rows that waited for their vectors",
                sum(done.values()),
                extra={"event": "embedding_backfill", "tables": done},
            )
        return done
