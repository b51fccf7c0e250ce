"""The embedding dimension is fixed per database: verify it at startup, re-embed to change it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider
from gql_memory.errors import ConfigurationError
from gql_memory.memory.vectors import vector_literal

log = logging.getLogger(__name__)

# table -> (text column that is embedded, is the embedding required)
EMBEDDED_TABLES: dict[str, tuple[str, bool]] = {
    "insights": ("content", True),
    "episodes": ("query", True),
    "raw_dialogue": ("content", False),
}
Progress = Callable[[str, int, int], None]


async def stored_config(db: Database) -> tuple[str, str, int]:
    async with db.read() as conn:
        row = (await conn.execute(text("SELECT provider, model, dim FROM embedding_config"))).one()
    return row.provider, row.model, row.dim


async def verify_embedding_config(db: Database, provider: EmbeddingProvider) -> None:
    """Refuse a provider whose vectors would not be comparable with the stored ones."""
    stored_provider, stored_model, stored_dim = await stored_config(db)
    if stored_provider == "unset" and stored_dim == provider.dim:
        await _record(db, provider)
        return
    if (stored_provider, stored_model, stored_dim) != (provider.name, provider.model, provider.dim):
        raise ConfigurationError(
            f"This database holds {stored_dim}-dimensional embeddings from "
            f"{stored_provider}/{stored_model}, but the configured provider is "
            f"{provider.name}/{provider.model} with dimension {provider.dim}. Either run "
            "`gql-memory reembed` (with the server stopped) to re-embed every insight, episode "
            "and raw turn with the configured provider, or point DATABASE_URL / --data-dir at "
            "a new database, or configure the original provider again "
            "(GQL_MEMORY_EMBEDDING_PROVIDER, GQL_MEMORY_EMBEDDING_MODEL, "
            "GQL_MEMORY_EMBEDDING_DIM)."
        )


async def _record(db: Database, provider: EmbeddingProvider) -> None:
    async with db.write() as conn:
        await conn.execute(
            text(
                "UPDATE embedding_config SET provider = :p, model = :m, dim = :d, "
                "updated_at = now()"
            ),
            {"p": provider.name, "m": provider.model, "d": provider.dim},
        )


async def reembed(
    db: Database,
    provider: EmbeddingProvider,
    *,
    batch_size: int = 256,
    embed_all_raw: bool = False,
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
            db, provider, table, source, required or embed_all_raw, batch_size, progress
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
        await conn.execute(
            text(
                "UPDATE embedding_config SET provider = :p, model = :m, dim = :d, "
                "updated_at = now()"
            ),
            {"p": provider.name, "m": provider.model, "d": provider.dim},
        )
    return counts


async def _fill_side_column(
    db: Database,
    provider: EmbeddingProvider,
    table: str,
    source: str,
    every_row: bool,
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
    pending = "embedding_next IS NULL" + ("" if every_row else " AND embedding IS NOT NULL")
    async with db.read() as conn:
        total = await conn.scalar(text(f"SELECT count(*) FROM {table} WHERE {pending}")) or 0
    done = 0
    while True:
        async with db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT id, {source} AS body FROM {table} WHERE {pending} "
                        "ORDER BY id LIMIT :n"
                    ),
                    {"n": batch_size},
                )
            ).all()
        if not rows:
            return done
        vectors = await provider.embed([r.body for r in rows])
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
