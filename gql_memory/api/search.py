"""GraphQL for graph-aware hybrid search."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql_memory.api.info import Info
from gql_memory.api.raw import RawDialogue
from gql_memory.api.semantic import AsOfArg, Episode, Insight
from gql_memory.memory import search

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
    description="A hybrid-search hit with its explanation: finalScore = (fusedScore + "
    "graphBoost) x (1 + min(sessionBoost + causalBoost, 0.20))."
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
    graph_boost: float = strawberry.field(
        description="What a one-hop graph neighbour among the best fused hits (10 by "
        "default) lent: GQL_MEMORY_GRAPH_PROPAGATION (default 0.25) x that neighbour's "
        "fusedScore, the largest such loan. Neighbours are joined by edges between memory "
        "nodes (NEXT between consecutive turns, DERIVED_FROM from an insight to its "
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
        description="(fusedScore + graphBoost) x (1 + boost); hits sort by it."
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
    def from_domain(cls, hit: search.SearchHit) -> SearchHit:
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
    ) -> list[SearchHit]:
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
        )
        return [SearchHit.from_domain(h) for h in hits]
