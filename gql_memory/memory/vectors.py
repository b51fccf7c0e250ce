"""Helpers shared by the vector layers: literals for pgvector, bounds, text-search config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Text, cast, select

from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import metadata
from gql_memory.errors import ValidationError

MAX_TOP_K = 100


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form, bound as a parameter and cast with CAST(:v AS vector)."""
    return "[" + ",".join(map(repr, map(float, vector))) + "]"


def parse_vector(text: str) -> list[float]:
    return [float(v) for v in text.strip("[]").split(",")] if text else []


def require_top_k(value: Any, field: str = "topK", maximum: int = MAX_TOP_K) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer")
    if not 1 <= value <= maximum:
        raise ValidationError(f"{field} must be between 1 and {maximum}")
    return value


def require_similarity(value: Any, field: str = "minSimilarity") -> float:
    """Cosine similarity bound: -1..1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ValidationError(f"{field} must be a number")
    if not -1.0 <= float(value) <= 1.0:
        raise ValidationError(f"{field} must be between -1.0 and 1.0")
    return float(value)


async def load_embeddings(
    db: Database, table: str, namespace: str, ids: Sequence[int]
) -> dict[int, list[float]]:
    """Embeddings of rows by id — read only when a caller asks for them."""
    if not ids:
        return {}
    embedded = metadata.tables[table]
    async with db.read() as conn:
        rows = await conn.execute(
            select(embedded.c.id, cast(embedded.c.embedding, Text)).where(
                embedded.c.namespace == namespace,
                any_of(embedded.c.id, ids),
                embedded.c.embedding.is_not(None),  # waiting for its vector (memory.waiting)
            )
        )
        return {row_id: parse_vector(vector) for row_id, vector in rows}
