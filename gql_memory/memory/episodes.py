"""Episode memory: what was tried, how it went (reward) and the lesson (seed 003 resource 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import DateTime, Row, Text, bindparam, cast, func, select, text
from sqlalchemy.dialects.postgresql import REGCONFIG, insert

from gql_memory.config import MAX_QUERY_CHARS, TSV_MAX_CHARS, Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import episodes
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.errors import ValidationError
from gql_memory.memory.erasure import delete_row
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.search.nearest import nearest_ctes
from gql_memory.memory.validation import require_id, require_query, require_text
from gql_memory.memory.validity import (
    close_facts,
    require_as_of,
    require_instant,
    require_supersedes,
    supersedes_column,
    valid_sql,
)
from gql_memory.memory.vectors import (
    load_embeddings,
    require_similarity,
    require_top_k,
    vector_literal,
)
from gql_memory.memory.waiting import vectors_or_wait

DEFAULT_MIN_SIMILARITY = 0.70
DEFAULT_TOP_K = 3
_STORED = (
    episodes.c.id,
    episodes.c.query,
    episodes.c.reward,
    episodes.c.reflection,
    episodes.c.created_at,
    episodes.c.valid_from,
    episodes.c.valid_to,
    episodes.c.superseded_by,
)


def _columns(namespace: str) -> tuple[Any, ...]:
    return (*_STORED, supersedes_column(episodes, namespace))


def similar_sql(as_of: datetime | None) -> str:
    """Nearest valid episodes (memory/search/nearest.py: exact in a small namespace, the HNSW index
    in a large one, never short because of other tenants), nearest first."""
    nearest = nearest_ctes(
        "nearest", "episodes", valid_sql("t", as_of is not None), vector=":q", limit=":k"
    )
    return f"""
WITH {nearest}
SELECT e.id, e.query, e.reward, e.reflection, e.created_at, e.valid_from, e.valid_to,
       e.superseded_by,
       (SELECT array_agg(p.id ORDER BY p.id) FROM episodes p
        WHERE p.namespace = :ns AND p.superseded_by = e.id) AS supersedes,
       1 - n.distance AS similarity
FROM nearest n JOIN episodes e ON e.namespace = :ns AND e.id = n.id
ORDER BY n.distance, n.id
"""


@dataclass(frozen=True)
class Episode:
    """A stored episode; the embedding of its query is loaded only when asked for."""

    id: int
    query: str
    reward: float
    reflection: str
    created_at: datetime
    valid_from: datetime | None = None  # when the lesson began to hold
    valid_to: datetime | None = None  # when a later episode superseded it; None while valid
    superseded_by: int | None = None
    supersedes: tuple[int, ...] = ()

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> Episode:
        m = row._mapping
        return cls(
            id=m["id"],
            query=m["query"],
            reward=m["reward"],
            reflection=m["reflection"],
            created_at=m["created_at"],
            valid_from=m["valid_from"],
            valid_to=m["valid_to"],
            superseded_by=m["superseded_by"],
            supersedes=tuple(m.get("supersedes") or ()),
        )


@dataclass(frozen=True)
class EpisodeHit:
    episode: Episode
    similarity: float


def require_reward(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValidationError("reward must be a number")
    if not -1.0 <= float(value) <= 1.0:
        raise ValidationError("reward must be between -1.0 and 1.0")
    return float(value)


class Episodes:
    """Episodes of one namespace."""

    def __init__(
        self, db: Database, settings: Settings, namespace: str, embedder: EmbeddingProvider
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder

    async def store(
        self,
        query: str,
        reward: float,
        reflection: str,
        *,
        supersedes: Sequence[int | str] = (),
        valid_from: datetime | None = None,
    ) -> Episode:
        """Embed the query and store the episode; the episodes it ``supersedes`` (an older
        lesson this one replaces) are closed at its valid_from and linked to it, atomically."""
        query = require_text(query, "query", max_length=MAX_QUERY_CHARS)
        reward = require_reward(reward)
        reflection = require_text(reflection, "reflection")
        replaced = require_supersedes(supersedes)
        if valid_from is not None:
            valid_from = require_instant(valid_from, "validFrom")
        # the lesson is kept without its vector while the embedder is down (memory.waiting)
        vectors = await vectors_or_wait(self.embedder, [query], "episodes")
        vector = None if vectors is None else vector_literal(vectors[0])
        said = bindparam("query", query, type_=Text)
        lesson = bindparam("reflection", reflection, type_=Text)
        stored = insert(episodes).values(
            namespace=self.namespace,
            query=said,
            reward=reward,
            reflection=lesson,
            embedding=cast(bindparam("embedding", vector, type_=Text), Vector),
            created_at=func.clock_timestamp(),
            valid_from=func.coalesce(
                bindparam("valid_from", valid_from, type_=DateTime(timezone=True)),
                func.clock_timestamp(),
            ),
            content_tsv=func.to_tsvector(
                cast(
                    bindparam("tsconfig", self.settings.text_search_config, type_=Text), REGCONFIG
                ),
                func.left(said + " " + lesson, TSV_MAX_CHARS),
            ),
        )
        if vector is None:  # stored waiting for its vector (memory.waiting)
            stored = stored.values(embedding_waiting=True)
        async with self.db.write() as conn:
            # a new episode has superseded nothing yet: its supersedes is filled below
            row = (await conn.execute(stored.returning(*_STORED))).one()
            episode = Episode.from_row(row)
            if replaced:
                await close_facts(
                    conn, "episodes", self.namespace, replaced, episode.valid_from, episode.id
                )
                episode = replace(episode, supersedes=tuple(replaced))
            await publish(
                conn, MemoryEvent(EventKind.EPISODE_STORED, self.namespace, ids=(episode.id,))
            )
        return episode

    async def get(self, episode_id: Any) -> Episode | None:
        episode_id = require_id(episode_id)
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(*_columns(self.namespace)).where(
                        episodes.c.namespace == self.namespace, episodes.c.id == episode_id
                    )
                )
            ).first()
        return Episode.from_row(row) if row else None

    async def get_many(self, ids: Sequence[int]) -> dict[int, Episode]:
        """Episodes by id (for batched loaders); missing ids are absent."""
        if not ids:
            return {}
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*_columns(self.namespace)).where(
                        episodes.c.namespace == self.namespace, any_of(episodes.c.id, ids)
                    )
                )
            ).all()
        return {row.id: Episode.from_row(row) for row in rows}

    async def embeddings(self, ids: Sequence[int]) -> dict[int, list[float]]:
        """Embeddings by id — read only when a caller asks for them."""
        return await load_embeddings(self.db, "episodes", self.namespace, ids)

    async def similar(
        self,
        query: str,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        top_k: int = DEFAULT_TOP_K,
        *,
        as_of: datetime | None = None,
    ) -> list[EpisodeHit]:
        """The top_k nearest episodes valid now (HNSW) whose similarity is at least
        min_similarity."""
        query = require_query(query, self.settings.search_max_query_words)
        min_similarity = require_similarity(min_similarity)
        top_k = require_top_k(top_k)
        as_of = require_as_of(as_of)
        [vector] = await self.embedder.embed([query], role=TextRole.QUERY)
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(similar_sql(as_of)),
                    {
                        "q": vector_literal(vector),
                        "ns": self.namespace,
                        "k": top_k,
                        "as_of": as_of,
                        "exact_rows": self.settings.vector_exact_max_rows,
                    },
                )
            ).all()
        hits = [EpisodeHit(Episode.from_row(r), float(r.similarity)) for r in rows]
        return sorted(
            (h for h in hits if h.similarity >= min_similarity), key=lambda h: -h.similarity
        )

    async def delete(self, episode_id: Any) -> bool:
        """Erase one episode; False when there was none."""
        return await delete_row(
            self.db, "episodes", self.namespace, episode_id, EventKind.EPISODE_DELETED
        )
