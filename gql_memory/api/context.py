"""GraphQL for token-budgeted context assembly (SPEC §3.9): the `context` query."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql_memory.api.info import Info
from gql_memory.api.search import ContextMinRelevanceArg, InterpretTimeArg, ReferenceTimeArg
from gql_memory.config import CONTEXT_DEFAULT_MAX_TOKENS, CONTEXT_MAX_TOKENS, CONTEXT_MIN_TOKENS
from gql_memory.memory.context import assembly as domain
from gql_memory.memory.context import packing

ContextSectionKind = packing.SectionKind  # registered with strawberry below
strawberry.enum(
    packing.SectionKind,
    name="ContextSectionKind",
    description="A section of an assembled context (in this order in the text).",
)
ContextItemKind = packing.ItemKind  # registered with strawberry below
strawberry.enum(
    packing.ItemKind,
    name="ContextItemKind",
    description="What an item of an assembled context is: a working-memory item, an "
    "insight, an episode, a raw dialogue turn or a graph fact (an edge).",
)

DEFAULT_INCLUDE = list(packing.SectionKind)


@strawberry.type(name="ContextItem", description="One line of the context, with why and cost.")
class ContextItem:
    kind: ContextItemKind = strawberry.field(description="What the item is.")
    id: strawberry.ID = strawberry.field(
        description="Id of the item in its layer (the edge id for a graph fact)."
    )
    content: str = strawberry.field(description="The line exactly as it appears in `text`.")
    tokens: int = strawberry.field(description="Its token cost, line break included.")
    reason: str = strawberry.field(
        description="Why it was chosen: attention, search ranks/scores/boosts, similarity "
        "and reward, or the hit a graph fact hangs off."
    )
    truncated: bool = strawberry.field(
        description="True when the item was cut to fit the budget (it ends in a marker)."
    )

    @classmethod
    def from_domain(cls, item: packing.Item) -> ContextItem:
        return cls(
            kind=item.kind,
            id=strawberry.ID(item.id),
            content=item.content,
            tokens=item.tokens,
            reason=item.reason,
            truncated=item.truncated,
        )


@strawberry.type(name="ContextSection", description="A section of the context.")
class ContextSection:
    kind: ContextSectionKind = strawberry.field(description="Which section.")
    header: str = strawberry.field(description="The section's header line in `text`.")
    reason: str = strawberry.field(
        description="What the section holds, how many candidates made it, and its share."
    )
    tokens: int = strawberry.field(description="Token cost of the header and all items.")
    items: list[ContextItem] = strawberry.field(description="The items, in priority order.")


@strawberry.type(
    name="Context",
    description="Context for an agent's next step, packed under a token budget: paste "
    "`text` into the prompt; `sections` explain every line.",
)
class AssembledContext:
    query: str = strawberry.field(description="The query the context was assembled for.")
    session_id: str = strawberry.field(description="The session whose working memory is used.")
    text: str = strawberry.field(description="The context, ready to paste (may be empty).")
    total_tokens: int = strawberry.field(
        description="Tokens of `text` (never more than maxTokens)."
    )
    max_tokens: int = strawberry.field(description="The budget asked for.")
    tokenizer: str = strawberry.field(description='How tokens were counted ("estimate").')
    sections: list[ContextSection] = strawberry.field(
        description="The non-empty sections, in text order."
    )
    notes: list[str] = strawberry.field(
        description="What could not be included and why (e.g. the embedding provider was "
        "unavailable, so search ran on full text only); empty normally."
    )
    below_relevance: int = strawberry.field(
        description="How many search hits and lessons were left out because their relevance "
        "was below minRelevance (a hit working memory refers to is not counted); a context "
        "that holds nothing else means the memory has nothing on the query."
    )
    min_relevance: float = strawberry.field(
        description="The relevance floor applied (the call's minRelevance, else the server's "
        "default)."
    )

    @classmethod
    def from_domain(cls, context: domain.Context) -> AssembledContext:
        return cls(
            query=context.query,
            session_id=context.session_id,
            text=context.text,
            total_tokens=context.total_tokens,
            max_tokens=context.max_tokens,
            tokenizer=context.tokenizer,
            notes=list(context.notes),
            below_relevance=context.below_relevance,
            min_relevance=context.min_relevance,
            sections=[
                ContextSection(
                    kind=s.kind,
                    header=s.header,
                    reason=s.reason,
                    tokens=s.tokens,
                    items=[ContextItem.from_domain(i) for i in s.items],
                )
                for s in context.sections
            ],
        )


@strawberry.type(description="Context assembly.")
class ContextQueries:
    @strawberry.field(
        description="The best context for the query within maxTokens: the session's working "
        "memory, hybrid search hits, lessons from similar episodes and graph facts around "
        "the top hits, each item with why it was chosen and its token cost."
    )
    async def context(
        self,
        info: Info,
        query: Annotated[str, strawberry.argument(description="What the agent is about to do.")],
        session_id: Annotated[
            str, strawberry.argument(description="Session whose working memory is included.")
        ] = "default",
        max_tokens: Annotated[
            int,
            strawberry.argument(
                description=f"Token budget ({CONTEXT_MIN_TOKENS}..{CONTEXT_MAX_TOKENS})."
            ),
        ] = CONTEXT_DEFAULT_MAX_TOKENS,
        include: Annotated[
            list[ContextSectionKind], strawberry.argument(description="Sections to include.")
        ] = DEFAULT_INCLUDE,  # noqa: B006 - never mutated
        as_of: Annotated[
            datetime | None,
            strawberry.argument(
                description="Search, episodes and graph facts as valid at this instant (with a "
                "timezone, not in the future); working memory stays the session's, as it is now."
            ),
        ] = None,
        interpret_time: InterpretTimeArg = None,
        reference_time: ReferenceTimeArg = None,
        min_relevance: ContextMinRelevanceArg = None,
    ) -> AssembledContext:
        assembled = await info.context.memory.context(
            query,
            session_id,
            max_tokens,
            include,
            as_of=as_of,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )
        return AssembledContext.from_domain(assembled)
