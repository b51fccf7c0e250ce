"""GraphQL for graph-aware hybrid search."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql_memory.api.info import Info
from gql_memory.api.raw import RawDialogue
from gql_memory.api.semantic import AsOfArg, Episode, Insight
from gql_memory.config import TIME_READ_MAX_NUMBERS
from gql_memory.memory.search import types as search
from gql_memory.memory.search.period import periods_not_read

MemoryLayer = search.MemoryLayer  # registered with strawberry below
strawberry.enum(search.MemoryLayer, name="MemoryLayer", description="A searchable memory layer.")
Fusion = search.Fusion
strawberry.enum(
    search.Fusion,
    name="Fusion",
    description="How the vector and full-text legs are fused. DBSF: distribution-based score "
    "fusion, each leg's scores standardized over its candidates ((score - min) / stdev) and "
    "summed with the leg weights (the default, measured best on LoCoMo). RRF: reciprocal rank "
    "fusion, the sum of weight / (k + rank).",
)


DEFAULT_LAYERS = [search.MemoryLayer.INSIGHT]
# search's and context's arguments for time in the query
InterpretTimeArg = Annotated[
    bool | None,
    strawberry.argument(
        description='Read time expressions in the query ("yesterday", "last week", "two '
        'months ago", "in May 2023", "on 7 May 2023") into a period, read against '
        "referenceTime, and rank what happened in it higher (search hits then "
        "carry interpretedPeriod and sort by timeScore; context's reasons name the "
        "period). A query without one is ranked exactly as without interpretTime. Null: "
        "the server's GQL_MEMORY_SEARCH_INTERPRET_TIME (false unless configured). Ignored "
        "by a search given since or until."
    ),
]
ReferenceTimeArg = Annotated[
    datetime | None,
    strawberry.argument(
        description='The instant relative expressions are read against ("yesterday" is the '
        "day before it, in its timezone), with a timezone; default asOf, else now in the "
        "server's timezone. Only read with interpretTime."
    ),
]


MinRelevanceArg = Annotated[
    float | None,
    strawberry.argument(
        description="Leave out hits whose relevance is below this (0..1). Null: the "
        "server's GQL_MEMORY_SEARCH_MIN_RELEVANCE (0: every hit, as ranked)."
    ),
]
ContextMinRelevanceArg = Annotated[
    float | None,
    strawberry.argument(
        description="Add no search hit or lesson whose relevance is below this (0..1). Null: the "
        "server's GQL_MEMORY_CONTEXT_MIN_RELEVANCE, else the floor calibrated with the "
        "embedding model (0.005 for multilingual-e5-small: a question asked of a memory "
        "that does not hold its answer mostly gets no search hits, nor a clear answer's "
        "unrelated neighbours), 0 for a model without one."
    ),
]


@strawberry.input(description="Fusion weight of each leg (0 switches a leg off).")
class SearchWeights:
    vector: float | None = strawberry.field(
        default=None,
        description="Weight of the vector leg; left out or null: the server's "
        "GQL_MEMORY_SEARCH_VECTOR_WEIGHT (0.5 unless configured).",
    )
    text: float | None = strawberry.field(
        default=None,
        description="Weight of the full-text leg; left out or null: the server's "
        "GQL_MEMORY_SEARCH_TEXT_WEIGHT (0.5 unless configured).",
    )


@strawberry.type(description="The hit that lent a hit its graphBoost.")
class GraphSource:
    layer: MemoryLayer = strawberry.field(description="Layer of the lending hit.")
    id: strawberry.ID = strawberry.field(description="Id of the lending hit within its layer.")


@strawberry.type(
    description="The period a search read from its query (interpretTime): what happened in "
    "it, or up to `until`, ranks higher."
)
class InterpretedPeriod:
    expression: str = strawberry.field(
        description='The time expression as written in the query, e.g. "last week" or '
        '"on 7 May 2023" (several are joined by " … " and their span is the period).'
    )
    granularity: str = strawberry.field(
        description="What the expression names: day, week (Monday first), month or year "
        "(the coarsest of several)."
    )
    start: datetime = strawberry.field(
        description="The period's first instant, in the referenceTime's timezone."
    )
    end: datetime = strawberry.field(
        description="The instant the period ends (exclusive): the day after a day, the "
        "Monday after a week, the first of the next month or year."
    )
    until: datetime = strawberry.field(
        description="The end of the period's tail: end plus GQL_MEMORY_SEARCH_TIME_WINDOW_DAYS "
        "(7 unless configured), never past the reference time. Turns about an event come "
        'after it ("last week I ..."): what happened from end up to this instant ranks after '
        "the period's hits and before the others."
    )

    @classmethod
    def from_domain(cls, period: search.QueryPeriod) -> InterpretedPeriod:
        return cls(
            expression=period.expression,
            granularity=period.granularity,
            start=period.start,
            end=period.end,
            until=period.until,
        )


@strawberry.type(
    description="A hybrid-search hit with its explanation: finalScore = (fusedScore + "
    "sessionShare + graphBoost) x (1 + min(sessionBoost + causalBoost, 0.20)) x (1 + "
    "speakerBoost); with a period read from the query (interpretedPeriod), hits sort by "
    "timeScore instead. relevance says how likely the hit answers the query at all."
)
class SearchHit:
    layer: MemoryLayer = strawberry.field(description="The layer the hit comes from.")
    id: strawberry.ID = strawberry.field(description="Id of the hit within its layer.")
    content: str = strawberry.field(
        description="The hit's text (insight content, episode query — reflection, or "
        "'speaker: content' of a raw turn)."
    )
    session_id: str | None = strawberry.field(description="Session of a raw dialogue hit.")
    vector_rank: int | None = strawberry.field(
        description="1-based rank in the vector leg, null if not among its candidates."
    )
    text_rank: int | None = strawberry.field(
        description="1-based rank in the full-text leg, null if it did not match."
    )
    vector_score: float | None = strawberry.field(description="1 - cosine distance.")
    text_score: float | None = strawberry.field(
        description="BM25 score of the full-text leg: each query lexeme the hit contains, "
        "weighted by its rarity in the namespace, saturated by repetition and normalised by "
        "the hit's length."
    )
    fusion: Fusion = strawberry.field(description="The fusion that computed fusedScore.")
    fused_score: float = strawberry.field(
        description="The legs fused: with DBSF the weighted sum of each leg's standardized "
        "score ((score - min) / stdev over the leg's 40 best candidates; 0 when absent from a "
        "leg); "
        "with RRF equal to rrfScore. 0 for a hit found only through the graph."
    )
    rrf_score: float = strawberry.field(
        description="Sum of weight / (k + rank) over legs (k = GQL_MEMORY_RRF_K, default 60); "
        "computed with either fusion, for comparison."
    )
    session_share: float = strawberry.field(
        description="Raw turns: GQL_MEMORY_SEARCH_SESSION_SHARE (0.2) x the best fusedScore "
        "among the candidates of the turn's conversation session (the session that answers "
        "best lifts its other turns); 0 for insights and episodes."
    )
    speaker_boost: float = strawberry.field(
        description="Raw turns: GQL_MEMORY_SEARCH_SPEAKER_BOOST (1.0) when the query names "
        "the turn's speaker (and no other speaker of the candidates), or speaks in the first "
        "person and the turn's speaker is GQL_MEMORY_SEARCH_ASKER_SPEAKER (user), else 0; "
        "finalScore is multiplied by 1 + this."
    )
    cosine: float | None = strawberry.field(
        description="Cosine similarity of the hit with the query, whichever leg found it "
        "(null without a query vector, or for a row stored without embedding)."
    )
    relevance: float = strawberry.field(
        description="How likely the hit answers the query, in [0, 1]: the chance that the "
        "namespace holds the answer with this hit (its cosine, its text score and the best "
        "cosine the query reached in the namespace) times how likely it is the answer "
        "rather than the search's other hits (its distance to the best cosine, its share of "
        "the best text score, its rank), relative to the most likely one; calibrated per "
        "embedding model on the LoCoMo and LongMemEval dev splits "
        "(docs/benchmarks-retrieval.md). With a model that has no calibration: "
        "1 - (1 - cosine) x (1 - textScore / (textScore + 5))."
    )
    graph_boost: float = strawberry.field(
        description="What a one-hop graph neighbour among the best fused hits (10 by "
        "default) lent: GQL_MEMORY_GRAPH_PROPAGATION (default 0.25) x that neighbour's "
        "fusedScore + sessionShare, the largest such loan. Neighbours are joined by edges "
        "between memory nodes (NEXT between consecutive turns, DERIVED_FROM from an insight to its "
        "sources, edges you add)."
    )
    graph_source: GraphSource | None = strawberry.field(
        description="The hit that lent the graphBoost, null when none did."
    )
    session_boost: float = strawberry.field(
        description="0.15 x attention of the session's working-memory item referring to it."
    )
    causal_boost: float = strawberry.field(
        description="0.10 one hop, 0.05 two hops from a node the session's working memory "
        "refers to."
    )
    boost: float = strawberry.field(
        description="min(sessionBoost + causalBoost, 0.20): never above the cap."
    )
    final_score: float = strawberry.field(
        description="(fusedScore + sessionShare + graphBoost) x (1 + boost) x (1 + "
        "speakerBoost); hits sort by it."
    )
    valid_from: datetime | None = strawberry.field(
        description="When the insight or episode began to hold (null for raw turns)."
    )
    valid_to: datetime | None = strawberry.field(
        description="When it stopped holding. Only a search with asOf before that instant "
        "returns such a hit: a search of now filters it out (see filteredNow)."
    )
    superseded_by: strawberry.ID | None = strawberry.field(
        description="The fact that superseded this hit, if one did."
    )
    filtered_now: bool = strawberry.field(
        description="True when a search of now would have filtered this hit out (it was "
        "superseded or invalidated after asOf)."
    )
    interpreted_period: InterpretedPeriod | None = strawberry.field(
        description="The period read from the query (interpretTime), the same on every hit; "
        "null when the search read none (then the ranking is exactly that of a search "
        "without interpretTime)."
    )
    vector_leg_skipped: str | None = strawberry.field(
        default=None,
        description="Why the vector leg was not searched although the weights asked for it: "
        "the embedding provider is down (it failed, or its circuit breaker is open), e.g. "
        "'vector leg skipped: The embedding provider openai at http://embedder:8080/v1 "
        "(model e5) did not answer within 10 s'. The hits then come from the text leg alone, "
        "and their relevance is the text signal alone (BM25 saturated, s / (s + 5)). The "
        "same on every hit; null when the vector leg was searched or not asked for.",
    )
    period_not_read: str | None = strawberry.field(
        default=None,
        description="With interpretTime: why no period was read from a query that may name "
        f"one (it holds more than {TIME_READ_MAX_NUMBERS} numbers; reading it took more than "
        "GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS of CPU time; every time reader was busy), "
        "e.g. 'time not read: the query holds 60 numbers, more than "
        f"{TIME_READ_MAX_NUMBERS}; searched without a period'. The hits are then ranked as "
        "without interpretTime. The same on every hit; null when a period was read, when "
        "the query names none, or without interpretTime.",
    )
    rank_without_period: int | None = strawberry.field(
        description="With an interpretedPeriod: the hit's 1-based rank in the search without "
        "it, whose best max(topK, 20) hits time re-ranks (and whose numbers the hit carries)."
    )
    period_rank: int | None = strawberry.field(
        description="With an interpretedPeriod: the hit's 1-based rank among the hits in the "
        "period or its tail (up to until), those in the period first; null: outside both."
    )
    time_score: float | None = strawberry.field(
        description="With an interpretedPeriod: 1 / (k + rankWithoutPeriod) + w / (k + "
        "periodRank), w = 1 in the period, 1/2 in its tail, 0 elsewhere (k = "
        "GQL_MEMORY_RRF_K, 60); hits sort by it: those in the period first, then the tail's, "
        "then the rest. Null without a period."
    )

    @strawberry.field(description="The insight, when the hit is one (batched).")
    async def insight(self, info: Info) -> Insight | None:
        if self.layer is not search.MemoryLayer.INSIGHT:
            return None
        found = await info.context.loaders.insight.load(int(self.id))
        return Insight.from_domain(found) if found else None

    @strawberry.field(description="The episode, when the hit is one (batched).")
    async def episode(self, info: Info) -> Episode | None:
        if self.layer is not search.MemoryLayer.EPISODE:
            return None
        found = await info.context.loaders.episode.load(int(self.id))
        return Episode.from_domain(found) if found else None

    @strawberry.field(description="The raw dialogue turn, when the hit is one (batched).")
    async def raw_dialogue(self, info: Info) -> RawDialogue | None:
        if self.layer is not search.MemoryLayer.RAW:
            return None
        found = await info.context.loaders.raw_dialogue.load(int(self.id))
        return RawDialogue.from_domain(found) if found else None

    @classmethod
    def from_domain(cls, hit: search.SearchHit, period_not_read: str | None = None) -> SearchHit:
        return cls(
            layer=hit.layer,
            id=strawberry.ID(str(hit.id)),
            content=hit.content,
            session_id=hit.session_id,
            vector_rank=hit.vector_rank,
            text_rank=hit.text_rank,
            vector_score=hit.vector_score,
            text_score=hit.text_score,
            fusion=hit.fusion,
            fused_score=hit.fused_score,
            rrf_score=hit.rrf_score,
            session_share=hit.session_share,
            speaker_boost=hit.speaker_boost,
            cosine=hit.cosine,
            relevance=hit.relevance,
            graph_boost=hit.graph_boost,
            graph_source=GraphSource(
                layer=hit.graph_source[0], id=strawberry.ID(str(hit.graph_source[1]))
            )
            if hit.graph_source
            else None,
            session_boost=hit.session_boost,
            causal_boost=hit.causal_boost,
            boost=hit.boost,
            final_score=hit.final_score,
            valid_from=hit.valid_from,
            valid_to=hit.valid_to,
            superseded_by=None
            if hit.superseded_by is None
            else strawberry.ID(str(hit.superseded_by)),
            filtered_now=hit.valid_to is not None,
            interpreted_period=InterpretedPeriod.from_domain(hit.interpreted_period)
            if hit.interpreted_period
            else None,
            period_not_read=period_not_read,
            vector_leg_skipped=hit.vector_leg_skipped,
            rank_without_period=hit.rank_without_period,
            period_rank=hit.period_rank,
            time_score=hit.time_score,
        )


@strawberry.type(description="Hybrid search.")
class SearchQueries:
    @strawberry.field(
        description="Graph-aware hybrid search: vector + full-text legs fused (DBSF by "
        "default, or RRF), the best hits lending to their graph neighbours, boosted by the "
        "session's working memory and its graph neighbours (capped at +20%)."
    )
    async def search(
        self,
        info: Info,
        query: Annotated[str, strawberry.argument(description="What to look for.")],
        top_k: Annotated[int, strawberry.argument(description="How many hits (1..100).")] = 10,
        session_id: Annotated[
            str, strawberry.argument(description="Session whose working memory boosts hits.")
        ] = "default",
        layers: Annotated[
            list[MemoryLayer], strawberry.argument(description="Layers to search.")
        ] = DEFAULT_LAYERS,  # noqa: B006 - never mutated
        weights: Annotated[
            SearchWeights | None,
            strawberry.argument(
                description="Fusion weights per leg (default: the server's, 0.5 / 0.5)."
            ),
        ] = None,
        fusion: Annotated[
            Fusion | None,
            strawberry.argument(description="How to fuse the legs (default: the server's, DBSF)."),
        ] = None,
        as_of: AsOfArg = None,
        since: Annotated[
            datetime | None,
            strawberry.argument(
                description="Only what happened or held from this instant on: raw turns whose "
                "timestamp is at or after it, facts still valid at some point after it."
            ),
        ] = None,
        until: Annotated[
            datetime | None,
            strawberry.argument(
                description="Only what happened or held up to this instant: raw turns whose "
                "timestamp is at or before it, facts valid from before it."
            ),
        ] = None,
        interpret_time: InterpretTimeArg = None,
        reference_time: ReferenceTimeArg = None,
        min_relevance: MinRelevanceArg = None,
    ) -> list[SearchHit]:
        with periods_not_read() as unread:
            hits = await info.context.memory.search(
                query,
                top_k,
                session_id,
                layers,
                search.SearchWeights(weights.vector, weights.text) if weights else None,
                fusion,
                as_of=as_of,
                since=since,
                until=until,
                reference_time=reference_time,
                interpret_time=interpret_time,
                min_relevance=min_relevance,
            )
        reason = unread[0] if unread else None
        return [SearchHit.from_domain(h, reason) for h in hits]
