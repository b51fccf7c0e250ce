"""L2 insights: distilled, embedded knowledge with semantic search (seed 003 resource 1)."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, select, text, tuple_
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import MAX_QUERY_CHARS, TSV_MAX_CHARS, Settings
from gql_memory.db import Database
from gql_memory.db.tables import insights
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.errors import ValidationError
from gql_memory.memory.autograph import forget_auto_nodes, link_insights
from gql_memory.memory.erasure import delete_row
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.redaction import redact, redact_json
from gql_memory.memory.validation import (
    require_id,
    require_json_object,
    require_page_size,
    require_text,
)
from gql_memory.memory.vectors import load_embeddings, require_top_k, vector_literal

MAX_SOURCE_IDS = 1000
# Ordered by the distance operator itself, so PostgreSQL can walk the HNSW index.
SEARCH_SQL = """
SELECT id, content, source_ids, metadata, created_at,
       1 - (embedding <=> CAST(:q AS vector)) AS score
FROM insights
WHERE namespace = :ns
ORDER BY embedding <=> CAST(:q AS vector)
LIMIT :k
"""
_COLUMNS = (
    insights.c.id,
    insights.c.content,
    insights.c.source_ids,
    insights.c.metadata,
    insights.c.created_at,
)


@dataclass(frozen=True)
class Insight:
    """A distilled insight. Its embedding is loaded separately, only when asked for."""

    id: int
    content: str
    source_ids: list[int]
    metadata: dict[str, Any] | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> Insight:
        m = row._mapping
        return cls(
            id=m["id"],
            content=m["content"],
            source_ids=list(m["source_ids"] or []),
            metadata=m["metadata"],
            created_at=m["created_at"],
        )


@dataclass(frozen=True)
class InsightInput:
    content: str
    source_ids: Sequence[int | str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class InsightHit:
    insight: Insight
    score: float


class Insights:
    """Insights of one namespace."""

    def __init__(
        self, db: Database, settings: Settings, namespace: str, embedder: EmbeddingProvider
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder

    async def add(
        self,
        content: str,
        source_ids: Sequence[int | str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> Insight:
        """Embed and store one insight. Unknown source ids are BAD_USER_INPUT."""
        return (await self.add_many([InsightInput(content, list(source_ids), metadata)]))[0]

    async def add_many(self, items: Sequence[InsightInput]) -> list[Insight]:
        """Embed (in batches) and store many insights in one transaction."""
        if not items:
            return []
        rows = [self._validated(item) for item in items]
        if self.settings.redact_insights:  # the optional redaction gate (SPEC §3.8)
            chars = sum(len(r["content"]) + len(r["metadata_json"] or "") for r in rows)
            rows = await run_cpu(chars, _redacted, rows)
        vectors = await self.embedder.embed([r["content"] for r in rows], role=TextRole.DOCUMENT)
        async with self.db.write() as conn:
            await self._check_sources(conn, {s for r in rows for s in r["source_ids"]})
            result = await conn.execute(
                text(
                    """
                    INSERT INTO insights (namespace, content, embedding, source_ids, metadata,
                                          created_at, content_tsv)
                    SELECT :namespace, u.content, CAST(u.embedding AS vector),
                           CAST(u.source_ids AS bigint[]), CAST(u.metadata AS jsonb),
                           clock_timestamp(),
                           to_tsvector(CAST(:tsconfig AS regconfig), left(u.content, :tsv_max))
                    FROM unnest(CAST(:contents AS text[]), CAST(:embeddings AS text[]),
                                CAST(:source_ids AS text[]), CAST(:metadata AS text[]))
                         WITH ORDINALITY AS u(content, embedding, source_ids, metadata, ord)
                    ORDER BY u.ord
                    RETURNING id, content, source_ids, metadata, created_at
                    """
                ).columns(metadata=JSONB),
                {
                    "namespace": self.namespace,
                    "tsconfig": self.settings.text_search_config,
                    "tsv_max": TSV_MAX_CHARS,
                    "contents": [r["content"] for r in rows],
                    "embeddings": [vector_literal(v) for v in vectors],
                    "source_ids": [
                        "{" + ",".join(str(s) for s in r["source_ids"]) + "}" for r in rows
                    ],
                    "metadata": [r["metadata_json"] for r in rows],
                },
            )
            added = sorted((Insight.from_row(r) for r in result.all()), key=lambda i: i.id)
            if self.settings.auto_graph:
                await link_insights(
                    conn, self.namespace, [(i.id, i.content, i.source_ids) for i in added]
                )
            await publish(
                conn,
                MemoryEvent(
                    EventKind.INSIGHT_ADDED, self.namespace, ids=tuple(i.id for i in added)
                ),
            )
            return added

    def _validated(self, item: InsightInput) -> dict[str, Any]:
        if len(item.source_ids) > MAX_SOURCE_IDS:
            raise ValidationError(f"sourceIds must hold at most {MAX_SOURCE_IDS} ids")
        metadata = require_json_object(item.metadata, "metadata")
        content = require_text(item.content, "content")
        return {
            "content": content,
            "source_ids": sorted({require_id(s, "sourceIds") for s in item.source_ids}),
            "metadata": metadata,
            "metadata_json": None if metadata is None else json.dumps(metadata),
        }

    async def _check_sources(self, conn: AsyncConnection, ids: set[int]) -> None:
        if not ids:
            return
        found = set(
            (
                await conn.execute(
                    # FOR KEY SHARE: a concurrent forgetSession waits for this insight to
                    # commit (and then clears its references), or this waits for the erasure
                    # and finds the turns gone; never a dangling source id
                    text(
                        "SELECT id FROM raw_dialogue WHERE namespace = :ns AND id = ANY(:ids) "
                        "FOR KEY SHARE"
                    ),
                    {"ns": self.namespace, "ids": sorted(ids)},
                )
            ).scalars()
        )
        missing = sorted(ids - found)
        if missing:
            shown = ", ".join(str(m) for m in missing[:10])
            raise ValidationError(f"Unknown sourceIds (no such raw dialogue): {shown}")

    async def get(self, insight_id: Any) -> Insight | None:
        insight_id = require_id(insight_id)
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(*_COLUMNS).where(
                        insights.c.id == insight_id, insights.c.namespace == self.namespace
                    )
                )
            ).first()
        return Insight.from_row(row) if row else None

    async def get_many(self, ids: Sequence[int]) -> dict[int, Insight]:
        """Insights by id (for batched loaders); missing ids are absent."""
        if not ids:
            return {}
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*_COLUMNS).where(
                        insights.c.id.in_(list(ids)), insights.c.namespace == self.namespace
                    )
                )
            ).all()
        return {row.id: Insight.from_row(row) for row in rows}

    async def list(self, *, first: int | None = None, after: str | None = None) -> Page[Insight]:
        """Newest first."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        conditions = [insights.c.namespace == self.namespace]
        if after is not None:
            moment, row_id = decode_cursor(after)
            conditions.append(tuple_(insights.c.created_at, insights.c.id) < tuple_(moment, row_id))
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*_COLUMNS)
                    .where(and_(*conditions))
                    .order_by(insights.c.created_at.desc(), insights.c.id.desc())
                    .limit(limit + 1)
                )
            ).all()
        items = [Insight.from_row(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[encode_cursor(i.created_at, i.id) for i in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )

    async def embeddings(self, ids: Sequence[int]) -> dict[int, list[float]]:
        """Embeddings by id — read only when a caller asks for them."""
        return await load_embeddings(self.db, "insights", self.namespace, ids)

    async def search(self, query: str, top_k: int = 5) -> builtins.list[InsightHit]:
        """Nearest insights by cosine distance (HNSW); score = 1 - cosine distance."""
        query = require_text(query, "query", max_length=MAX_QUERY_CHARS)
        top_k = require_top_k(top_k)
        [vector] = await self.embedder.embed([query], role=TextRole.QUERY)
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(SEARCH_SQL).columns(metadata=JSONB),
                    {"q": vector_literal(vector), "ns": self.namespace, "k": top_k},
                )
            ).all()
        hits = [InsightHit(Insight.from_row(r), float(r.score)) for r in rows]
        # relaxed-order iterative index scans may return near-ties out of order
        return sorted(hits, key=lambda h: -h.score)

    async def delete(self, insight_id: Any) -> bool:
        """Erase one insight; False when there was none."""
        return await delete_row(
            self.db,
            "insights",
            self.namespace,
            insight_id,
            EventKind.INSIGHT_DELETED,
            before=lambda conn, row_id: forget_auto_nodes(
                conn, self.namespace, insight_ids=[row_id]
            ),
        )


def _redacted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with content and metadata through the redaction gate."""
    redacted = []
    for row in rows:
        metadata = redact_json(row["metadata"])[0]
        redacted.append(
            row
            | {
                "content": redact(row["content"]).text,
                "metadata": metadata,
                "metadata_json": None if metadata is None else json.dumps(metadata),
            }
        )
    return redacted
