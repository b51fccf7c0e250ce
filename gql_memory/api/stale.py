"""GraphQL for stale memory: the archive of items that left working memory, and its listing.

Archiving and restoring are working-memory mutations (api/working.py), which imports this
module; the enums both show (RefKind, ArchiveReason) are in api/working_enums.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry

from gql_memory.api.info import Info
from gql_memory.api.pagination import AfterArg, Connection, FirstArg, to_connection
from gql_memory.api.working_enums import ArchiveReason, RefKind
from gql_memory.memory.working import archive, working_memory

SessionFilterArg = Annotated[
    str | None,
    strawberry.argument(description='Only this session (default "default"); null: every session.'),
]


@strawberry.type(description="An archived working-memory item; stale memory keeps everything.")
class StaleMemoryItem:
    id: strawberry.ID = strawberry.field(description="Database id of the archive row.")
    session_id: str = strawberry.field(description="Session the item belonged to.")
    original_id: strawberry.ID | None = strawberry.field(
        description="Id the item had in working memory."
    )
    original_content: str = strawberry.field(description="The item's content, unchanged.")
    importance: float = strawberry.field(description="The item's importance when archived.")
    reason: ArchiveReason = strawberry.field(description="Why the item was archived.")
    archived_at: datetime = strawberry.field(description="When the item was archived.")
    ref_kind: RefKind | None = strawberry.field(
        description="Kind of memory the item referred to, if any."
    )
    ref_id: strawberry.ID | None = strawberry.field(
        description="Id of the memory the item referred to, if any."
    )

    @classmethod
    def from_domain(cls, item: archive.StaleMemoryItem) -> StaleMemoryItem:
        return cls(
            id=strawberry.ID(str(item.id)),
            session_id=item.session_id,
            original_id=strawberry.ID(str(item.original_id)) if item.original_id else None,
            original_content=item.original_content,
            importance=item.importance,
            reason=item.reason,
            archived_at=item.archived_at,
            ref_kind=working_memory.RefKind(item.ref_kind) if item.ref_kind else None,
            ref_id=strawberry.ID(str(item.ref_id)) if item.ref_id is not None else None,
        )


@strawberry.type(description="Queries of the stale memory layer.")
class StaleQueries:
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
