"""Query resolvers: thin wrappers over gql_memory.memory. Queries never write."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql_memory.api.context import Info
from gql_memory.api.types import (
    ArchiveReason,
    Connection,
    RawDialogue,
    StaleMemoryItem,
    Stats,
    WorkingMemoryItem,
    to_connection,
)

SessionArg = Annotated[str, strawberry.argument(description='Session id (default "default").')]
FirstArg = Annotated[
    int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
]
AfterArg = Annotated[str | None, strawberry.argument(description="Return items after this cursor.")]
SessionFilterArg = Annotated[
    str | None,
    strawberry.argument(description='Only this session (default "default"); null: every session.'),
]
IdArg = Annotated[strawberry.ID, strawberry.argument(description="Database id.")]


@strawberry.type(description="Queries of the dialogue and working-memory layers.")
class MemoryQueries:
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

    @strawberry.field(description="Archived items, newest first, optionally filtered.")
    async def stale_memory(
        self,
        info: Info,
        session_id: SessionFilterArg = "default",
        importance_min: Annotated[
            float | None, strawberry.argument(description="Only items with importance >= this.")
        ] = None,
        reason: Annotated[
            ArchiveReason | None, strawberry.argument(description="Only this archive reason.")
        ] = None,
        first: FirstArg = None,
        after: AfterArg = None,
    ) -> Connection[StaleMemoryItem]:
        page = await info.context.memory.stale.list(
            session_id=session_id,
            importance_min=importance_min,
            reason=reason,
            first=first,
            after=after,
        )
        return to_connection(page, StaleMemoryItem)

    @strawberry.field(description="Raw dialogue turns, newest first, optionally filtered.")
    async def raw_dialogue(
        self,
        info: Info,
        session_id: SessionFilterArg = "default",
        from_: Annotated[
            datetime | None,
            strawberry.argument(name="from", description="Only turns at or after this time."),
        ] = None,
        to: Annotated[
            datetime | None, strawberry.argument(description="Only turns at or before this time.")
        ] = None,
        date_range: Annotated[
            str | None,
            strawberry.argument(
                description='Whole UTC days "YYYY-MM-DD:YYYY-MM-DD" (instead of from/to).'
            ),
        ] = None,
        speaker: Annotated[
            str | None, strawberry.argument(description="Only turns of this speaker.")
        ] = None,
        first: FirstArg = None,
        after: AfterArg = None,
    ) -> Connection[RawDialogue]:
        page = await info.context.memory.raw.list(
            session_id=session_id,
            from_=from_,
            to=to,
            date_range=date_range,
            speaker=speaker,
            first=first,
            after=after,
        )
        return to_connection(page, RawDialogue)

    @strawberry.field(description="Counts of stored memories per layer in your namespace.")
    async def stats(self, info: Info) -> Stats:
        stats = await info.context.memory.stats()
        return Stats(**vars(stats))
