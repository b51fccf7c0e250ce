"""GraphQL object, input and enum types. Each converts from its domain dataclass."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

import strawberry
from strawberry.scalars import JSON

from gql_memory.memory import raw, stale, working
from gql_memory.memory.pagination import Page

ArchiveReason = stale.ArchiveReason  # registered with strawberry below
strawberry.enum(
    stale.ArchiveReason, name="ArchiveReason", description="Why an item left working memory."
)
RefKind = working.RefKind  # registered with strawberry below
strawberry.enum(
    working.RefKind,
    name="RefKind",
    description="The kind of memory a working-memory item refers to.",
)


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
            provenance=item.provenance,
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
    def from_domain(cls, item: stale.StaleMemoryItem) -> StaleMemoryItem:
        return cls(
            id=strawberry.ID(str(item.id)),
            session_id=item.session_id,
            original_id=strawberry.ID(str(item.original_id)) if item.original_id else None,
            original_content=item.original_content,
            importance=item.importance,
            reason=item.reason,
            archived_at=item.archived_at,
            ref_kind=working.RefKind(item.ref_kind) if item.ref_kind else None,
            ref_id=strawberry.ID(str(item.ref_id)) if item.ref_id is not None else None,
        )


@strawberry.type(description="One verbatim dialogue turn (L0 raw memory).")
class RawDialogue:
    id: strawberry.ID = strawberry.field(description="Database id of the turn.")
    session_id: str = strawberry.field(description="Conversation the turn belongs to.")
    speaker: str = strawberry.field(description='Who spoke: "user", "assistant" or custom.')
    content: str = strawberry.field(description="What was said, verbatim.")
    metadata: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    timestamp: datetime = strawberry.field(description="When the turn happened (UTC).")

    @classmethod
    def from_domain(cls, turn: raw.RawDialogue) -> RawDialogue:
        return cls(
            id=strawberry.ID(str(turn.id)),
            session_id=turn.session_id,
            speaker=turn.speaker,
            content=turn.content,
            metadata=turn.metadata,
            timestamp=turn.timestamp,
        )


@strawberry.type(description="Counts of stored memories in the caller's namespace.")
class Stats:
    raw_dialogue: int = strawberry.field(description="Raw dialogue turns.")
    working_memory: int = strawberry.field(description="Working-memory items (all sessions).")
    stale_memory: int = strawberry.field(description="Archived (stale) items.")
    insights: int = strawberry.field(description="L2 insights.")
    episodes: int = strawberry.field(description="Stored episodes.")
    nodes: int = strawberry.field(description="Graph nodes.")
    edges: int = strawberry.field(description="Graph edges.")
    sessions: int = strawberry.field(description="Sessions with working memory or dialogue.")


# --- pagination --------------------------------------------------------------------------

T = TypeVar("T")


@strawberry.type(description="Where a page of a connection sits in the whole list.")
class PageInfo:
    has_next_page: bool = strawberry.field(description="More items follow this page.")
    has_previous_page: bool = strawberry.field(description="This page was asked for `after` one.")
    start_cursor: str | None = strawberry.field(description="Cursor of the first item.")
    end_cursor: str | None = strawberry.field(
        description="Cursor of the last item; pass it as `after` for the next page."
    )


@strawberry.type(description="An item of a page, with the cursor that points at it.")
class Edge(Generic[T]):
    node: T = strawberry.field(description="The item.")
    cursor: str = strawberry.field(description="Opaque cursor of this item.")


@strawberry.type(description="A page of a newest-first list (Relay-style connection).")
class Connection(Generic[T]):
    edges: list[Edge[T]] = strawberry.field(description="The items of this page.")
    page_info: PageInfo = strawberry.field(description="Pagination state.")


def to_connection(page: Page[Any], convert: Any) -> Connection[Any]:
    """Wrap a domain page, converting each item with ``convert.from_domain``."""
    return Connection(
        edges=[
            Edge(node=convert.from_domain(item), cursor=cursor)  # type: ignore[attr-defined]
            for item, cursor in zip(page.items, page.cursors, strict=True)
        ],
        page_info=PageInfo(
            has_next_page=page.has_next_page,
            has_previous_page=page.has_previous_page,
            start_cursor=page.start_cursor,
            end_cursor=page.end_cursor,
        ),
    )


# --- inputs ------------------------------------------------------------------------------


@strawberry.input(description="A dialogue turn to store.")
class RawDialogueInput:
    session_id: str = strawberry.field(description="Conversation id (required, non-empty).")
    speaker: str = strawberry.field(description='Who spoke: "user", "assistant" or custom.')
    content: str = strawberry.field(description="What was said; stored verbatim, no size limit.")
    metadata: JSON | None = strawberry.field(
        default=None, description="Optional JSON object stored with the turn."
    )
    timestamp: datetime | None = strawberry.field(
        default=None, description="When the turn happened (default: now); for imports."
    )

    def to_domain(self) -> raw.RawDialogueInput:
        return raw.RawDialogueInput(
            session_id=self.session_id,
            speaker=self.speaker,
            content=self.content,
            metadata=self.metadata,
            timestamp=self.timestamp,
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
