"""Graph-aware hybrid search (seed 002 ADR-002): vector + full-text legs fused by Reciprocal
Rank Fusion, then bounded boosts from the session's working memory and its graph neighbours.

Three SQL round trips whatever topK is: (1) every leg of every layer in one statement,
(2) the boosts of all candidates, (3) the content of the final hits.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import text

from gql_memory.config import MAX_QUERY_CHARS, Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.errors import ValidationError
from gql_memory.memory.decay import ATTENTION_SQL, decay_params
from gql_memory.memory.validation import require_session_id, require_text
from gql_memory.memory.vectors import require_top_k, vector_literal

MIN_CANDIDATES = 40


class MemoryLayer(enum.Enum):
    """A searchable memory layer."""

    INSIGHT = "INSIGHT"
    EPISODE = "EPISODE"
    RAW = "RAW"


@dataclass(frozen=True)
class SearchWeights:
    """RRF weight of each leg; a zero weight switches the leg off."""

    vector: float = 0.7
    text: float = 0.3


@dataclass(frozen=True)
class SearchHit:
    """A ranked hit with every number that explains its rank."""

    layer: MemoryLayer
    id: int
    content: str = ""
    session_id: str | None = None
    vector_rank: int | None = None
    text_rank: int | None = None
    vector_score: float | None = None
    text_score: float | None = None
    rrf_score: float = 0.0
    session_boost: float = 0.0
    causal_boost: float = 0.0
    boost: float = 0.0
    final_score: float = 0.0


@dataclass(frozen=True)
class _Layer:
    table: str
    content: str  # SQL expression of the text shown for a hit
    session: str  # SQL expression of the session id (or NULL)
    node_column: str  # nodes.<column> that ties a node to a row of this layer
    extra_where: str = ""


LAYERS: dict[MemoryLayer, _Layer] = {
    MemoryLayer.INSIGHT: _Layer("insights", "content", "CAST(NULL AS text)", "insight_id"),
    MemoryLayer.EPISODE: _Layer(
        "episodes", "query || ' — ' || reflection", "CAST(NULL AS text)", "episode_id"
    ),
    MemoryLayer.RAW: _Layer(
        "raw_dialogue",
        "speaker || ': ' || content",
        "session_id",
        "raw_id",
        " AND embedding IS NOT NULL",
    ),
}

# The query's lexemes, normalised by the configured text-search configuration.
QUERY_CTE = """
query_lexemes AS (
    SELECT DISTINCT l AS lexeme
    FROM unnest(tsvector_to_array(to_tsvector(CAST(:tsconfig AS regconfig), :query))) l
)"""
# A lexeme as tsquery text: quoted, so it is taken as it is (no second normalisation).
_QUOTED = r"'''' || replace(replace(ql.lexeme, '\', '\\'), '''', '''''') || ''''"


def _lexeme_ctes(layer: MemoryLayer) -> str:
    """Per layer: each query lexeme as a tsquery, and two OR queries (any lexeme; any
    *selective* lexeme).

    A lexeme is common when PostgreSQL's own statistics of the tsvector column
    (pg_stats.most_common_elems, kept fresh by autovacuum's ANALYZE) put it in more than
    ``max_df`` of the rows; every other lexeme is selective. Statistics only bound the work —
    which rows get ranked when a question full of common words matches much of a namespace —
    they never change a row's score.
    """
    table = LAYERS[layer].table
    name = layer.value.lower()
    return f"""
lex_{name} AS (
    SELECT CAST({_QUOTED} AS tsquery) AS q,
           {_QUOTED} AS quoted,
           coalesce(st.freqs[array_position(st.elems, ql.lexeme)], 0) < :max_df AS selective
    FROM query_lexemes ql
    LEFT JOIN LATERAL (
        SELECT CAST(CAST(most_common_elems AS text) AS text[]) AS elems,
               most_common_elem_freqs AS freqs
        FROM pg_stats
        WHERE schemaname = current_schema() AND tablename = '{table}'
          AND attname = 'content_tsv'
    ) st ON true
),
match_{name} AS (
    SELECT CAST(string_agg(quoted, ' | ') AS tsquery) AS any_lexeme,
           CAST(string_agg(quoted, ' | ') FILTER (WHERE selective) AS tsquery) AS selective
    FROM lex_{name}
)"""


def _vector_leg(layer: MemoryLayer) -> str:
    spec = LAYERS[layer]
    return f"""
    (SELECT '{layer.value}' AS layer, 'vector' AS leg, id,
            1 - (embedding <=> CAST(:vector AS vector)) AS score
     FROM {spec.table}
     WHERE namespace = :ns{spec.extra_where}
     ORDER BY embedding <=> CAST(:vector AS vector)
     LIMIT :n)"""


def _text_leg(layer: MemoryLayer) -> str:
    """Rows containing any query lexeme (OR semantics), ranked by coverage — how many distinct
    query lexemes a row contains — then cover density (ts_rank_cd, normalised to 0..1).

    Ranking must score every candidate, so the candidates are bounded: up to
    :max_matches rows containing a selective lexeme, plus up to :common_matches rows
    containing any lexeme (those matching only common words rank low anyway). Coverage is
    cheap; ts_rank_cd is not, so it only orders the best :rerank rows by coverage.
    """
    spec = LAYERS[layer]
    name = layer.value.lower()
    return f"""
    (SELECT '{layer.value}' AS layer, 'text' AS leg, top.id,
            top.coverage + ts_rank_cd(top.content_tsv, mt.any_lexeme, 32) AS score
     FROM (SELECT m.id, m.content_tsv,
                  (SELECT count(*) FROM lex_{name} lx WHERE m.content_tsv @@ lx.q) AS coverage
           FROM ((SELECT t.id FROM {spec.table} t, match_{name} mt
                  WHERE t.namespace = :ns AND t.content_tsv @@ mt.selective
                  LIMIT :max_matches)
                 UNION
                 (SELECT t.id FROM {spec.table} t, match_{name} mt
                  WHERE t.namespace = :ns AND t.content_tsv @@ mt.any_lexeme
                  LIMIT :common_matches)) candidates
           JOIN {spec.table} m ON m.id = candidates.id
           ORDER BY coverage DESC, m.id DESC
           LIMIT :rerank) top, match_{name} mt
     ORDER BY score DESC, top.id DESC
     LIMIT :n)"""


def _boost_sql(layers: Iterable[MemoryLayer]) -> str:
    # one equality join per layer, so each can use its index on nodes.<layer>_id
    hit_nodes = "\n        UNION ALL ".join(
        f"SELECT c.layer, c.id, n.id AS node_id FROM cand c JOIN nodes n "
        f"ON n.{LAYERS[layer].node_column} = c.id "
        f"WHERE c.layer = '{layer.value}' AND n.namespace = :ns"
        for layer in layers
    )
    seed_links = "\n        UNION ".join(
        f"SELECT n.id FROM nodes n JOIN wm ON wm.ref_kind = '{layer.value}' "
        f"AND n.{spec.node_column} = wm.ref_id WHERE n.namespace = :ns"
        for layer, spec in LAYERS.items()
    )
    return f"""
    WITH wm AS (
        SELECT w.ref_kind, w.ref_id, {ATTENTION_SQL} AS attention
        FROM working_memory w
        LEFT JOIN session_state s ON s.namespace = w.namespace AND s.session_id = w.session_id
        WHERE w.namespace = :ns AND w.session_id = :sid AND w.ref_kind IS NOT NULL
    ),
    seeds AS (
        SELECT n.id FROM nodes n JOIN wm ON wm.ref_kind = 'NODE' AND n.id = wm.ref_id
        WHERE n.namespace = :ns
        UNION {seed_links}
    ),
    -- nodes one and two hops from a seed, remembering the seed (origin) they came from,
    -- so that a seed is not "two hops from itself" through a neighbour and back
    hop1 AS (
        SELECT e.target_id AS id, seeds.id AS origin FROM edges e
        JOIN seeds ON e.source_id = seeds.id WHERE e.namespace = :ns
        UNION SELECT e.source_id, seeds.id FROM edges e
        JOIN seeds ON e.target_id = seeds.id WHERE e.namespace = :ns
    ),
    hop2 AS (
        SELECT e.target_id AS id, hop1.origin FROM edges e
        JOIN hop1 ON e.source_id = hop1.id WHERE e.namespace = :ns
        UNION SELECT e.source_id, hop1.origin FROM edges e
        JOIN hop1 ON e.target_id = hop1.id WHERE e.namespace = :ns
    ),
    distance AS (
        SELECT id, min(d) AS d FROM (
            SELECT id, 1 AS d FROM hop1
            UNION ALL SELECT id, 2 FROM hop2 WHERE id <> origin
        ) x GROUP BY id
    ),
    cand AS (
        SELECT * FROM unnest(CAST(:layers AS text[]), CAST(:ids AS bigint[])) AS c(layer, id)
    ),
    hit_nodes AS (
        {hit_nodes}
    )
    SELECT c.layer, c.id,
           greatest(
               (SELECT max(wm.attention) FROM wm
                WHERE wm.ref_kind = c.layer AND wm.ref_id = c.id),
               (SELECT max(wm.attention) FROM wm JOIN hit_nodes h
                  ON wm.ref_kind = 'NODE' AND wm.ref_id = h.node_id
                WHERE h.layer = c.layer AND h.id = c.id)
           ) AS attention,
           (SELECT min(d.d) FROM hit_nodes h JOIN distance d ON d.id = h.node_id
            WHERE h.layer = c.layer AND h.id = c.id) AS hops
    FROM cand c
    """


def rrf(ranks: dict[str, int], weights: SearchWeights, k: int) -> float:
    """Reciprocal Rank Fusion: sum over legs of weight / (k + rank)."""
    return sum(getattr(weights, leg) / (k + rank) for leg, rank in ranks.items())


def bounded_boost(session_boost: float, causal_boost: float, cap: float) -> float:
    """ADR-002: the combined boost never exceeds the cap."""
    return min(session_boost + causal_boost, cap)


def require_weights(weights: SearchWeights | None, settings: Settings) -> SearchWeights:
    if weights is None:
        return SearchWeights(settings.search_vector_weight, settings.search_text_weight)
    for name in ("vector", "text"):
        value = getattr(weights, name)
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValidationError(f"weights.{name} must be a finite number >= 0")
    if weights.vector == 0 and weights.text == 0:
        raise ValidationError("weights must not both be 0")
    return weights


def require_layers(layers: Sequence[MemoryLayer | str]) -> list[MemoryLayer]:
    if not layers:
        raise ValidationError("layers must name at least one layer")
    try:
        chosen = [x if isinstance(x, MemoryLayer) else MemoryLayer(str(x)) for x in layers]
    except ValueError as exc:
        raise ValidationError("layers must be INSIGHT, EPISODE or RAW") from exc
    return list(dict.fromkeys(chosen))


@dataclass
class _Candidate:
    layer: MemoryLayer
    id: int
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


class HybridSearch:
    """Hybrid search over the layers of one namespace."""

    def __init__(
        self, db: Database, settings: Settings, namespace: str, embedder: EmbeddingProvider
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.embedder = embedder

    async def search(
        self,
        query: str,
        top_k: int = 10,
        session_id: str | None = "default",
        layers: Sequence[MemoryLayer | str] = (MemoryLayer.INSIGHT,),
        weights: SearchWeights | None = None,
    ) -> list[SearchHit]:
        """The top_k hits across ``layers``, best first, each with its explanation."""
        query = require_text(query, "query", max_length=MAX_QUERY_CHARS)
        top_k = require_top_k(top_k)
        if session_id is not None:
            session_id = require_session_id(session_id)
        chosen = require_layers(layers)
        weights = require_weights(weights, self.settings)
        vector = None
        if weights.vector > 0:
            [embedding] = await self.embedder.embed([query], role=TextRole.QUERY)
            vector = vector_literal(embedding)
        async with self.db.read() as conn:
            candidates = await self._legs(conn, query, vector, chosen, weights, top_k)
            hits = self._fuse(candidates, weights)
            if session_id is not None and hits:
                hits = await self._boost(conn, hits, session_id, chosen)
            hits.sort(key=lambda h: (-h.final_score, h.layer.value, h.id))
            return await self._with_content(conn, hits[:top_k])

    async def _legs(
        self,
        conn: Any,
        query: str,
        vector: str | None,
        layers: list[MemoryLayer],
        weights: SearchWeights,
        top_k: int,
    ) -> list[_Candidate]:
        legs, ctes = [], [QUERY_CTE]
        for layer in layers:
            if vector is not None:
                legs.append(_vector_leg(layer))
            if weights.text > 0:
                legs.append(_text_leg(layer))
                ctes.append(_lexeme_ctes(layer))
        sql = "WITH " + ",".join(ctes) + "\n" + "\nUNION ALL".join(legs)
        rows = (
            await conn.execute(
                text(sql),
                {
                    "ns": self.namespace,
                    "query": query,
                    "tsconfig": self.settings.text_search_config,
                    "vector": vector,
                    "n": max(top_k * 4, MIN_CANDIDATES),
                    "rerank": 4 * max(top_k * 4, MIN_CANDIDATES),
                    "max_matches": self.settings.text_search_max_matches,
                    "max_df": self.settings.text_search_max_df,
                    "common_matches": self.settings.text_search_common_matches,
                },
            )
        ).all()
        candidates: dict[tuple[str, int], _Candidate] = {}
        position: dict[tuple[str, str], int] = {}
        for row in rows:  # rows of each leg arrive in rank order
            key = (row.layer, row.id)
            rank = position[(row.layer, row.leg)] = position.get((row.layer, row.leg), 0) + 1
            candidate = candidates.setdefault(key, _Candidate(MemoryLayer(row.layer), row.id))
            candidate.ranks[row.leg] = rank
            candidate.scores[row.leg] = float(row.score)
        return list(candidates.values())

    def _fuse(self, candidates: list[_Candidate], weights: SearchWeights) -> list[SearchHit]:
        hits = []
        for c in candidates:
            score = rrf(c.ranks, weights, self.settings.rrf_k)
            hits.append(
                SearchHit(
                    layer=c.layer,
                    id=c.id,
                    vector_rank=c.ranks.get("vector"),
                    text_rank=c.ranks.get("text"),
                    vector_score=c.scores.get("vector"),
                    text_score=c.scores.get("text"),
                    rrf_score=score,
                    final_score=score,
                )
            )
        return hits

    async def _boost(
        self, conn: Any, hits: list[SearchHit], session_id: str, layers: list[MemoryLayer]
    ) -> list[SearchHit]:
        rows = (
            await conn.execute(
                text(_boost_sql(layers)),
                {
                    "ns": self.namespace,
                    "sid": session_id,
                    "layers": [h.layer.value for h in hits],
                    "ids": [h.id for h in hits],
                    **decay_params(self.settings),
                },
            )
        ).all()
        found = {(r.layer, r.id): (r.attention, r.hops) for r in rows}
        settings = self.settings
        boosted = []
        for hit in hits:
            attention, hops = found.get((hit.layer.value, hit.id), (None, None))
            session_boost = settings.session_boost_factor * attention if attention else 0.0
            causal_boost = {
                1: settings.causal_boost_one_hop,
                2: settings.causal_boost_two_hops,
            }.get(hops or 0, 0.0)
            boost = bounded_boost(session_boost, causal_boost, settings.boost_cap)
            boosted.append(
                replace(
                    hit,
                    session_boost=session_boost,
                    causal_boost=causal_boost,
                    boost=boost,
                    final_score=hit.rrf_score * (1 + boost),
                )
            )
        return boosted

    async def _with_content(self, conn: Any, hits: list[SearchHit]) -> list[SearchHit]:
        if not hits:
            return []
        parts = [
            f"SELECT '{layer.value}' AS layer, id, {spec.content} AS content, "
            f"{spec.session} AS session_id FROM {spec.table} "
            f"WHERE namespace = :ns AND id = ANY(:ids_{layer.value.lower()})"
            for layer, spec in LAYERS.items()
            if any(h.layer is layer for h in hits)
        ]
        params: dict[str, Any] = {"ns": self.namespace}
        for layer in LAYERS:
            params[f"ids_{layer.value.lower()}"] = [h.id for h in hits if h.layer is layer]
        rows = (await conn.execute(text(" UNION ALL ".join(parts)), params)).all()
        content = {(r.layer, r.id): (r.content, r.session_id) for r in rows}
        return [
            replace(hit, content=content[key][0], session_id=content[key][1])
            for hit in hits
            if (key := (hit.layer.value, hit.id)) in content
        ]
