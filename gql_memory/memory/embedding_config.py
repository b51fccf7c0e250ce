"""The embedding signature is fixed per database: verify it at startup, re-embed to change it.

A signature is what makes two vectors comparable: provider, model, dimension, how queries and
documents are marked, and the recipe of a raw turn's document (memory/turn_embedding.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Update, func, null, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import LISTENER_APPLICATION_NAME
from gql_memory.db import Database
from gql_memory.db.clauses import jsonb
from gql_memory.db.engine import SERVING_APPLICATION_NAME
from gql_memory.db.indexes import hnsw_index_ddl, hnsw_index_name
from gql_memory.db.tables import ALL_NAMESPACES, embedding_config
from gql_memory.embeddings import Asymmetry, EmbeddingProvider, TextRole
from gql_memory.embeddings.windows import token_counter
from gql_memory.errors import ConfigurationError
from gql_memory.memory.turn_embedding import TurnRecipe, turn_document, turn_vectors
from gql_memory.memory.vectors import vector_literal

log = logging.getLogger(__name__)

# table -> (SQL expression of the text that is embedded, is every row embedded)
EMBEDDED_TABLES: dict[str, tuple[str, bool]] = {
    "insights": ("t.content", True),
    "episodes": ("t.query", True),
    "raw_dialogue": ("t.speaker || ': ' || t.content", False),
}
# A raw turn is embedded after the turn before it in its session (see memory.raw).
PREVIOUS_TURN_SQL = """(
    SELECT p.speaker || ': ' || p.content FROM raw_dialogue p
    WHERE p.namespace = t.namespace AND p.session_id = t.session_id
      AND (p."timestamp", p.id) < (t."timestamp", t.id)
    ORDER BY p."timestamp" DESC, p.id DESC LIMIT 1)"""
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class EmbeddingSignature:
    """Everything that makes two vectors comparable: provider, model, dimension, how queries
    and documents were marked, and how a raw turn's document is made."""

    provider: str
    model: str
    dim: int
    asymmetry: Asymmetry = Asymmetry()
    turns: TurnRecipe = TurnRecipe()

    @classmethod
    def of(cls, provider: EmbeddingProvider, turns: TurnRecipe | None = None) -> EmbeddingSignature:
        return cls(
            provider.name, provider.model, provider.dim, provider.asymmetry, turns or TurnRecipe()
        )

    def describe(self) -> str:
        return (
            f"{self.dim}-dimensional embeddings from {self.provider}/{self.model} "
            f"({self.asymmetry.describe()}; {self.turns.describe()})"
        )

    def as_json(self) -> dict[str, object]:
        return (
            {"provider": self.provider, "model": self.model, "dim": self.dim}
            | asdict(self.asymmetry)
            | {"turns": self.turns.as_json()}
        )

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> EmbeddingSignature:
        fields = {k: value[k] for k in ("provider", "model", "dim")}
        marks = {k: v for k, v in value.items() if k not in fields and k != "turns"}
        # a target recorded before the recipe was part of the signature: the recipe of then
        turns = (
            TurnRecipe.from_json(value["turns"])
            if "turns" in value
            else TurnRecipe(short_only=False)
        )
        return cls(
            fields["provider"], fields["model"], int(fields["dim"]), Asymmetry(**marks), turns
        )


async def stored_signature(db: Database) -> EmbeddingSignature:
    c = embedding_config.c
    async with db.read() as conn:
        row = (
            await conn.execute(
                select(
                    c.provider,
                    c.model,
                    c.dim,
                    c.query_prefix,
                    c.document_prefix,
                    c.query_input_type,
                    c.document_input_type,
                    c.raw_turn_recipe,
                )
            )
        ).one()
    return EmbeddingSignature(
        row.provider,
        row.model,
        row.dim,
        Asymmetry(
            row.query_prefix, row.document_prefix, row.query_input_type, row.document_input_type
        ),
        TurnRecipe.from_json(row.raw_turn_recipe),
    )


async def stored_config(db: Database) -> tuple[str, str, int]:
    signature = await stored_signature(db)
    return signature.provider, signature.model, signature.dim


async def verify_embedding_config(
    db: Database, provider: EmbeddingProvider, turns: TurnRecipe | None = None
) -> None:
    """Refuse a provider, or a recipe of raw turns' documents (default: the settings'
    defaults), whose vectors would not be comparable with the stored ones, and any start
    while a re-embed is in progress (its vectors are half written)."""
    pending = await pending_target(db)
    if pending is not None:
        raise ConfigurationError(
            f"A re-embed toward {pending.describe()} is in progress in this database: no "
            "server or library may use it until `gql-memory reembed` has finished (run it "
            "again to resume; `gql-memory reembed --status` shows how far it got)."
        )
    stored = await stored_signature(db)
    wanted = EmbeddingSignature.of(provider, turns)
    if stored.provider == "unset" and stored.dim == provider.dim:
        await _record(db, wanted)
        return
    if stored != wanted:
        raise ConfigurationError(
            f"This database holds {stored.describe()}, but the configured provider gives "
            f"{wanted.describe()}. Vectors of the two are not comparable. Either run "
            "`gql-memory reembed` (with every server stopped) to re-embed every insight, "
            "episode and raw turn with the configured provider and recipe, or point "
            "DATABASE_URL / --data-dir at a new database, or configure the original ones "
            "again (GQL_MEMORY_EMBEDDING_PROVIDER, GQL_MEMORY_EMBEDDING_MODEL, "
            "GQL_MEMORY_EMBEDDING_DIM, GQL_MEMORY_EMBEDDING_QUERY_PREFIX, "
            "GQL_MEMORY_EMBEDDING_DOCUMENT_PREFIX, GQL_MEMORY_EMBEDDING_QUERY_INPUT_TYPE, "
            "GQL_MEMORY_EMBEDDING_DOCUMENT_INPUT_TYPE; for raw turns "
            "GQL_MEMORY_EMBED_RAW_CONTEXT, GQL_MEMORY_EMBED_RAW_CONTEXT_TOKENS, "
            "GQL_MEMORY_EMBED_RAW_CONTEXT_SHORT_ONLY, GQL_MEMORY_EMBED_RAW_ALONE)."
        )


async def pending_target(db: Database) -> EmbeddingSignature | None:
    """The target of a re-embed in progress (started, not yet swapped in), or None."""
    async with db.read() as conn:
        value = await conn.scalar(select(embedding_config.c.reembed_target))
    return None if value is None else EmbeddingSignature.from_json(value)


def recording(signature: EmbeddingSignature) -> Update:
    """The statement that records ``signature`` as the database's."""
    a = signature.asymmetry
    return update(embedding_config).values(
        provider=signature.provider,
        model=signature.model,
        dim=signature.dim,
        query_prefix=a.query_prefix,
        document_prefix=a.document_prefix,
        query_input_type=a.query_input_type,
        document_input_type=a.document_input_type,
        raw_turn_recipe=jsonb(signature.turns.as_json()),
        updated_at=func.now(),
    )


async def _record(db: Database, signature: EmbeddingSignature) -> None:
    async with db.write() as conn:
        await conn.execute(recording(signature))


async def reembed(
    db: Database,
    provider: EmbeddingProvider,
    *,
    batch_size: int = 256,
    embed_all_raw: bool = False,
    turns: TurnRecipe | None = None,
    restart: bool = False,
    exclusive: bool = False,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Re-embed every embedded row with ``provider``, raw turns by the recipe ``turns``
    (default: the settings' defaults), and switch the database to them.

    The run records its target (provider, model, dimension, query/document marking, the raw
    turns' recipe) before
    it writes a vector; servers refuse to start until it is done. Vectors go to a side
    column batch by batch: a re-run toward the same target continues, toward another one it
    is refused (``restart`` discards the pending vectors and starts toward the new target),
    so two vector spaces are never mixed. One transaction then holds the tables against
    writes, catches up rows written meanwhile, swaps the columns, rebuilds the HNSW indexes
    and records the provider. Returns the number of rows re-embedded per table. Nothing may
    write with the old provider meanwhile: with ``exclusive`` (the CLI) the run is refused
    while a server or library user is connected, checked before and after the target is
    recorded (a server that started in between is seen; later ones refuse to start).
    """
    target = EmbeddingSignature.of(provider, turns)
    if exclusive:
        await refuse_while_in_use(db)
    await _begin(db, target, restart)
    if exclusive:
        await refuse_while_in_use(db)
    # a raw turn's document: the end of the previous turn within this many tokens, then it,
    # and perhaps the turn alone too, the two vectors pooled (memory/turn_embedding.py)
    recipe = target.turns
    counts: dict[str, int] = {}
    for table, (source, required) in EMBEDDED_TABLES.items():
        pending = _pending(required or embed_all_raw)
        counts[table] = await _fill_side_column(
            db, provider, table, source, pending, recipe, batch_size, progress
        )
    async with db.write() as conn:
        # rebuilding HNSW indexes over large tables outlasts the per-statement timeout
        await conn.execute(text("SET LOCAL statement_timeout = 0"))
        # reads go on; writes wait until the swap is done (and then use the new column)
        await conn.execute(
            text(f"LOCK TABLE {', '.join(EMBEDDED_TABLES)} IN SHARE ROW EXCLUSIVE MODE")
        )
        for table, (source, required) in EMBEDDED_TABLES.items():
            pending = _pending(required or embed_all_raw)
            previous = _previous(table, recipe)
            for namespace in await _pending_namespaces(conn, table, pending):
                while caught_up := await _embed_batch(
                    conn,
                    provider,
                    table,
                    namespace,
                    source,
                    pending,
                    previous,
                    recipe,
                    batch_size,
                ):
                    counts[table] += caught_up
        for table in EMBEDDED_TABLES:
            await conn.execute(text(f"DROP INDEX IF EXISTS {hnsw_index_name(table)}"))
            await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN embedding"))
            await conn.execute(
                text(f"ALTER TABLE {table} RENAME COLUMN embedding_next TO embedding")
            )
            # a row that waited for its vector (memory.waiting) has one now
            await conn.execute(
                text(
                    f"UPDATE {table} SET embedding_waiting = false {ALL_NAMESPACES} "
                    "WHERE embedding_waiting AND embedding IS NOT NULL"
                )
            )
            await conn.execute(text(hnsw_index_ddl(table)))
        await conn.execute(recording(target))
        await conn.execute(update(embedding_config).values(reembed_target=null()))
    return counts


async def _begin(db: Database, target: EmbeddingSignature, restart: bool) -> None:
    """Record the run's target and make its side columns (at its dimension), or continue the
    run toward the same target; another pending target is refused unless ``restart``."""
    async with db.write() as conn:
        recorded = await conn.scalar(select(embedding_config.c.reembed_target).with_for_update())
        pending = None if recorded is None else EmbeddingSignature.from_json(recorded)
        if pending == target:
            return  # resume: the side columns hold this target's vectors only
        if pending is not None and not restart:
            raise ConfigurationError(
                f"An interrupted re-embed toward {pending.describe()} is pending, but the "
                f"configured provider gives {target.describe()}; continuing would mix the two. "
                "Run `gql-memory reembed --restart` to discard its vectors and re-embed "
                "everything with the configured provider, or configure its provider again "
                "and run `gql-memory reembed` to finish it."
            )
        for table in EMBEDDED_TABLES:
            await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN IF EXISTS embedding_next"))
            await conn.execute(
                text(f"ALTER TABLE {table} ADD COLUMN embedding_next vector({int(target.dim)})")
            )
        await conn.execute(update(embedding_config).values(reembed_target=jsonb(target.as_json())))


def _previous(table: str, recipe: TurnRecipe) -> str:
    """The SQL of a row's context: the previous turn of a raw turn's session, or NULL."""
    return PREVIOUS_TURN_SQL if table == "raw_dialogue" and recipe.context_tokens > 0 else "NULL"


def _pending(every_row: bool) -> str:
    """The rows still to re-embed: every row, or (raw turns) those with a vector or waiting
    for one (memory.waiting); not those stored without on purpose (too long, embedding off)."""
    if every_row:
        return "t.embedding_next IS NULL"
    return "t.embedding_next IS NULL AND (t.embedding IS NOT NULL OR t.embedding_waiting)"


async def _fill_side_column(
    db: Database,
    provider: EmbeddingProvider,
    table: str,
    source: str,
    pending: str,
    recipe: TurnRecipe,
    batch_size: int,
    progress: Progress | None,
) -> int:
    previous = _previous(table, recipe)
    async with db.read() as conn:
        total = (
            await conn.scalar(
                text(f"SELECT count(*) {ALL_NAMESPACES} FROM {table} t WHERE {pending}")
            )
            or 0
        )
        namespaces = await _pending_namespaces(conn, table, pending)
    done = 0
    for namespace in namespaces:
        while True:
            async with db.write() as conn:
                embedded = await _embed_batch(
                    conn,
                    provider,
                    table,
                    namespace,
                    source,
                    pending,
                    previous,
                    recipe,
                    batch_size,
                )
            if not embedded:
                break
            done += embedded
            if progress:
                progress(table, done, total)
    return done


async def _pending_namespaces(conn: AsyncConnection, table: str, pending: str) -> list[str]:
    """The namespaces with rows left to embed: each is then embedded within its namespace,
    batch by batch, as a distributed database routes it (to that namespace's shard)."""
    found = await conn.execute(
        text(f"SELECT DISTINCT namespace {ALL_NAMESPACES} FROM {table} t WHERE {pending}")
    )
    return list(found.scalars())


async def _embed_batch(
    conn: AsyncConnection,
    provider: EmbeddingProvider,
    table: str,
    namespace: str,
    source: str,
    pending: str,
    previous: str,
    recipe: TurnRecipe,
    batch_size: int,
) -> int:
    """Embed one batch of a namespace's pending rows into the side column; how many (0: none
    left)."""
    rows = (
        await conn.execute(
            text(
                f"SELECT t.id, {source} AS body, {previous} AS previous FROM {table} t "
                f"WHERE t.namespace = :ns AND {pending} ORDER BY t.id LIMIT :n"
            ),
            {"ns": namespace, "n": batch_size},
        )
    ).all()
    if not rows:
        return 0
    tokens = token_counter(provider)
    documents = [turn_document(r.previous, r.body, tokens, recipe) for r in rows]
    # A row stored before GQL_MEMORY_EMBEDDING_MAX_CHARS refused such texts must not stop the
    # run (it would stay pending forever): it is embedded by its beginning, and said so.
    bound = getattr(provider, "max_chars", None)
    long = [r.id for r, d in zip(rows, documents, strict=True) if bound and len(d) > bound]
    if long:
        log.warning(
            "%s: %d rows longer than %d characters embedded by their beginning "
            "(GQL_MEMORY_EMBEDDING_MAX_CHARS): ids %s",
            table,
            len(long),
            bound,
            long[:20],
        )
        documents = [d[:bound] for d in documents]
    if recipe.pooled_alone and table == "raw_dialogue":  # in context and alone, as raw.py does
        bodies = [r.body[:bound] if bound else r.body for r in rows]
        vectors = await turn_vectors(provider, documents, bodies)
    else:
        vectors = await provider.embed(documents, role=TextRole.DOCUMENT)
    await conn.execute(
        text(
            f"UPDATE {table} t SET embedding_next = CAST(u.v AS vector) "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:vs AS text[])) AS u(id, v) "
            "WHERE t.namespace = :ns AND t.id = u.id"
        ),
        {"ns": namespace, "ids": [r.id for r in rows], "vs": [vector_literal(v) for v in vectors]},
    )
    return len(rows)


@dataclass(frozen=True)
class ReembedStatus:
    """What `gql-memory reembed --status` shows."""

    target: EmbeddingSignature | None  # None: no re-embed in progress
    current: EmbeddingSignature
    tables: dict[str, tuple[int, int]]  # table -> (vectors written, rows left)

    def lines(self) -> list[str]:
        if self.target is None:
            return [f"no re-embed in progress; the database holds {self.current.describe()}"]
        lines = [
            f"re-embed in progress toward {self.target.describe()}",
            f"(the database still serves {self.current.describe()})",
        ]
        for table, (done, left) in self.tables.items():
            lines.append(f"{table}: {done} re-embedded, {left} left")
        lines.append("run `gql-memory reembed` again to finish it")
        return lines


async def reembed_status(db: Database, embed_all_raw: bool = False) -> ReembedStatus:
    target = await pending_target(db)
    tables: dict[str, tuple[int, int]] = {}
    if target is not None:
        async with db.read() as conn:
            for table, (_, required) in EMBEDDED_TABLES.items():
                pending = _pending(required or embed_all_raw)
                row = (
                    await conn.execute(
                        text(
                            "SELECT count(*) FILTER (WHERE t.embedding_next IS NOT NULL), "
                            f"count(*) FILTER (WHERE {pending}) {ALL_NAMESPACES} FROM {table} t"
                        )
                    )
                ).one()
                tables[table] = (int(row[0]), int(row[1]))
    return ReembedStatus(target, await stored_signature(db), tables)


async def refuse_while_in_use(db: Database) -> None:
    """Refuse to re-embed while a server or library user is connected: it would write
    vectors of the old model, or search with them, while the new ones are written."""
    async with db.read() as conn:
        users = (
            await conn.execute(
                text(
                    "SELECT pid, client_addr, application_name FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND application_name IN (:serving, :listener)"
                ),
                {"serving": SERVING_APPLICATION_NAME, "listener": LISTENER_APPLICATION_NAME},
            )
        ).all()
    if users:
        pids = ", ".join(str(u.pid) for u in users[:10])
        raise ConfigurationError(
            f"{len(users)} connection(s) of a gql-memory server or library are open on this "
            f"database (backend pids {pids}): stop every server and library user first — "
            "they would keep writing and searching with the old embeddings — then run "
            "`gql-memory reembed` again."
        )
