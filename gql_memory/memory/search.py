"""Graph-aware hybrid search (seed 002 ADR-002): vector + full-text legs, fused (by default
distribution-based score fusion, or Reciprocal Rank Fusion on request), then the graph: each
of the best hits lends part of its score to its one-hop neighbours (graphBoost), and bounded
boosts come from the session's working memory and its graph neighbours.

Three SQL round trips whatever topK is: (1) every leg of every layer in one statement,
(2) the graph: neighbours of the best hits and the boosts of every candidate, (3) the content
of the final hits.
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


class Fusion(enum.Enum):
    """How the legs' candidates are fused into one ranking."""

    DBSF = "DBSF"  # distribution-based score fusion: each leg's scores standardized
    RRF = "RRF"  # reciprocal rank fusion: ranks only


@dataclass(frozen=True)
class SearchWeights:
    """Weight of each leg in the fusion; a zero weight switches the leg off."""

    vector: float = 0.5
    text: float = 0.5


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
    fusion: Fusion = Fusion.DBSF
    fused_score: float = 0.0
    rrf_score: float = 0.0
    graph_boost: float = 0.0
    graph_source: tuple[MemoryLayer, int] | None = None
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


def _graph_sql(layers: Iterable[MemoryLayer]) -> str:
    """Neighbours of the best hits and the boosts of every candidate, in one statement.

    ``lenders`` are the best fused hits; each lends to the memories whose nodes are one edge
    from one of its nodes (a raw turn's previous and next turns, an insight's source turns,
    any edge a client drew between memories). ``cand`` (the fused candidates plus those
    neighbours) get their session attention and their hop distance from the session's seeds.
    """
    chosen = list(layers)

    lender_nodes = "\n        UNION ALL ".join(
        f"SELECT l.layer, l.id, l.score, n.id AS node_id FROM lenders l JOIN nodes n "
        f"ON n.{LAYERS[layer].node_column} = l.id "
        f"WHERE l.layer = '{layer.value}' AND n.namespace = :ns"
        for layer in chosen
    )
    neighbour_memories = "\n        UNION ALL ".join(
        f"SELECT '{layer.value}' AS layer, n.{LAYERS[layer].node_column} AS id, "
        f"h.lender_layer, h.lender_id, h.score FROM hop h JOIN nodes n ON n.id = h.node_id "
        f"WHERE n.namespace = :ns AND n.{LAYERS[layer].node_column} IS NOT NULL"
        for layer in chosen
    )
    hit_nodes = "\n        UNION ALL ".join(
        f"SELECT c.layer, c.id, n.id AS node_id FROM cand c JOIN nodes n "
        f"ON n.{LAYERS[layer].node_column} = c.id "
        f"WHERE c.layer = '{layer.value}' AND n.namespace = :ns"
        for layer in chosen
    )
    seed_links = "\n        UNION ".join(
        f"SELECT n.id FROM nodes n JOIN wm ON wm.ref_kind = '{layer.value}' "
        f"AND n.{spec.node_column} = wm.ref_id WHERE n.namespace = :ns"
        for layer, spec in LAYERS.items()
    )
    return f"""
    WITH lenders AS (
        SELECT * FROM unnest(CAST(:lender_layers AS text[]), CAST(:lender_ids AS bigint[]),
                             CAST(:lender_scores AS float8[])) AS l(layer, id, score)
    ),
    lender_nodes AS (
        {lender_nodes}
    ),
    -- one hop in either direction, at most :fanout edges per lending node (hubs stay cheap)
    hop AS (
        SELECT ln.layer AS lender_layer, ln.id AS lender_id, ln.score, x.node_id
        FROM lender_nodes ln
        CROSS JOIN LATERAL (
            (SELECT e.target_id AS node_id FROM edges e
             WHERE e.namespace = :ns AND e.source_id = ln.node_id LIMIT :fanout)
            UNION ALL
            (SELECT e.source_id FROM edges e
             WHERE e.namespace = :ns AND e.target_id = ln.node_id LIMIT :fanout)
        ) x
    ),
    neighbours AS (
        {neighbour_memories}
    ),
    cand AS (
        SELECT * FROM unnest(CAST(:layers AS text[]), CAST(:ids AS bigint[])) AS c(layer, id)
        UNION
        SELECT layer, id FROM neighbours
    ),
    wm AS (
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
    hit_nodes AS (
        {hit_nodes}
    )
    SELECT 'boost' AS kind, c.layer, c.id, NULL AS lender_layer, CAST(NULL AS bigint) AS lender_id,
           CAST(NULL AS float8) AS score,
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
    UNION ALL
    SELECT 'lend', layer, id, lender_layer, lender_id, score, NULL, NULL FROM neighbours
    """


def rrf(ranks: dict[str, int], weights: SearchWeights, k: int) -> float:
    """Reciprocal Rank Fusion: sum over legs of weight / (k + rank)."""
    return sum(getattr(weights, leg) / (k + rank) for leg, rank in ranks.items())


def standardized(scores: Sequence[float], sample: int | None = None) -> list[float]:
    """A leg's scores (best first) as distances above its worst candidate in standard
    deviations: (score - min) / stdev, both taken over the first ``sample`` scores (all by
    default), floored at 0. A leg whose sampled scores are all alike gives each 1."""
    if not scores:
        return []
    head = scores[:sample] if sample else scores
    low = min(head)
    mean = sum(head) / len(head)
    spread = math.sqrt(sum((x - mean) ** 2 for x in head) / len(head))
    if spread <= 1e-12:
        return [1.0 if x >= low else 0.0 for x in scores]
    return [max(0.0, (x - low) / spread) for x in scores]


def dbsf(
    legs: dict[str, dict[int, float]], weights: SearchWeights, sample: int | None = None
) -> dict[int, float]:
    """Distribution-based score fusion: each leg's scores are standardized over its best
    ``sample`` candidates (so cosine similarities and text scores become comparable, and a
    larger topK does not move them), then summed with the legs' weights. A candidate missing
    from a leg counts as that leg's worst (0)."""
    fused: dict[int, float] = {}
    for leg, scores in legs.items():
        weight = getattr(weights, leg)
        ordered = sorted(scores.items(), key=lambda item: -item[1])
        values = standardized([v for _, v in ordered], sample)
        for (key, _), value in zip(ordered, values, strict=True):
            fused[key] = fused.get(key, 0.0) + weight * value
    return fused


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


def require_fusion(fusion: Fusion | str | None, settings: Settings) -> Fusion:
    if fusion is None:
        return Fusion(settings.search_fusion.upper())
    try:
        return fusion if isinstance(fusion, Fusion) else Fusion(str(fusion).upper())
    except ValueError as exc:
        raise ValidationError("fusion must be DBSF or RRF") from exc


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
        fusion: Fusion | str | None = None,
    ) -> list[SearchHit]:
        """The top_k hits across ``layers``, best first, each with its explanation."""
        query = require_text(query, "query", max_length=MAX_QUERY_CHARS)
        top_k = require_top_k(top_k)
        if session_id is not None:
            session_id = require_session_id(session_id)
        chosen = require_layers(layers)
        weights = require_weights(weights, self.settings)
        fusion = require_fusion(fusion, self.settings)
        vector = None
        if weights.vector > 0:
            [embedding] = await self.embedder.embed([query], role=TextRole.QUERY)
            vector = vector_literal(embedding)
        async with self.db.read() as conn:
            candidates = await self._legs(conn, query, vector, chosen, weights, top_k)
            hits = self._fuse(candidates, weights, fusion)
            if hits:
                hits = await self._graph(conn, hits, session_id, chosen)
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

    def _fuse(
        self, candidates: list[_Candidate], weights: SearchWeights, fusion: Fusion
    ) -> list[SearchHit]:
        """One fused score per candidate. RRF ranks each layer's legs apart (as the legs
        return them); DBSF standardizes each leg's scores over all its candidates, every
        layer together (cosines of one model, and text scores, are comparable across layers)."""
        legs: dict[str, dict[int, float]] = {}
        for index, c in enumerate(candidates):
            for leg, score in c.scores.items():
                legs.setdefault(leg, {})[index] = score
        scored = dbsf(legs, weights, MIN_CANDIDATES) if fusion is Fusion.DBSF else {}
        hits = []
        for index, c in enumerate(candidates):
            rank_score = rrf(c.ranks, weights, self.settings.rrf_k)
            fused = rank_score if fusion is Fusion.RRF else scored.get(index, 0.0)
            hits.append(
                SearchHit(
                    layer=c.layer,
                    id=c.id,
                    vector_rank=c.ranks.get("vector"),
                    text_rank=c.ranks.get("text"),
                    vector_score=c.scores.get("vector"),
                    text_score=c.scores.get("text"),
                    fusion=fusion,
                    fused_score=fused,
                    rrf_score=rank_score,
                    final_score=fused,
                )
            )
        return hits

    async def _graph(
        self,
        conn: Any,
        hits: list[SearchHit],
        session_id: str | None,
        layers: list[MemoryLayer],
    ) -> list[SearchHit]:
        """Graph propagation and boosts; neighbours that were no candidate join the hits."""
        settings = self.settings
        share = settings.graph_propagation
        # a fixed number of lenders: the best hits lend alike whatever topK asks for
        lenders = sorted(hits, key=lambda h: (-h.fused_score, h.layer.value, h.id))[
            : settings.graph_propagation_lenders
        ]
        if share <= 0:
            lenders = []
        rows = (
            await conn.execute(
                text(_graph_sql(layers)),
                {
                    "ns": self.namespace,
                    "sid": session_id,
                    "layers": [h.layer.value for h in hits],
                    "ids": [h.id for h in hits],
                    "lender_layers": [h.layer.value for h in lenders],
                    "lender_ids": [h.id for h in lenders],
                    "lender_scores": [h.fused_score for h in lenders],
                    "fanout": settings.graph_propagation_fanout,
                    **decay_params(settings),
                },
            )
        ).all()
        by_key = {(h.layer, h.id): h for h in hits}
        lent: dict[tuple[MemoryLayer, int], tuple[float, tuple[MemoryLayer, int]]] = {}
        boosts: dict[tuple[MemoryLayer, int], tuple[float | None, int | None]] = {}
        for row in rows:
            key = (MemoryLayer(row.layer), row.id)
            if row.kind == "boost":
                boosts[key] = (row.attention, row.hops)
                continue
            lender = (MemoryLayer(row.lender_layer), row.lender_id)
            if lender == key:
                continue  # a memory does not lend to itself through a second node
            amount = share * row.score
            if amount > lent.get(key, (0.0, lender))[0]:
                lent[key] = (amount, lender)
        boosted = []
        for key in by_key.keys() | boosts.keys():
            hit = by_key.get(key) or SearchHit(layer=key[0], id=key[1], fusion=hits[0].fusion)
            graph_boost, source = lent.get(key, (0.0, None))
            attention, hops = boosts.get(key, (None, None))
            session_boost = settings.session_boost_factor * attention if attention else 0.0
            causal_boost = {
                1: settings.causal_boost_one_hop,
                2: settings.causal_boost_two_hops,
            }.get(hops or 0, 0.0)
            boost = bounded_boost(session_boost, causal_boost, settings.boost_cap)
            boosted.append(
                replace(
                    hit,
                    graph_boost=graph_boost,
                    graph_source=source,
                    session_boost=session_boost,
                    causal_boost=causal_boost,
                    boost=boost,
                    final_score=(hit.fused_score + graph_boost) * (1 + boost),
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
