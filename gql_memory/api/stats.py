"""GraphQL for the counts of stored memories per layer: the `stats` query."""

from __future__ import annotations

import strawberry

from gql_memory.api.info import Info


@strawberry.type(description="Counts of stored memories in the caller's namespace.")
class Stats:
    raw_dialogue: int = strawberry.field(description="Raw dialogue turns.")
    working_memory: int = strawberry.field(description="Working-memory items (all sessions).")
    stale_memory: int = strawberry.field(description="Archived (stale) items.")
    insights: int = strawberry.field(description="L2 insights.")
    episodes: int = strawberry.field(description="Stored episodes.")
    nodes: int = strawberry.field(description="Graph nodes.")
    edges: int = strawberry.field(description="Graph edges.")
    sessions: int = strawberry.field(
        description="Sessions holding working memory, dialogue or archived items."
    )
    embeddings_waiting: int = strawberry.field(
        description="Raw turns, insights and episodes stored while the embedding provider was "
        "down, waiting for their vectors: the server embeds them in the background once the "
        "provider answers (`gql-memory reembed --missing` does it on demand). Until then only "
        "the text leg of search finds them."
    )


@strawberry.type(description="The stats query.")
class StatsQueries:
    @strawberry.field(description="Counts of stored memories per layer in your namespace.")
    async def stats(self, info: Info) -> Stats:
        stats = await info.context.memory.stats()
        return Stats(**vars(stats))
