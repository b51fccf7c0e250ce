"""L2 insights: distilled, embedded knowledge with semantic search (seed 003 resource 1)."""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import TSV_MAX_CHARS, Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import insights, raw_dialogue
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.errors import ValidationError
from gql_memory.memory.erasure import delete_row
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.extraction.redaction import redact, redact_json
from gql_memory.memory.graph.autograph import forget_auto_nodes, link_insights
from gql_memory.memory.offload import run_cpu
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.search.nearest import nearest_ctes
from gql_memory.memory.validation import (
    require_id,
    require_json_object,
    require_page_size,
    require_query,
    require_text,
)
from gql_memory.memory.validity import (
    close_facts,
    require_as_of,
    require_instant,
    require_supersedes,
    supersedes_column,
    valid_sql,
)
from gql_memory.memory.vectors import load_embeddings, require_top_k, vector_literal
from gql_memory.memory.waiting import vectors_or_wait

MAX_SOURCE_IDS = 1000
# The facts an insight superseded, newest link first (the reverse of superseded_by).
SUPERSEDES_SQL = (
    "(SELECT array_agg(p.id ORDER BY p.id) FROM insights p "
    "WHERE p.namespace = :ns AND p.superseded_by = i.id)"
)


def search_sql(as_of: datetime | None) -> str:
    """Nearest valid insights (memory/search/nearest.py: exact in a small namespace, the HNSW index
    in a large one, never short because of other tenants), nearest first."""
    nearest = nearest_ctes(
        "nearest", "insights", valid_sql("t", as_of is not None), vector=":q", limit=":k"
    )
    return f"""
WITH {nearest}
SELECT i.id, i.content, i.source_ids, i.metadata, i.created_at, i.valid_from, i.valid_to,
       i.superseded_by, i.supersession_reason, i.digest_of, {SUPERSEDES_SQL} AS supersedes,
       1 - n.distance AS score
FROM nearest n JOIN insights i ON i.namespace = :ns AND i.id = n.id
ORDER BY n.distance, n.id
"""


_STORED = (
    insights.c.id,
    insights.c.content,
    insights.c.source_ids,
    insights.c.metadata,
    insights.c.created_at,
    insights.c.valid_from,
    insights.c.valid_to,
    insights.c.superseded_by,
    insights.c.supersession_reason,
    insights.c.digest_of,
)


def _columns(namespace: str) -> tuple[Any, ...]:
    return (*_STORED, supersedes_column(insights, namespace))


@dataclass(frozen=True)
class Insight:
    """A distilled insight. Its embedding is loaded separately, only when asked for."""

    id: int
    content: str
    source_ids: list[int]
    metadata: dict[str, Any] | None
    created_at: datetime
    valid_from: datetime | None = None  # when the fact began to hold
    valid_to: datetime | None = None  # when it stopped (superseded); None while it holds
    superseded_by: int | None = None
    supersedes: tuple[int, ...] = ()
    # why it was closed: caller, or consolidation's merged / updated (None while it holds)
    supersession_reason: str | None = None
    digest_of: str | None = None  # the session this insight is the digest of (consolidation)

    @property
    def is_valid(self) -> bool:
        return self.valid_to is None

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> Insight:
        m = row._mapping
        return cls(
            id=m["id"],
            content=m["content"],
            source_ids=list(m["source_ids"] or []),
            metadata=m["metadata"],
            created_at=m["created_at"],
            valid_from=m["valid_from"],
            valid_to=m["valid_to"],
            superseded_by=m["superseded_by"],
            supersedes=tuple(m.get("supersedes") or ()),
            supersession_reason=m.get("supersession_reason"),
            digest_of=m.get("digest_of"),
        )


@dataclass(frozen=True)
class InsightInput:
    content: str
    source_ids: Sequence[int | str] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    supersedes: Sequence[int | str] = ()  # insights this one replaces: they are closed
    valid_from: datetime | None = None  # default: when stored; never in the future


@dataclass(frozen=True)
class PossibleContradiction:
    """A valid insight very similar to another: perhaps the same fact, changed."""

    insight: Insight
    similarity: float


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
        *,
        supersedes: Sequence[int | str] = (),
        valid_from: datetime | None = None,
    ) -> Insight:
        """Embed and store one insight. Unknown source ids are BAD_USER_INPUT. The insights
        it ``supersedes`` are closed at its valid_from and linked to it, atomically."""
        item = InsightInput(content, list(source_ids), metadata, list(supersedes), valid_from)
        return (await self.add_many([item]))[0]

    async def add_many(self, items: Sequence[InsightInput]) -> list[Insight]:
        """Embed (in batches) and store many insights in one transaction."""
        if not items:
            return []
        rows = [self.validated(item) for item in items]
        if self.settings.redact_insights:  # the optional redaction gate (SPEC §3.8)
            chars = sum(len(r["content"]) + len(r["metadata_json"] or "") for r in rows)
            rows = await run_cpu(chars, _redacted, rows)
        # the insight is kept without its vector while the embedder is down (memory.waiting)
        vectors = await vectors_or_wait(self.embedder, [r["content"] for r in rows], "insights")
        async with self.db.write() as conn:
            return await self.store(conn, rows, vectors)

    async def store(
        self,
        conn: AsyncConnection,
        rows: Sequence[dict[str, Any]],
        vectors: Sequence[Sequence[float]] | None,
        digest_of: str | None = None,
    ) -> builtins.list[Insight]:
        """Store validated rows (``validated``) with their vectors (None: waiting) in the
        caller's transaction: supersessions, the automatic graph and the event with them.
        ``digest_of``: the rows are the digest of that session (consolidation)."""
        await self._check_sources(conn, {s for r in rows for s in r["source_ids"]})
        result = await conn.execute(
            text(
                """
                INSERT INTO insights (namespace, content, embedding, source_ids, metadata,
                                      created_at, valid_from, content_tsv)
                SELECT :namespace, u.content, CAST(u.embedding AS vector),
                       CAST(u.source_ids AS bigint[]), CAST(u.metadata AS jsonb),
                       clock_timestamp(), coalesce(u.valid_from, clock_timestamp()),
                       to_tsvector(CAST(:tsconfig AS regconfig), left(u.content, :tsv_max))
                FROM unnest(CAST(:contents AS text[]), CAST(:embeddings AS text[]),
                            CAST(:source_ids AS text[]), CAST(:metadata AS text[]),
                            CAST(:valid_from AS timestamptz[]))
                     WITH ORDINALITY
                     AS u(content, embedding, source_ids, metadata, valid_from, ord)
                ORDER BY u.ord
                RETURNING id, content, source_ids, metadata, created_at, valid_from,
                          valid_to, superseded_by
                """
            ).columns(metadata=JSONB),
            {
                "namespace": self.namespace,
                "tsconfig": self.settings.text_search_config,
                "tsv_max": TSV_MAX_CHARS,
                "contents": [r["content"] for r in rows],
                "embeddings": [None] * len(rows)
                if vectors is None
                else [vector_literal(v) for v in vectors],
                "source_ids": ["{" + ",".join(str(s) for s in r["source_ids"]) + "}" for r in rows],
                "metadata": [r["metadata_json"] for r in rows],
                "valid_from": [r["valid_from"] for r in rows],
            },
        )
        added = sorted((Insight.from_row(r) for r in result.all()), key=lambda i: i.id)
        if digest_of is not None:  # the digest mark of consolidation (migration 0017)
            await conn.execute(
                update(insights)
                .where(insights.c.namespace == self.namespace)
                .where(any_of(insights.c.id, [i.id for i in added]))
                .values(digest_of=digest_of)
            )
            added = [replace(i, digest_of=digest_of) for i in added]
        if vectors is None:  # stored waiting for their vectors (memory.waiting)
            await conn.execute(
                update(insights)
                .where(insights.c.namespace == self.namespace)
                .where(any_of(insights.c.id, [i.id for i in added]))
                .values(embedding_waiting=True)
            )
        added = [
            await self._supersede(conn, insight, row["supersedes"])
            for insight, row in zip(added, rows, strict=True)
        ]
        if self.settings.auto_graph:
            await link_insights(
                conn, self.namespace, [(i.id, i.content, i.source_ids) for i in added]
            )
        await publish(
            conn,
            MemoryEvent(EventKind.INSIGHT_ADDED, self.namespace, ids=tuple(i.id for i in added)),
        )
        return added

    def validated(self, item: InsightInput) -> dict[str, Any]:
        """An input checked and normalised into a row for ``store``."""
        if len(item.source_ids) > MAX_SOURCE_IDS:
            raise ValidationError(f"sourceIds must hold at most {MAX_SOURCE_IDS} ids")
        metadata = require_json_object(item.metadata, "metadata")
        content = require_text(item.content, "content")
        return {
            "content": content,
            "source_ids": sorted({require_id(s, "sourceIds") for s in item.source_ids}),
            "metadata": metadata,
            "metadata_json": None if metadata is None else json.dumps(metadata),
            "supersedes": require_supersedes(item.supersedes),
            "valid_from": None
            if item.valid_from is None
            else require_instant(item.valid_from, "validFrom"),
        }

    async def _supersede(
        self, conn: AsyncConnection, insight: Insight, ids: builtins.list[int]
    ) -> Insight:
        if not ids:
            return insight
        await close_facts(conn, "insights", self.namespace, ids, insight.valid_from, insight.id)
        return replace(insight, supersedes=tuple(ids))

    async def invalidate(self, insight_id: Any, at: datetime | None = None) -> Insight:
        """Close an insight that no longer holds, with no successor (``at``: default now)."""
        insight_id = require_id(insight_id)
        moment = None if at is None else require_instant(at, "at")
        async with self.db.write() as conn:
            await close_facts(conn, "insights", self.namespace, [insight_id], moment)
            row = (
                await conn.execute(
                    select(*_columns(self.namespace)).where(
                        insights.c.id == insight_id, insights.c.namespace == self.namespace
                    )
                )
            ).one()
            await publish(
                conn,
                MemoryEvent(EventKind.INSIGHT_INVALIDATED, self.namespace, ids=(insight_id,)),
            )
        return Insight.from_row(row)

    async def _check_sources(self, conn: AsyncConnection, ids: set[int]) -> None:
        if not ids:
            return
        found = set(
            (
                await conn.execute(
                    # FOR KEY SHARE: a concurrent forgetSession waits for this insight to
                    # commit (and then clears its references), or this waits for the erasure
                    # and finds the turns gone; never a dangling source id
                    select(raw_dialogue.c.id)
                    .where(
                        raw_dialogue.c.namespace == self.namespace,
                        any_of(raw_dialogue.c.id, sorted(ids)),
                    )
                    .with_for_update(read=True, key_share=True)
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
                    select(*_columns(self.namespace)).where(
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
                    select(*_columns(self.namespace)).where(
                        insights.c.namespace == self.namespace, any_of(insights.c.id, ids)
                    )
                )
            ).all()
        return {row.id: Insight.from_row(row) for row in rows}

    async def list(
        self,
        *,
        first: int | None = None,
        after: str | None = None,
        include_superseded: bool = False,
    ) -> Page[Insight]:
        """Newest first; the insights valid now, or with ``include_superseded`` all of them
        (the history)."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        conditions = [insights.c.namespace == self.namespace]
        if not include_superseded:
            conditions.append(insights.c.valid_to.is_(None))
        if after is not None:
            moment, row_id = decode_cursor(after)
            conditions.append(tuple_(insights.c.created_at, insights.c.id) < tuple_(moment, row_id))
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*_columns(self.namespace))
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

    async def embeddings(self, ids: Sequence[int]) -> dict[int, builtins.list[float]]:
        """Embeddings by id — read only when a caller asks for them."""
        return await load_embeddings(self.db, "insights", self.namespace, ids)

    async def search(
        self, query: str, top_k: int = 5, *, as_of: datetime | None = None
    ) -> builtins.list[InsightHit]:
        """Nearest insights by cosine distance (HNSW); score = 1 - cosine distance. Only the
        insights valid now, or at ``as_of``."""
        query = require_query(query, self.settings.search_max_query_words)
        top_k = require_top_k(top_k)
        as_of = require_as_of(as_of)
        [vector] = await self.embedder.embed([query], role=TextRole.QUERY)
        return await self._nearest(vector_literal(vector), top_k, as_of)

    async def _nearest(
        self, vector: str, top_k: int, as_of: datetime | None, exclude: int | None = None
    ) -> builtins.list[InsightHit]:
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(search_sql(as_of)).columns(metadata=JSONB),
                    {
                        "q": vector,
                        "ns": self.namespace,
                        "k": top_k + 1,
                        "as_of": as_of,
                        "exact_rows": self.settings.vector_exact_max_rows,
                    },
                )
            ).all()
        hits = [InsightHit(Insight.from_row(r), float(r.score)) for r in rows if r.id != exclude]
        return hits[:top_k]

    async def possible_contradictions(
        self, insight_id: Any, limit: int = 5
    ) -> builtins.list[PossibleContradiction]:
        """Valid insights at least GQL_MEMORY_CONTRADICTION_SIMILARITY similar to this one
        (cosine): perhaps the same fact, changed. A hint for the agent, which decides whether
        to supersede (consolidation may, on request or on a schedule). The same text stored
        again is a duplicate, not a contradiction: it is not listed."""
        insight_id = require_id(insight_id)
        vector = (await self.embeddings([insight_id])).get(insight_id)
        if vector is None:
            return []
        this = await self.get(insight_id)
        hits = await self._nearest(vector_literal(vector), limit + 1, None, exclude=insight_id)
        threshold = self.settings.contradiction_similarity
        same = _plain(this.content) if this is not None else None
        # the same text stored twice contradicts nothing: it is a duplicate (consolidation
        # merges it)
        return [
            PossibleContradiction(h.insight, h.score)
            for h in hits
            if h.score >= threshold and _plain(h.insight.content) != same
        ][:limit]

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


def _plain(content: str) -> str:
    """A text without case, spacing and end punctuation: two restatements compare equal."""
    return " ".join(content.casefold().split()).rstrip(".!")


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
