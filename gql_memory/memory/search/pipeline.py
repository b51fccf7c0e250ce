"""Graph-aware hybrid search (seed 002 ADR-002), its steps in the order they run:

1. validation (``request``): every argument checked, every default from the settings;
2. the period a query names, with ``interpretTime`` (``period``);
3. the legs (``legs``, their SQL in ``legs_sql``): vector and text, every layer at once;
4. fusion (``fusion``): distribution-based score fusion by default, or reciprocal rank;
5. sessions, speakers and the graph (``boosts``): sessionShare, speakerBoost, graph
   propagation and the bounded boosts of working memory and its neighbours;
6. the hits with their content and relevance (``hits``, ``relevance``);
7. with a period, the hits re-ranked by it, never joined by others (``period_ranking``);
8. the relevance floor.

Three SQL round trips whatever topK is, four with raw turns: (1) every leg of every layer in
one statement, (1b) the conversation sessions and speakers of the raw candidates, (2) the
graph: neighbours of the best hits and the boosts of every candidate, (3) the content of the
final hits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from gql_memory.config import TIME_RANKING_DEPTH, Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole
from gql_memory.errors import ServiceUnavailableError
from gql_memory.memory.search.boosts import boost_speaker, propagate_graph, share_sessions
from gql_memory.memory.search.fusion import fuse
from gql_memory.memory.search.hits import explained_hits
from gql_memory.memory.search.legs import run_legs
from gql_memory.memory.search.period import query_period
from gql_memory.memory.search.period_ranking import rank_with_period
from gql_memory.memory.search.relevance import Calibration, calibration_for
from gql_memory.memory.search.request import search_request
from gql_memory.memory.search.types import (
    Fusion,
    MemoryLayer,
    SearchHit,
    SearchRequest,
    SearchWeights,
    When,
)
from gql_memory.memory.vectors import vector_literal


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
        memory/search/period.py). Hits whose relevance is below ``min_relevance``
        (default: GQL_MEMORY_SEARCH_MIN_RELEVANCE, 0) are left out."""
        request = search_request(
            self.settings,
            query,
            top_k,
            session_id,
            layers,
            weights,
            fusion,
            as_of=as_of,
            since=since,
            until=until,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )
        period = None
        if request.interpret_time and not request.limited:
            period = await query_period(request.query, request.reference_time, self.settings)
        vector = None
        skipped = None
        if request.weights.vector:  # a leg weighted 0 is off
            try:
                [embedding] = await self.embedder.embed([request.query], role=TextRole.QUERY)
                vector = vector_literal(embedding)
            except ServiceUnavailableError as exc:
                if not request.weights.text:
                    raise  # the vector leg alone was asked for: nothing can answer
                # the text leg answers alone, and every hit says why (vectorLegSkipped)
                skipped = f"vector leg skipped: {exc}"
                request = replace(request, weights=SearchWeights(0.0, request.weights.text))
        calibration = None if skipped else calibration_for(self.embedder.model)
        async with self.db.read() as conn:
            if period is None:
                hits = await self._ranked(
                    conn, request, vector, calibration, request.top_k, request.since, request.until
                )
            else:  # time re-ranks the hits of the search without it, to the time ranking's depth
                depth = max(request.top_k, TIME_RANKING_DEPTH)
                plain = await self._ranked(conn, request, vector, calibration, depth)
                hits = rank_with_period(plain, period, self.settings.rrf_k, request.top_k)
        if skipped:
            hits = [replace(h, vector_leg_skipped=skipped) for h in hits]
        return [h for h in hits if h.relevance >= request.min_relevance]

    async def _ranked(
        self,
        conn: Any,
        request: SearchRequest,
        vector: str | None,
        calibration: Calibration | None,
        top_k: int,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[SearchHit]:
        """The ``top_k`` hits of ``request`` between ``since`` and ``until``, every one
        whatever its relevance (rated against the best cosine the query reached in the
        namespace: every layer, searched or not)."""
        when = When(request.as_of is not None, since is not None, until is not None)
        moments = {"as_of": request.as_of, "since": since, "until": until}
        chosen = request.layers
        # the best cosine of the layers not searched: only a calibration reads it
        rated = [] if calibration is None else [m for m in MemoryLayer if m not in chosen]
        candidates, elsewhere = await run_legs(
            conn,
            self.namespace,
            self.settings,
            request.query,
            vector,
            chosen,
            rated,
            request.weights,
            top_k,
            when,
            moments,
        )
        fuse(candidates, request.weights, request.fusion, self.settings.rrf_k)
        speakers: dict[int, str] = {}
        if candidates and MemoryLayer.RAW in chosen:
            speakers = await share_sessions(conn, self.namespace, self.settings, candidates, vector)
        if candidates:
            candidates = await propagate_graph(
                conn,
                self.namespace,
                self.settings,
                candidates,
                request.session_id,
                chosen,
                when,
                moments,
            )
        if speakers:
            boost_speaker(
                request.query,
                candidates,
                speakers,
                self.settings.search_speaker_boost,
                self.settings.search_asker_speaker,
            )
        candidates.sort(key=lambda c: (-c.final_score, c.layer.value, c.id))
        cosines = [c.scores["vector"] for c in candidates if "vector" in c.scores]
        if elsewhere is not None:
            cosines.append(elsewhere)
        best = max(cosines, default=None)
        best_text = max((c.scores["text"] for c in candidates if "text" in c.scores), default=None)
        return await explained_hits(
            conn,
            self.namespace,
            candidates[:top_k],
            request.fusion,
            vector,
            best,
            best_text,
            calibration,
        )
