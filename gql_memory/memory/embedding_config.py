"""The embedding dimension is fixed per database: verify it at startup, re-embed to change it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.embeddings import Asymmetry, EmbeddingProvider, TextRole
from gql_memory.errors import ConfigurationError
from gql_memory.memory.raw import turn_document
from gql_memory.memory.vectors import vector_literal

log = logging.getLogger(__name__)

# table -> (SQL expression of the text that is embedded, is the embedding required)
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
    """Everything that makes two vectors comparable: provider, model, dimension, and how
    queries and documents were marked."""

    provider: str
    model: str
    dim: int
    asymmetry: Asymmetry = Asymmetry()

    @classmethod
    def of(cls, provider: EmbeddingProvider) -> EmbeddingSignature:
        return cls(provider.name, provider.model, provider.dim, provider.asymmetry)

    def describe(self) -> str:
        return (
            f"{self.dim}-dimensional embeddings from {self.provider}/{self.model} "
            f"({self.asymmetry.describe()})"
        )


async def stored_signature(db: Database) -> EmbeddingSignature:
    async with db.read() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT provider, model, dim, query_prefix, document_prefix, "
                    "query_input_type, document_input_type FROM embedding_config"
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
    )


async def stored_config(db: Database) -> tuple[str, str, int]:
    signature = await stored_signature(db)
    return signature.provider, signature.model, signature.dim


async def verify_embedding_config(db: Database, provider: EmbeddingProvider) -> None:
    """Refuse a provider whose vectors would not be comparable with the stored ones."""
    stored = await stored_signature(db)
    wanted = EmbeddingSignature.of(provider)
    if stored.provider == "unset" and stored.dim == provider.dim:
        await _record(db, wanted)
        return
    if stored != wanted:
        raise ConfigurationError(
            f"This database holds {stored.describe()}, but the configured provider gives "
            f"{wanted.describe()}. Vectors of the two are not comparable. Either run "
            "`gql-memory reembed` (with the server stopped) to re-embed every insight, episode "
            "and raw turn with the configured provider, or point DATABASE_URL / --data-dir at "
            "a new database, or configure the original provider again "
            "(GQL_MEMORY_EMBEDDING_PROVIDER, GQL_MEMORY_EMBEDDING_MODEL, "
            "GQL_MEMORY_EMBEDDING_DIM, GQL_MEMORY_EMBEDDING_QUERY_PREFIX, "
            "GQL_MEMORY_EMBEDDING_DOCUMENT_PREFIX, GQL_MEMORY_EMBEDDING_QUERY_INPUT_TYPE, "
            "GQL_MEMORY_EMBEDDING_DOCUMENT_INPUT_TYPE)."
        )


RECORD_SQL = """
UPDATE embedding_config SET provider = :p, model = :m, dim = :d, query_prefix = :qp,
       document_prefix = :dp, query_input_type = :qt, document_input_type = :dt,
       updated_at = now()
"""


def _record_params(signature: EmbeddingSignature) -> dict[str, object]:
    a = signature.asymmetry
    return {
        "p": signature.provider,
        "m": signature.model,
        "d": signature.dim,
        "qp": a.query_prefix,
        "dp": a.document_prefix,
        "qt": a.query_input_type,
        "dt": a.document_input_type,
    }


async def _record(db: Database, signature: EmbeddingSignature) -> None:
    async with db.write() as conn:
        await conn.execute(text(RECORD_SQL), _record_params(signature))


async def reembed(
    db: Database,
    provider: EmbeddingProvider,
    *,
    batch_size: int = 256,
    embed_all_raw: bool = False,
    raw_context: bool = True,
    progress: Progress | None = None,
) -> dict[str, int]:
    """Re-embed every embedded row with ``provider`` and switch the database to its dimension.

    Vectors are written to a side column batch by batch (resumable: a rerun continues), then
    one transaction swaps the columns, rebuilds the HNSW indexes and records the provider.
    Returns the number of rows re-embedded per table.
    """
    counts: dict[str, int] = {}
    for table, (source, required) in EMBEDDED_TABLES.items():
        counts[table] = await _fill_side_column(
            db,
            provider,
            table,
            source,
            required or embed_all_raw,
            raw_context,
            batch_size,
            progress,
        )
    async with db.write() as conn:
        # rebuilding HNSW indexes over large tables outlasts the per-statement timeout
        await conn.execute(text("SET LOCAL statement_timeout = 0"))
        for table, (_, required) in EMBEDDED_TABLES.items():
            index = f"ix_{table}_embedding_hnsw"
            await conn.execute(text(f"DROP INDEX IF EXISTS {index}"))
            await conn.execute(text(f"ALTER TABLE {table} DROP COLUMN embedding"))
            await conn.execute(
                text(f"ALTER TABLE {table} RENAME COLUMN embedding_next TO embedding")
            )
            if required:
                await conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN embedding SET NOT NULL"))
            await conn.execute(
                text(
                    f"CREATE INDEX {index} ON {table} USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = 16, ef_construction = 64)"
                )
            )
        await conn.execute(text(RECORD_SQL), _record_params(EmbeddingSignature.of(provider)))
    return counts


async def _fill_side_column(
    db: Database,
    provider: EmbeddingProvider,
    table: str,
    source: str,
    every_row: bool,
    context: bool,
    batch_size: int,
    progress: Progress | None,
) -> int:
    async with db.write() as conn:
        await conn.execute(
            text(
                f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS "
                f"embedding_next vector({int(provider.dim)})"
            )
        )
    pending = "t.embedding_next IS NULL" + ("" if every_row else " AND t.embedding IS NOT NULL")
    previous = PREVIOUS_TURN_SQL if table == "raw_dialogue" and context else "NULL"
    async with db.read() as conn:
        total = await conn.scalar(text(f"SELECT count(*) FROM {table} t WHERE {pending}")) or 0
    done = 0
    while True:
        async with db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT t.id, {source} AS body, {previous} AS previous "
                        f"FROM {table} t WHERE {pending} ORDER BY t.id LIMIT :n"
                    ),
                    {"n": batch_size},
                )
            ).all()
        if not rows:
            return done
        documents = [turn_document(r.previous, r.body) for r in rows]
        vectors = await provider.embed(documents, role=TextRole.DOCUMENT)
        async with db.write() as conn:
            await conn.execute(
                text(
                    f"UPDATE {table} t SET embedding_next = CAST(u.v AS vector) "
                    "FROM unnest(CAST(:ids AS bigint[]), CAST(:vs AS text[])) AS u(id, v) "
                    "WHERE t.id = u.id"
                ),
                {"ids": [r.id for r in rows], "vs": [vector_literal(v) for v in vectors]},
            )
        done += len(rows)
        if progress:
            progress(table, done, total)
