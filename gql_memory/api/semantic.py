"""GraphQL for the semantic layers: L2 insights and episode memory."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.json_values import json_object
from gql_memory.api.pagination import Connection, to_connection
from gql_memory.api.raw import RawDialogue
from gql_memory.memory import episodes, insights
from gql_memory.memory.insights import InsightInput as DomainInsightInput


@strawberry.enum(description="Why a fact was closed.")
class SupersessionReason(Enum):
    CALLER = strawberry.enum_value("caller", description="A caller superseded or invalidated it.")
    MERGED = strawberry.enum_value(
        "merged", description="Consolidation merged it, a duplicate, into another fact."
    )
    UPDATED = strawberry.enum_value(
        "updated",
        description="Consolidation found a newer value of the same subject and attribute.",
    )


IdArg = Annotated[strawberry.ID, strawberry.argument(description="Database id.")]
QueryArg = Annotated[str, strawberry.argument(description="Text to search for (non-empty).")]
AsOfArg = Annotated[
    datetime | None,
    strawberry.argument(
        description="See the facts valid at this instant (with a timezone, not in the future) "
        "instead of those valid now."
    ),
]
AtArg = Annotated[
    datetime | None,
    strawberry.argument(description="When it stopped holding (default: now; not in the future)."),
]
VALID_FROM = "When the fact began to hold (default: when it was stored)."
VALID_TO = "When it stopped holding (superseded or invalidated); null while it holds."
SUPERSEDED_BY = "Id of the {0} that superseded this one, if one did."
SUPERSEDES = "Ids of the {0}s this one superseded (closed when it was added)."
SUPERSEDES_INPUT = (
    "Ids of valid {0}s this one replaces: they are closed at its validFrom and linked to it, "
    "in the same transaction. Nothing is deleted; a closed one cannot be superseded again."
)
VALID_FROM_INPUT = (
    "When the fact began to hold, with a timezone (default: now; never in the future)."
)


@strawberry.type(description="A distilled insight (L2 memory), embedded for semantic search.")
class Insight:
    id: strawberry.ID = strawberry.field(description="Database id of the insight.")
    content: str = strawberry.field(description="The insight's text.")
    source_ids: list[strawberry.ID] = strawberry.field(
        description="Ids of the raw dialogue turns the insight was distilled from."
    )
    metadata: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    created_at: datetime = strawberry.field(description="When the insight was stored.")
    valid_from: datetime = strawberry.field(description=VALID_FROM)
    valid_to: datetime | None = strawberry.field(description=VALID_TO)
    superseded_by: strawberry.ID | None = strawberry.field(
        description=SUPERSEDED_BY.format("insight")
    )
    supersedes: list[strawberry.ID] = strawberry.field(description=SUPERSEDES.format("insight"))
    supersession_reason: SupersessionReason | None = strawberry.field(
        description="Why it was closed: CALLER (superseded or invalidated by a caller), MERGED "
        "(consolidation merged it, a duplicate, into supersededBy) or UPDATED (consolidation "
        "found a newer value of the same subject and attribute); null while it holds."
    )
    digest_of: str | None = strawberry.field(
        description="The conversation session this insight is the digest of (written by "
        "consolidation from the session's turns, its sources); null for other insights."
    )

    @strawberry.field(
        description="The embedding vector. Read from the database only when selected. Null while "
        "it waits: it was stored while the embedding provider was down, and is embedded in "
        "the background once the provider answers (`stats` counts the waiting rows); until "
        "then only the text leg of search finds it."
    )
    async def embedding(self, info: Info) -> list[float] | None:
        return await info.context.loaders.insight_embedding.load(int(self.id))

    @strawberry.field(
        description="Valid insights at least GQL_MEMORY_CONTRADICTION_SIMILARITY (default "
        "0.85) cosine-similar to this one, most similar first, at most 5: perhaps the same "
        "fact, changed. A hint, computed when selected: decide, and supersede with "
        "addInsight(input: {supersedes}), or let consolidate do it. The same text stored "
        "again is a duplicate, not listed here (consolidate merges it)."
    )
    async def possibly_contradicts(self, info: Info) -> list[PossibleContradiction]:
        found = await info.context.memory.insights.possible_contradictions(int(self.id))
        return [
            PossibleContradiction(insight=Insight.from_domain(c.insight), similarity=c.similarity)
            for c in found
        ]

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
            metadata=JSON(insight.metadata),
            created_at=insight.created_at,
            valid_from=insight.valid_from or insight.created_at,
            valid_to=insight.valid_to,
            superseded_by=_id(insight.superseded_by),
            supersedes=[strawberry.ID(str(i)) for i in insight.supersedes],
            supersession_reason=None
            if insight.supersession_reason is None
            else SupersessionReason(insight.supersession_reason),
            digest_of=insight.digest_of,
        )


def _id(value: int | None) -> strawberry.ID | None:
    return None if value is None else strawberry.ID(str(value))


@strawberry.type(description="A valid insight very similar to another: perhaps the same fact.")
class PossibleContradiction:
    insight: Insight = strawberry.field(description="The similar insight, valid now.")
    similarity: float = strawberry.field(description="Cosine similarity of the two (0..1).")


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
    valid_from: datetime = strawberry.field(description=VALID_FROM)
    valid_to: datetime | None = strawberry.field(description=VALID_TO)
    superseded_by: strawberry.ID | None = strawberry.field(
        description=SUPERSEDED_BY.format("episode")
    )
    supersedes: list[strawberry.ID] = strawberry.field(description=SUPERSEDES.format("episode"))

    @strawberry.field(
        description="The embedding of the query. Read from the database only when selected. "
        "Null while it waits: it was stored while the embedding provider was down, and is "
        "embedded in the background once the provider answers (`stats` counts the waiting "
        "rows); until then only the text leg of search finds it."
    )
    async def embedding(self, info: Info) -> list[float] | None:
        return await info.context.loaders.episode_embedding.load(int(self.id))

    @classmethod
    def from_domain(cls, episode: episodes.Episode) -> Episode:
        return cls(
            id=strawberry.ID(str(episode.id)),
            query=episode.query,
            reward=episode.reward,
            reflection=episode.reflection,
            created_at=episode.created_at,
            valid_from=episode.valid_from or episode.created_at,
            valid_to=episode.valid_to,
            superseded_by=_id(episode.superseded_by),
            supersedes=[strawberry.ID(str(i)) for i in episode.supersedes],
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
    supersedes: list[strawberry.ID] = strawberry.field(
        default_factory=list, description=SUPERSEDES_INPUT.format("insight")
    )
    valid_from: datetime | None = strawberry.field(default=None, description=VALID_FROM_INPUT)


@strawberry.input(description="An episode to store.")
class EpisodeInput:
    query: str = strawberry.field(description="What was attempted (non-empty).")
    reward: float = strawberry.field(description="Outcome, -1 .. 1.")
    reflection: str = strawberry.field(description="The lesson learned (non-empty).")
    supersedes: list[strawberry.ID] = strawberry.field(
        default_factory=list, description=SUPERSEDES_INPUT.format("episode")
    )
    valid_from: datetime | None = strawberry.field(default=None, description=VALID_FROM_INPUT)


@strawberry.type(description="Queries of the semantic layers (insights, episodes).")
class SemanticQueries:
    @strawberry.field(description="One insight, or null.")
    async def insight(self, info: Info, id: IdArg) -> Insight | None:
        found = await info.context.memory.insights.get(id)
        return Insight.from_domain(found) if found else None

    @strawberry.field(
        description="The insights valid now, newest first; with includeSuperseded all of them "
        "(the history)."
    )
    async def insights(
        self,
        info: Info,
        include_superseded: Annotated[
            bool,
            strawberry.argument(description="Also list superseded and invalidated insights."),
        ] = False,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
        ] = None,
        after: Annotated[
            str | None, strawberry.argument(description="Return items after this cursor.")
        ] = None,
    ) -> Connection[Insight]:
        page = await info.context.memory.insights.list(
            first=first, after=after, include_superseded=include_superseded
        )
        return to_connection(page, Insight)

    @strawberry.field(
        description="Insights valid now (or asOf) nearest to the query (cosine, HNSW index)."
    )
    async def insight_search(
        self,
        info: Info,
        query: QueryArg,
        top_k: Annotated[int, strawberry.argument(description="How many hits (1..100).")] = 5,
        as_of: AsOfArg = None,
    ) -> list[InsightHit]:
        hits = await info.context.memory.insights.search(query, top_k, as_of=as_of)
        return [InsightHit(insight=Insight.from_domain(h.insight), score=h.score) for h in hits]

    @strawberry.field(description="One episode, or null.")
    async def episode(self, info: Info, id: IdArg) -> Episode | None:
        found = await info.context.memory.episodes.get(id)
        return Episode.from_domain(found) if found else None

    @strawberry.field(
        description="Episodes valid now whose query is similar to this one, best first (top 3 "
        "by default)."
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
    @strawberry.mutation(
        description="Embed and store an insight; the insights it supersedes are closed "
        "atomically. Select possiblyContradicts to see valid insights it may replace."
    )
    async def add_insight(
        self,
        info: Info,
        input: Annotated[InsightInput, strawberry.argument(description="The insight.")],
    ) -> Insight:
        stored = await info.context.memory.insights.add_many(
            [
                DomainInsightInput(
                    input.content,
                    list(input.source_ids),
                    json_object(input.metadata),
                    list(input.supersedes),
                    input.valid_from,
                )
            ]
        )
        return Insight.from_domain(stored[0])

    @strawberry.mutation(
        description="Close an insight that no longer holds, with no successor (validTo = at). "
        "Nothing is deleted; searches of now stop returning it."
    )
    async def invalidate_insight(self, info: Info, id: IdArg, at: AtArg = None) -> Insight:
        closed = await info.context.memory.insights.invalidate(id, at)
        return Insight.from_domain(closed)

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
            input.query,
            input.reward,
            input.reflection,
            supersedes=list(input.supersedes),
            valid_from=input.valid_from,
        )
        return Episode.from_domain(stored)

    @strawberry.mutation(description="Erase an episode; false when there was none.")
    async def delete_episode(self, info: Info, id: IdArg) -> bool:
        return await info.context.memory.episodes.delete(id)
