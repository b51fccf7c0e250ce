"""Mutation resolvers: thin wrappers over gql_memory.memory. Every mutation is one transaction."""

from __future__ import annotations

from typing import Annotated

import strawberry

from gql_memory.api.context import Info
from gql_memory.api.types import (
    ArchiveReason,
    RawDialogue,
    RawDialogueInput,
    StaleMemoryItem,
    WorkingMemoryInput,
    WorkingMemoryItem,
    WorkingMemoryResult,
)
from gql_memory.memory.stale import ArchiveReason as DomainArchiveReason

IdArg = Annotated[strawberry.ID, strawberry.argument(description="Database id.")]
SessionArg = Annotated[str, strawberry.argument(description='Session id (default "default").')]
TurnArg = Annotated[RawDialogueInput, strawberry.argument(description="The turn to store.")]
TurnsArg = Annotated[
    list[RawDialogueInput], strawberry.argument(description="The turns, in order (1..10000).")
]
WorkingMemoryArg = Annotated[
    WorkingMemoryInput, strawberry.argument(description="The item to add.")
]


@strawberry.type(description="Mutations of the dialogue and working-memory layers.")
class MemoryMutations:
    @strawberry.mutation(description="Store one dialogue turn verbatim.")
    async def store_raw_dialogue(self, info: Info, input: TurnArg) -> RawDialogue:
        turn = input.to_domain()
        stored = await info.context.memory.raw.store(
            turn.session_id, turn.speaker, turn.content, turn.metadata, turn.timestamp
        )
        return RawDialogue.from_domain(stored)

    @strawberry.mutation(description="Store many turns in one transaction (all or none).")
    async def store_raw_dialogue_batch(self, info: Info, input: TurnsArg) -> list[RawDialogue]:
        stored = await info.context.memory.raw.store_many([t.to_domain() for t in input])
        return [RawDialogue.from_domain(t) for t in stored]

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
        ] = DomainArchiveReason.MANUAL_ARCHIVE,
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

    @strawberry.mutation(
        description="Erase everything stored for a session (working, stale, raw dialogue); "
        "returns the number of rows deleted."
    )
    async def forget_session(self, info: Info, session_id: SessionArg = "default") -> int:
        return await info.context.memory.forget_session(session_id)
