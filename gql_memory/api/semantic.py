"""GraphQL for the semantic layers: L2 insights and episode memory."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.context import Info
from gql_memory.api.types import Connection, RawDialogue, to_connection
from gql_memory.memory import episodes, insights
from gql_memory.memory.insights import InsightInput as DomainInsightInput

IdArg = Annotated[strawberry.ID, strawberry.argument(description="Database id.")]
QueryArg = Annotated[str, strawberry.argument(description="Text to search for (non-empty).")]


@strawberry.type(description="A distilled insight (L2 memory), embedded for semantic search.")
class Insight:
    id: strawberry.ID = strawberry.field(description="Database id of the insight.")
    content: str = strawberry.field(description="The insight's text.")
    source_ids: list[strawberry.ID] = strawberry.field(
        description="Ids of the raw dialogue turns the insight was distilled from."
    )
    metadata: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    created_at: datetime = strawberry.field(description="When the insight was stored.")

    @strawberry.field(
        description="The embedding vector. Read from the database only when selected."
    )
    async def embedding(self, info: Info) -> list[float]:
        return await info.context.loaders.insight_embedding.load(int(self.id)) or []

    @strawberry.field(description="The raw dialogue turns the insight came from (batched).")
    async def sources(self, info: Info) -> list[RawDialogue]:
        turns = await info.context.loaders.raw_dialogue.load_many([int(i) for i in self.source_ids])
        return [RawDialogue.from_domain(t) for t in turns if t is not None]

    @classmethod
    def from_domain(cls, insight: insights.Insight) -> Insight:
        return cls(
            id=strawberry.ID(str(insight.id)),
            content=insight.content,
            source_ids=[strawberry.ID(str(s)) for s in insight.source_ids],
            metadata=insight.metadata,
            created_at=insight.created_at,
        )


@strawberry.type(description="An insight found by semantic search.")
class InsightHit:
    insight: Insight = strawberry.field(description="The insight.")
    score: float = strawberry.field(
        description="1 - cosine distance to the query (higher is closer)."
    )


@strawberry.type(description="An episode: a query that was tried, its reward and the lesson.")
class Episode:
    id: strawberry.ID = strawberry.field(description="Database id of the episode.")
    query: str = strawberry.field(description="What was attempted (embedded for similarity).")
    reward: float = strawberry.field(description="Outcome, -1 (failure) .. 1 (success).")
    reflection: str = strawberry.field(description="The lesson learned.")
    created_at: datetime = strawberry.field(description="When the episode was stored.")

    @strawberry.field(
        description="The embedding of the query. Read from the database only when selected."
    )
    async def embedding(self, info: Info) -> list[float]:
        return await info.context.loaders.episode_embedding.load(int(self.id)) or []

    @classmethod
    def from_domain(cls, episode: episodes.Episode) -> Episode:
        return cls(
            id=strawberry.ID(str(episode.id)),
            query=episode.query,
            reward=episode.reward,
            reflection=episode.reflection,
            created_at=episode.created_at,
        )


@strawberry.type(description="An episode similar to a query.")
class EpisodeHit:
    episode: Episode = strawberry.field(description="The episode.")
    similarity: float = strawberry.field(description="Cosine similarity to the query (-1..1).")


@strawberry.input(description="An insight to store.")
class InsightInput:
    content: str = strawberry.field(description="The insight's text (non-empty).")
    source_ids: list[strawberry.ID] = strawberry.field(
        default_factory=list, description="Raw dialogue ids it was distilled from (must exist)."
    )
    metadata: JSON | None = strawberry.field(default=None, description="Optional JSON object.")


@strawberry.input(description="An episode to store.")
class EpisodeInput:
    query: str = strawberry.field(description="What was attempted (non-empty).")
    reward: float = strawberry.field(description="Outcome, -1 .. 1.")
    reflection: str = strawberry.field(description="The lesson learned (non-empty).")


@strawberry.type(description="Queries of the semantic layers (insights, episodes).")
class SemanticQueries:
    @strawberry.field(description="One insight, or null.")
    async def insight(self, info: Info, id: IdArg) -> Insight | None:
        found = await info.context.memory.insights.get(id)
        return Insight.from_domain(found) if found else None

    @strawberry.field(description="All insights, newest first.")
    async def insights(
        self,
        info: Info,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
        ] = None,
        after: Annotated[
            str | None, strawberry.argument(description="Return items after this cursor.")
        ] = None,
    ) -> Connection[Insight]:
        page = await info.context.memory.insights.list(first=first, after=after)
        return to_connection(page, Insight)

    @strawberry.field(description="Insights nearest to the query (cosine, HNSW index).")
    async def insight_search(
        self,
        info: Info,
        query: QueryArg,
        top_k: Annotated[int, strawberry.argument(description="How many hits (1..100).")] = 5,
    ) -> list[InsightHit]:
        hits = await info.context.memory.insights.search(query, top_k)
        return [InsightHit(insight=Insight.from_domain(h.insight), score=h.score) for h in hits]

    @strawberry.field(description="One episode, or null.")
    async def episode(self, info: Info, id: IdArg) -> Episode | None:
        found = await info.context.memory.episodes.get(id)
        return Episode.from_domain(found) if found else None

    @strawberry.field(
        description="Episodes whose query is similar to this one, best first (top 3 by default)."
    )
    async def similar_episodes(
        self,
        info: Info,
        query: QueryArg,
        min_similarity: Annotated[
            float, strawberry.argument(description="Smallest cosine similarity to return.")
        ] = episodes.DEFAULT_MIN_SIMILARITY,
        top_k: Annotated[
            int, strawberry.argument(description="How many hits at most (1..100).")
        ] = episodes.DEFAULT_TOP_K,
    ) -> list[EpisodeHit]:
        hits = await info.context.memory.episodes.similar(query, min_similarity, top_k)
        return [
            EpisodeHit(episode=Episode.from_domain(h.episode), similarity=h.similarity)
            for h in hits
        ]


@strawberry.type(description="Mutations of the semantic layers (insights, episodes).")
class SemanticMutations:
    @strawberry.mutation(description="Embed and store an insight.")
    async def add_insight(
        self,
        info: Info,
        input: Annotated[InsightInput, strawberry.argument(description="The insight.")],
    ) -> Insight:
        stored = await info.context.memory.insights.add_many(
            [DomainInsightInput(input.content, list(input.source_ids), input.metadata)]
        )
        return Insight.from_domain(stored[0])

    @strawberry.mutation(description="Erase an insight; false when there was none.")
    async def delete_insight(self, info: Info, id: IdArg) -> bool:
        return await info.context.memory.insights.delete(id)

    @strawberry.mutation(description="Embed the query and store an episode.")
    async def store_episode(
        self,
        info: Info,
        input: Annotated[EpisodeInput, strawberry.argument(description="The episode.")],
    ) -> Episode:
        stored = await info.context.memory.episodes.store(
            input.query, input.reward, input.reflection
        )
        return Episode.from_domain(stored)

    @strawberry.mutation(description="Erase an episode; false when there was none.")
    async def delete_episode(self, info: Info, id: IdArg) -> bool:
        return await info.context.memory.episodes.delete(id)
