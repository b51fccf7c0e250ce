"""Graph-aware hybrid search (seed 002 ADR-002): vector + full-text legs, fused (by default
distribution-based score fusion, or Reciprocal Rank Fusion on request), then the graph: each
of the best hits lends part of its score to its one-hop neighbours (graphBoost), and bounded
boosts come from the session's working memory and its graph neighbours.

Three SQL round trips whatever topK is, four with raw turns: (1) every leg of every layer in
one statement, (1b) the conversation sessions and speakers of the raw candidates, (2) the
graph: neighbours of the best hits and the boosts of every candidate, (3) the content of the
final hits.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import TextClause, text

from gql_memory.config import TIME_RANKING_DEPTH, Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.embeddings.once import EmbedOnce
from gql_memory.errors import ValidationError
from gql_memory.memory.decay import decay_params
from gql_memory.memory.fusion import Fusion, SearchWeights, dbsf, rrf
from gql_memory.memory.relevance import (
    Calibration,
    calibration_for,
    relevance,
    require_min_relevance,
    search_floor,
)
from gql_memory.memory.search_sql import (
    LAYERS,
    RAW_FACETS_SQL,
    MemoryLayer,
    When,
    content_sql,
    graph_sql,
    legs_sql,
)
from gql_memory.memory.time_expressions import (
    QueryPeriod,
    query_period,
    rank_with_period,
    require_reference_time,
)
from gql_memory.memory.validation import require_query, require_session_id
from gql_memory.memory.validity import require_as_of, require_period
from gql_memory.memory.vectors import require_top_k, vector_literal

MIN_CANDIDATES = 40
# The text leg's statistics in a namespace larger than its budget come from this share of the
# budget, its newest rows (a small namespace's come from all of its rows).
STATISTICS_SHARE = 4
_LAYER = {layer.value: layer for layer in MemoryLayer}  # a row's layer name: its member
# The search's vocabulary, importable from here by the API, the library and tests.
__all__ = ["Fusion", "HybridSearch", "MemoryLayer", "SearchHit", "SearchWeights"]


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
    # a raw turn's share of the best fused score in its conversation session
    session_share: float = 0.0
    # the factor's part above 1 a raw turn gets when the query names its speaker
    speaker_boost: float = 0.0
    graph_boost: float = 0.0
    graph_source: tuple[MemoryLayer, int] | None = None
    # validity of an insight or episode hit: a hit with valid_to was found as of an instant
    # before it was superseded, and a search of now would have filtered it out
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: int | None = None
    session_boost: float = 0.0
    causal_boost: float = 0.0
    boost: float = 0.0
    final_score: float = 0.0
    # with a period read from the query (interpretTime): the period, the hit's rank in the
    # search without it and within it, and their reciprocal-rank fusion, which hits sort by
    interpreted_period: QueryPeriod | None = None
    rank_without_period: int | None = None
    period_rank: int | None = None
    time_score: float | None = None
    # the hit's cosine similarity with the query (None: no query vector, or the row has none)
    cosine: float | None = None
    # the chance that the hit answers the query, calibrated (gql_memory.memory.relevance)
    relevance: float = 0.0


def bounded_boost(session_boost: float, causal_boost: float, cap: float) -> float:
    """ADR-002: the combined boost never exceeds the cap."""
    return min(session_boost + causal_boost, cap)


def named_speakers(query: str, speakers: set[str]) -> set[str]:
    """The speakers a query names, as whole words in any case ("what does caroline paint")."""
    return {
        s
        for s in speakers
        if len(s) > 1 and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", query, re.IGNORECASE)
    }


def require_weights(weights: SearchWeights | None, settings: Settings) -> SearchWeights:
    """Both legs' weights: those given, and the operator's for a leg left None (the settings
    are the only source of defaults)."""
    if weights is None:
        return SearchWeights(settings.search_vector_weight, settings.search_text_weight)
    weights = SearchWeights(
        settings.search_vector_weight if weights.vector is None else weights.vector,
        settings.search_text_weight if weights.text is None else weights.text,
    )
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


@dataclass(slots=True)
class _Candidate:
    """A hit while it is being ranked: mutable and cheap, so that the dozens of candidates
    of a search cost no frozen copies; only the final topK become ``SearchHit``s."""

    layer: MemoryLayer
    id: int
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    fused_score: float = 0.0
    rrf_score: float = 0.0
    session_share: float = 0.0
    speaker_boost: float = 0.0
    graph_boost: float = 0.0
    graph_source: tuple[MemoryLayer, int] | None = None
    session_boost: float = 0.0
    causal_boost: float = 0.0
    boost: float = 0.0
    final_score: float = 0.0

    @property
    def lending_score(self) -> float:
        """What the hit is worth before the graph: fused, plus its session's share."""
        return self.fused_score + self.session_share


@functools.lru_cache(maxsize=256)
def _statement(sql: str) -> TextClause:
    """The parsed statement of a built SQL text (a search's statements are a few dozen
    shapes: layers, legs and time filters), parsed once instead of on every search."""
    return text(sql)


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
        *,
        as_of: datetime | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        reference_time: datetime | None = None,
        interpret_time: bool | None = None,
        min_relevance: float | None = None,
    ) -> list[SearchHit]:
        """The top_k hits across ``layers``, best first, each with its explanation. Only the
        facts valid now are searched, or those valid at ``as_of`` (and the raw turns stored by
        then): superseded insights and episodes are hidden unless the instant is theirs.
        ``since`` / ``until`` limit hits to a period: raw turns that happened in it (their
        timestamp), facts valid during some of it. With ``interpret_time`` (default: the
        setting) and no since / until, a period the query names ("last week") against
        ``reference_time`` (default as_of, else now) ranks hits in it higher (see
        gql_memory.memory.time_expressions). Hits whose relevance is below ``min_relevance``
        (default: GQL_MEMORY_SEARCH_MIN_RELEVANCE, 0) are left out."""
        query = require_query(query, self.settings.search_max_query_words)
        reference_time = require_reference_time(reference_time)
        if reference_time is None and as_of is not None:
            reference_time = as_of  # its days are the caller's (require_as_of makes it UTC)
        as_of = require_as_of(as_of)
        since, until = require_period(since, until)
        top_k = require_top_k(top_k)
        if session_id is not None:
            session_id = require_session_id(session_id)
        chosen = require_layers(layers)
        weights = require_weights(weights, self.settings)
        fusion = require_fusion(fusion, self.settings)
        floor = require_min_relevance(min_relevance, search_floor(self.settings))
        limited = since is not None or until is not None
        args = (session_id, chosen, weights, fusion, as_of)
        period = await query_period(query, interpret_time, reference_time, limited, self.settings)
        if period is None:
            hits, _ = await self._ranked(query, top_k, *args, since, until)
            return [h for h in hits if h.relevance >= floor]
        # two searches, one query vector: without the period and within it, fused by rank
        twice = HybridSearch(self.db, self.settings, self.namespace, EmbedOnce(self.embedder))
        depth = max(top_k, TIME_RANKING_DEPTH)
        plain, best = await twice._ranked(query, depth, *args, None, None)
        # the hits found within the period are rated against the best cosine the query
        # reached in the whole namespace, as the plain search's are
        start, until = require_period(period.start, period.until)
        inside, _ = await twice._ranked(query, depth, *args, start, until, best)
        timed = rank_with_period(plain, inside, period, self.settings.rrf_k, top_k)
        # the floor applies to the fused ranking: a hit the period brings up is not cut for
        # its relevance within the period alone
        return [h for h in timed if h.relevance >= floor]

    async def _ranked(
        self,
        query: str,
        top_k: int,
        session_id: str | None,
        chosen: list[MemoryLayer],
        weights: SearchWeights,
        fusion: Fusion,
        as_of: datetime | None,
        since: datetime | None,
        until: datetime | None,
        best_cosine: float | None = None,
    ) -> tuple[list[SearchHit], float | None]:
        """The ``top_k`` hits of a validated search, every one whatever its relevance, and the
        best cosine the query reached in the namespace (every layer, searched or not).
        Relevance rates a hit against that best, or against ``best_cosine`` when it is higher
        (a search within a period: the best of the whole namespace, from the search without
        the period)."""
        when = When(as_of is not None, since is not None, until is not None)
        moments = {"as_of": as_of, "since": since, "until": until}
        calibration = calibration_for(self.embedder.model)
        vector = None
        if weights.vector:  # a leg weighted 0 is off
            [embedding] = await self.embedder.embed([query], role=TextRole.QUERY)
            vector = vector_literal(embedding)
        async with self.db.read() as conn:
            # the best cosine of the layers not searched: only a calibration reads it
            rated = [] if calibration is None else [m for m in MemoryLayer if m not in chosen]
            candidates, elsewhere = await self._legs(
                conn, query, vector, chosen, rated, weights, top_k, when, moments
            )
            self._fuse(candidates, weights, fusion)
            speakers: dict[int, str] = {}
            if candidates and MemoryLayer.RAW in chosen:
                speakers = await self._sessions(conn, candidates)
            if candidates:
                candidates = await self._graph(conn, candidates, session_id, chosen, when, moments)
            if speakers:
                self._speakers(query, candidates, speakers)
            candidates.sort(key=lambda c: (-c.final_score, c.layer.value, c.id))
            cosines = [c.scores["vector"] for c in candidates if "vector" in c.scores]
            if elsewhere is not None:
                cosines.append(elsewhere)
            reached = max(cosines, default=None)
            best = max((b for b in (reached, best_cosine) if b is not None), default=None)
            hits = await self._with_content(
                conn, candidates[:top_k], fusion, vector, best, calibration
            )
        return hits, reached

    async def _legs(
        self,
        conn: Any,
        query: str,
        vector: str | None,
        layers: list[MemoryLayer],
        rated: list[MemoryLayer],
        weights: SearchWeights,
        top_k: int,
        when: When,
        moments: dict[str, datetime | None],
    ) -> tuple[list[_Candidate], float | None]:
        """The candidates of the legs, and the best cosine of the ``rated`` layers (not
        searched: a hit's relevance is rated against the whole namespace, whichever layers
        are searched, so the same hit gets the same relevance)."""
        sql = legs_sql(
            layers, when, vector=vector is not None, text=bool(weights.text), rated=rated
        )
        rows = (
            await conn.execute(
                _statement(sql),
                {
                    "ns": self.namespace,
                    "query": query,
                    "tsconfig": self.settings.text_search_config,
                    "vector": vector,
                    "n": max(top_k * 4, MIN_CANDIDATES),
                    "max_matches": self.settings.text_search_max_matches,
                    "rerank": 4 * max(top_k * 4, MIN_CANDIDATES),
                    "count_cap": max(
                        self.settings.vector_exact_max_rows, self.settings.text_search_max_matches
                    )
                    + 1,
                    "sample_rows": max(
                        self.settings.text_search_max_matches // STATISTICS_SHARE, 1
                    ),
                    "bm25_k1": self.settings.text_search_bm25_k1,
                    "bm25_b": self.settings.text_search_bm25_b,
                    "exact_rows": self.settings.vector_exact_max_rows,
                    **moments,
                },
            )
        ).all()
        candidates: dict[tuple[str, int], _Candidate] = {}
        position: dict[tuple[str, str], int] = {}
        elsewhere: float | None = None
        for layer, leg, id_, score in rows:  # rows of each leg arrive in rank order
            if leg == "best":
                elsewhere = float(score) if elsewhere is None else max(elsewhere, float(score))
                continue
            rank = position[(layer, leg)] = position.get((layer, leg), 0) + 1
            candidate = candidates.get((layer, id_))
            if candidate is None:
                candidate = candidates[(layer, id_)] = _Candidate(_LAYER[layer], id_)
            candidate.ranks[leg] = rank
            candidate.scores[leg] = float(score)
        return list(candidates.values()), elsewhere

    def _fuse(self, candidates: list[_Candidate], weights: SearchWeights, fusion: Fusion) -> None:
        """One fused score per candidate. RRF ranks each layer's legs apart (as the legs
        return them); DBSF standardizes each leg's scores over all its candidates, every
        layer together (cosines of one model, and text scores, are comparable across layers)."""
        legs: dict[str, dict[int, float]] = {}
        for index, c in enumerate(candidates):
            for leg, score in c.scores.items():
                legs.setdefault(leg, {})[index] = score
        scored = dbsf(legs, weights, MIN_CANDIDATES) if fusion is Fusion.DBSF else {}
        for index, c in enumerate(candidates):
            c.rrf_score = rrf(c.ranks, weights, self.settings.rrf_k)
            c.fused_score = c.rrf_score if fusion is Fusion.RRF else scored.get(index, 0.0)
            c.final_score = c.fused_score

    async def _facets(self, conn: Any, ids: list[int]) -> list[Any]:
        rows = await conn.execute(_statement(RAW_FACETS_SQL), {"ns": self.namespace, "ids": ids})
        return list(rows)

    async def _sessions(self, conn: Any, candidates: list[_Candidate]) -> dict[int, str]:
        """Hierarchical retrieval, softly: every raw candidate gains a share of the best fused
        score among the candidates of its conversation session (sessionShare), so that the
        session that answers the query best lifts its other turns (where the answer often is:
        a question's reply, the event's details). Returns the raw candidates' speakers."""
        raw = {c.id: c for c in candidates if c.layer is MemoryLayer.RAW}
        if not raw or (
            not self.settings.search_session_share and not self.settings.search_speaker_boost
        ):
            return {}
        rows = await self._facets(conn, list(raw))
        best: dict[str, float] = {}
        for row in rows:
            best[row.session_id] = max(best.get(row.session_id, 0.0), raw[row.id].fused_score)
        share = self.settings.search_session_share
        for row in rows:
            raw[row.id].session_share = share * best[row.session_id]
            raw[row.id].final_score = raw[row.id].lending_score
        return {row.id: row.speaker for row in rows}

    def _speakers(self, query: str, hits: list[_Candidate], speakers: dict[int, str]) -> None:
        """speakerBoost: when the query names one speaker of the raw candidates, that
        speaker's candidate turns score 1 + search_speaker_boost times as much: what a person
        did or said is told in their own turns, far more often than in the other side's.
        (A turn that only the graph brought is not a candidate: it keeps its loan as lent.)"""
        factor = self.settings.search_speaker_boost
        named = named_speakers(query, set(speakers.values())) if factor else set()
        if len(named) != 1:
            return
        for hit in hits:
            if hit.layer is MemoryLayer.RAW and speakers.get(hit.id) in named:
                hit.speaker_boost = factor
                hit.final_score *= 1 + factor

    async def _graph(
        self,
        conn: Any,
        hits: list[_Candidate],
        session_id: str | None,
        layers: list[MemoryLayer],
        when: When,
        moments: dict[str, datetime | None],
    ) -> list[_Candidate]:
        """Graph propagation and boosts; neighbours that were no candidate join the hits."""
        settings = self.settings
        share = settings.graph_propagation
        # a fixed number of lenders: the best hits lend alike whatever topK asks for
        lenders = sorted(hits, key=lambda h: (-h.lending_score, h.layer.value, h.id))[
            : settings.graph_propagation_lenders
        ]
        if share <= 0:
            lenders = []
        rows = (
            await conn.execute(
                _statement(graph_sql(layers, when)),
                {
                    **moments,
                    "ns": self.namespace,
                    "sid": session_id,
                    "layers": [h.layer.value for h in hits],
                    "ids": [h.id for h in hits],
                    "lender_layers": [h.layer.value for h in lenders],
                    "lender_ids": [h.id for h in lenders],
                    "lender_scores": [h.lending_score for h in lenders],
                    "fanout": settings.graph_propagation_fanout,
                    **decay_params(settings),
                },
            )
        ).all()
        by_key = {(h.layer, h.id): h for h in hits}
        lent: dict[tuple[MemoryLayer, int], tuple[float, tuple[MemoryLayer, int]]] = {}
        boosts: dict[tuple[MemoryLayer, int], tuple[float | None, int | None]] = {}
        for kind, layer, id_, lender_layer, lender_id, score, attention, hops in rows:
            key = (_LAYER[layer], id_)
            if kind == "boost":
                boosts[key] = (attention, hops)
                continue
            lender = (_LAYER[lender_layer], lender_id)
            if lender == key:
                continue  # a memory does not lend to itself through a second node
            amount = share * score
            if amount > lent.get(key, (0.0, lender))[0]:
                lent[key] = (amount, lender)
        for key in boosts.keys() - by_key.keys():
            by_key[key] = _Candidate(key[0], key[1])
        for key, hit in by_key.items():
            hit.graph_boost, hit.graph_source = lent.get(key, (0.0, None))
            attention, hops = boosts.get(key, (None, None))
            if attention and settings.session_boost:  # the ADR's rollback switches
                hit.session_boost = settings.session_boost_factor * attention
            if hops and settings.causal_boost:
                hit.causal_boost = {
                    1: settings.causal_boost_one_hop,
                    2: settings.causal_boost_two_hops,
                }.get(hops, 0.0)
            hit.boost = bounded_boost(hit.session_boost, hit.causal_boost, settings.boost_cap)
            hit.final_score = (hit.lending_score + hit.graph_boost) * (1 + hit.boost)
        return list(by_key.values())

    async def _with_content(
        self,
        conn: Any,
        hits: list[_Candidate],
        fusion: Fusion,
        vector: str | None,
        best_cosine: float | None,
        calibration: Calibration | None,
    ) -> list[SearchHit]:
        """The final hits with their content and relevance (a hit whose row is gone meanwhile
        is left out)."""
        if not hits:
            return []
        params: dict[str, Any] = {"ns": self.namespace, "vector": vector}
        for layer in LAYERS:
            params[f"ids_{layer.value.lower()}"] = [h.id for h in hits if h.layer is layer]
        sql = content_sql({h.layer for h in hits}, vector=vector is not None)
        rows = (await conn.execute(_statement(sql), params)).all()
        found = {(r.layer, r.id): r for r in rows}
        return [
            SearchHit(
                layer=hit.layer,
                id=hit.id,
                content=row.content,
                session_id=row.session_id,
                vector_rank=hit.ranks.get("vector"),
                text_rank=hit.ranks.get("text"),
                vector_score=hit.scores.get("vector"),
                text_score=hit.scores.get("text"),
                fusion=fusion,
                fused_score=hit.fused_score,
                rrf_score=hit.rrf_score,
                session_share=hit.session_share,
                speaker_boost=hit.speaker_boost,
                graph_boost=hit.graph_boost,
                graph_source=hit.graph_source,
                valid_from=row[4],
                valid_to=row[5],
                superseded_by=row[6],
                session_boost=hit.session_boost,
                causal_boost=hit.causal_boost,
                boost=hit.boost,
                final_score=hit.final_score,
                cosine=row.cosine,
                relevance=relevance(row.cosine, hit.scores.get("text"), best_cosine, calibration),
            )
            for hit in hits
            if (row := found.get((hit.layer.value, hit.id))) is not None
        ]
