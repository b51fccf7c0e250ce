"""GraphQL for working memory: a session's bounded items, adds, accesses, and the moves to
stale memory (archive) and back (restore)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.stale import StaleMemoryItem
from gql_memory.api.working_enums import ArchiveReason, RefKind
from gql_memory.memory.working import working_memory as working


@strawberry.type(description="An item of a session's bounded working memory.")
class WorkingMemoryItem:
    id: strawberry.ID = strawberry.field(description="Database id of the item.")
    session_id: str = strawberry.field(description="Session the item belongs to.")
    content: str = strawberry.field(description="The remembered text.")
    importance: float = strawberry.field(
        description="0..1; items above the critical threshold (0.8) survive LRU eviction."
    )
    attention: float = strawberry.field(
        description="Attention now: base x 0.85^(session events since last touch) + 0.05 x "
        "mentions, at least 0.05 (event-based decay; pauses never decay)."
    )
    mention_count: int = strawberry.field(description="How often the item was accessed.")
    last_accessed: datetime = strawberry.field(description="Last access (LRU order key).")
    created_at: datetime = strawberry.field(description="When the item was added.")
    ref_kind: RefKind | None = strawberry.field(
        description="Kind of memory this item refers to, if any."
    )
    ref_id: strawberry.ID | None = strawberry.field(
        description="Id of the memory this item refers to, if any."
    )
    provenance: JSON | None = strawberry.field(
        description="Where the item came from (e.g. extraction rule, redaction applied)."
    )

    @classmethod
    def from_domain(cls, item: working.WorkingMemoryItem) -> WorkingMemoryItem:
        return cls(
            id=strawberry.ID(str(item.id)),
            session_id=item.session_id,
            content=item.content,
            importance=item.importance,
            attention=item.attention,
            mention_count=item.mention_count,
            last_accessed=item.last_accessed,
            created_at=item.created_at,
            ref_kind=item.ref_kind,
            ref_id=strawberry.ID(str(item.ref_id)) if item.ref_id is not None else None,
            provenance=JSON(item.provenance),
        )


@strawberry.type(description="Outcome of adding to working memory.")
class WorkingMemoryResult:
    added_id: strawberry.ID = strawberry.field(description="Id of the new working-memory item.")
    evicted_id: strawberry.ID | None = strawberry.field(
        description="Id of the working-memory item evicted to make room, if any."
    )
    archived_id: strawberry.ID | None = strawberry.field(
        description="Id of the stale-memory row the evicted item was archived to, if any."
    )
    current_count: int = strawberry.field(
        description="Items in the session's working memory after the add."
    )
    decayed_ids: list[strawberry.ID] = strawberry.field(
        description="Ids of items archived by event-based decay (DECAY_EVICTION) during the add."
    )

    @classmethod
    def from_domain(cls, result: working.WorkingMemoryResult) -> WorkingMemoryResult:
        def as_id(value: int | None) -> strawberry.ID | None:
            return strawberry.ID(str(value)) if value is not None else None

        return cls(
            added_id=strawberry.ID(str(result.added_id)),
            evicted_id=as_id(result.evicted_id),
            archived_id=as_id(result.archived_id),
            current_count=result.current_count,
            decayed_ids=[strawberry.ID(str(i)) for i in result.decayed_ids],
        )


@strawberry.input(description="An item to add to a session's working memory.")
class WorkingMemoryInput:
    content: str = strawberry.field(description="The text to keep in context (non-empty).")
    importance: float = strawberry.field(
        default=0.5, description="0..1; above the critical threshold it survives LRU eviction."
    )
    session_id: str = strawberry.field(default="default", description="Session to add to.")
    ref_kind: RefKind | None = strawberry.field(
        default=None, description="Kind of memory this item refers to (with refId)."
    )
    ref_id: strawberry.ID | None = strawberry.field(
        default=None, description="Id of the memory this item refers to (with refKind)."
    )


IdArg = Annotated[strawberry.ID, strawberry.argument(description="Database id.")]
SessionArg = Annotated[str, strawberry.argument(description='Session id (default "default").')]
WorkingMemoryArg = Annotated[
    WorkingMemoryInput, strawberry.argument(description="The item to add.")
]


@strawberry.type(description="Queries of the working memory layer.")
class WorkingQueries:
    @strawberry.field(description="The session's working memory, most recently accessed first.")
    async def working_memory(
        self, info: Info, session_id: SessionArg = "default"
    ) -> list[WorkingMemoryItem]:
        items = await info.context.memory.working.list(session_id)
        return [WorkingMemoryItem.from_domain(i) for i in items]

    @strawberry.field(description="One working-memory item, or null. Does not touch it.")
    async def working_memory_item(self, info: Info, id: IdArg) -> WorkingMemoryItem | None:
        item = await info.context.memory.working.get(id)
        return WorkingMemoryItem.from_domain(item) if item else None


@strawberry.type(description="Mutations of the working memory layer.")
class WorkingMutations:
    @strawberry.mutation(
        description="Add to working memory; evicts (and archives) the LRU item over capacity."
    )
    async def add_working_memory(self, info: Info, input: WorkingMemoryArg) -> WorkingMemoryResult:
        result = await info.context.memory.working.add(
            input.content,
            input.importance,
            session_id=input.session_id,
            ref_kind=input.ref_kind,
            ref_id=input.ref_id,
        )
        return WorkingMemoryResult.from_domain(result)

    @strawberry.mutation(description="Touch an item: last accessed = now, mention count + 1.")
    async def access_working_memory(self, info: Info, id: IdArg) -> WorkingMemoryItem:
        return WorkingMemoryItem.from_domain(await info.context.memory.working.access(id))

    @strawberry.mutation(description="Move a working-memory item to stale memory.")
    async def archive_working_memory(
        self,
        info: Info,
        id: IdArg,
        reason: Annotated[
            ArchiveReason, strawberry.argument(description="Reason recorded with the archive.")
        ] = ArchiveReason.MANUAL_ARCHIVE,
    ) -> StaleMemoryItem:
        archived = await info.context.memory.working.archive(id, reason)
        return StaleMemoryItem.from_domain(archived)

    @strawberry.mutation(
        description="Delete the session's working memory (critical items are archived first); "
        "returns the number of items deleted."
    )
    async def clear_working_memory(self, info: Info, session_id: SessionArg = "default") -> int:
        return await info.context.memory.working.clear(session_id)

    @strawberry.mutation(description="Move an archived item back into working memory (an add).")
    async def restore_stale_memory(self, info: Info, id: IdArg) -> WorkingMemoryResult:
        return WorkingMemoryResult.from_domain(await info.context.memory.stale.restore(id))
