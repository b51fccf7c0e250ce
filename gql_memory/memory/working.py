"""Working memory: a small, bounded, per-session context with LRU eviction (seeds 000, 001).

Capacity is enforced per (namespace, session). Eviction takes the least recently accessed
item whose importance is at most the critical threshold; when every item is critical, the
least recently accessed item regardless (hard capacity wins). Evicted items are archived to
stale memory in the same transaction, so nothing is ever lost.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.tables import working_memory
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.decay import (
    ATTENTION_SQL,
    decay_params,
    session_event,
    sweep,
)
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.sessions import lock_and_count_events, lock_session
from gql_memory.memory.stale import ArchiveReason, StaleMemoryItem, archive_rows, require_reason
from gql_memory.memory.validation import (
    require_id,
    require_importance,
    require_json_object,
    require_session_id,
    require_text,
)

DEFAULT_SESSION = "default"


class RefKind(enum.Enum):
    """The kind of memory a working-memory item refers to."""

    INSIGHT = "INSIGHT"
    EPISODE = "EPISODE"
    RAW = "RAW"
    NODE = "NODE"


@dataclass(frozen=True)
class WorkingMemoryResult:
    """Outcome of an add (seed 001): the new id, what was evicted and where it was archived."""

    added_id: int
    evicted_id: int | None
    archived_id: int | None
    current_count: int
    decayed_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class WorkingMemoryItem:
    """One item of a session's working memory."""

    id: int
    session_id: str
    content: str
    importance: float
    attention: float
    mention_count: int
    last_accessed: datetime
    created_at: datetime
    ref_kind: RefKind | None = None
    ref_id: int | None = None
    provenance: dict[str, Any] | None = None

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> WorkingMemoryItem:
        m = row._mapping
        return cls(
            id=m["id"],
            session_id=m["session_id"],
            content=m["content"],
            importance=m["importance"],
            attention=m["attention"],
            mention_count=m["mention_count"],
            last_accessed=m["last_accessed"],
            created_at=m["created_at"],
            ref_kind=RefKind(m["ref_kind"]) if m["ref_kind"] else None,
            ref_id=m["ref_id"],
            provenance=m["provenance"],
        )


def _require_ref(ref_kind: Any, ref_id: Any) -> tuple[str | None, int | None]:
    if ref_kind is None and ref_id is None:
        return None, None
    if ref_kind is None or ref_id is None:
        raise ValidationError("refKind and refId must be given together")
    try:
        kind = ref_kind if isinstance(ref_kind, RefKind) else RefKind(str(ref_kind))
    except ValueError as exc:
        raise ValidationError("refKind must be one of INSIGHT, EPISODE, RAW, NODE") from exc
    return kind.value, require_id(ref_id, "refId")


# Items with their attention computed from the session's event counter (queries never write).
SELECT_ITEMS_SQL = f"""
SELECT w.id, w.session_id, w.content, w.importance, {ATTENTION_SQL} AS attention,
       w.mention_count, w.last_accessed, w.created_at, w.ref_kind, w.ref_id, w.provenance
FROM working_memory w
LEFT JOIN session_state s ON s.namespace = w.namespace AND s.session_id = w.session_id
"""


class WorkingMemory:
    """The working memory of one namespace; every method takes the session it acts on."""

    def __init__(self, db: Database, settings: Settings, namespace: str) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace

    async def add(
        self,
        content: str,
        importance: float = 0.5,
        *,
        session_id: str = DEFAULT_SESSION,
        ref_kind: RefKind | str | None = None,
        ref_id: int | str | None = None,
        provenance: dict[str, Any] | None = None,
        attention: float | None = None,
    ) -> WorkingMemoryResult:
        """Insert an item and evict down to capacity, all in one serialized transaction.

        ``attention`` is the item's decay base; it defaults to the importance.
        """
        async with self.db.write() as conn:
            return await self.add_in(
                conn,
                content=content,
                importance=importance,
                session_id=session_id,
                ref_kind=ref_kind,
                ref_id=ref_id,
                provenance=provenance,
                attention=attention,
            )

    async def add_in(
        self,
        conn: AsyncConnection,
        *,
        content: Any,
        importance: Any = 0.5,
        session_id: Any = DEFAULT_SESSION,
        ref_kind: Any = None,
        ref_id: Any = None,
        provenance: Any = None,
        attention: Any = None,
        restored_from: int | None = None,
    ) -> WorkingMemoryResult:
        """``add`` inside a caller's transaction (restore and ingestion reuse it).

        ``attention`` is the decay base (default: the importance), e.g. an extraction rule's.
        ``restored_from`` (the stale-memory id) makes the add report RESTORED, not ADDED.
        """
        content = require_text(content, "Content")
        importance = require_importance(importance)
        if attention is not None:
            attention = require_importance(attention, "attention")
        session_id = require_session_id(session_id)
        kind, ref = _require_ref(ref_kind, ref_id)
        provenance = require_json_object(provenance, "provenance")

        counter, decayed = await session_event(conn, self.namespace, session_id, self.settings)
        added_id = await conn.scalar(
            working_memory.insert()
            .values(
                namespace=self.namespace,
                session_id=session_id,
                content=content,
                importance=importance,
                attention=importance if attention is None else attention,
                last_event=counter,
                # clock_timestamp(), not now(): strict LRU order even within one transaction.
                last_accessed=func.clock_timestamp(),
                created_at=func.clock_timestamp(),
                ref_kind=kind,
                ref_id=ref,
                provenance=provenance,
            )
            .returning(working_memory.c.id)
        )
        assert added_id is not None
        await publish(conn, self._added_event(session_id, added_id, restored_from))
        evicted, count = await self._evict_over_capacity(conn, session_id)
        first = evicted[0] if evicted else None
        return WorkingMemoryResult(
            added_id=added_id,
            evicted_id=first.original_id if first else None,
            archived_id=first.id if first else None,
            current_count=count,
            decayed_ids=tuple(item.original_id for item in decayed if item.original_id),
        )

    def _added_event(
        self, session_id: str, added_id: int, restored_from: int | None
    ) -> MemoryEvent:
        if restored_from is None:
            return MemoryEvent(EventKind.ADDED, self.namespace, session_id, (added_id,))
        return MemoryEvent(
            EventKind.RESTORED, self.namespace, session_id, (added_id,), (restored_from,)
        )

    async def _evict_over_capacity(
        self, conn: AsyncConnection, session_id: str
    ) -> tuple[list[StaleMemoryItem], int]:
        """Archive the excess: least recent non-critical first, then least recent critical."""
        rows = (
            await conn.execute(
                text(
                    """
                    SELECT id, count(*) OVER () AS total
                    FROM working_memory
                    WHERE namespace = :namespace AND session_id = :session_id
                    ORDER BY (importance > :critical), last_accessed, id
                    """
                ),
                {
                    "namespace": self.namespace,
                    "session_id": session_id,
                    "critical": self.settings.critical_importance,
                },
            )
        ).all()
        total = rows[0].total if rows else 0
        excess = max(0, total - self.settings.working_memory_capacity)
        victims = [r.id for r in rows[:excess]]
        archived = await archive_rows(conn, self.namespace, victims, ArchiveReason.LRU_EVICTION)
        by_original = {item.original_id: item for item in archived}
        # every victim was moved: writers of the session hold its lock
        return [by_original[v] for v in victims if v in by_original], total - excess

    async def list(self, session_id: str = DEFAULT_SESSION) -> list[WorkingMemoryItem]:
        """All items of the session, most recently accessed first."""
        session_id = require_session_id(session_id)
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        SELECT_ITEMS_SQL + "WHERE w.namespace = :ns AND w.session_id = :sid "
                        "ORDER BY w.last_accessed DESC, w.id DESC"
                    ).columns(provenance=JSONB),
                    {"ns": self.namespace, "sid": session_id, **decay_params(self.settings)},
                )
            ).all()
        return [WorkingMemoryItem.from_row(r) for r in rows]

    async def get(self, item_id: Any) -> WorkingMemoryItem | None:
        """The item, or None. Reading never touches last_accessed (use ``access``)."""
        item_id = require_id(item_id)
        async with self.db.read() as conn:
            row = await self._select_one(conn, item_id)
        return WorkingMemoryItem.from_row(row) if row else None

    async def _select_one(self, conn: AsyncConnection, item_id: int) -> Row[Any] | None:
        return (
            await conn.execute(
                text(SELECT_ITEMS_SQL + "WHERE w.namespace = :ns AND w.id = :id").columns(
                    provenance=JSONB
                ),
                {"ns": self.namespace, "id": item_id, **decay_params(self.settings)},
            )
        ).first()

    async def access(self, item_id: Any) -> WorkingMemoryItem:
        """True LRU touch: last_accessed = now, mention_count + 1, decay restarts from now.

        An access is a write event of the item's session (it advances the event counter).
        """
        item_id = require_id(item_id)
        async with self.db.write() as conn:
            session_id = await self._session_of(conn, item_id)
            counter = await lock_and_count_events(conn, self.namespace, session_id)
            result = await conn.execute(
                working_memory.update()
                .where(
                    working_memory.c.id == item_id,
                    working_memory.c.namespace == self.namespace,
                )
                .values(
                    last_accessed=func.clock_timestamp(),
                    mention_count=working_memory.c.mention_count + 1,
                    last_event=counter,
                )
            )
            if result.rowcount:
                await publish(
                    conn, MemoryEvent(EventKind.ACCESSED, self.namespace, session_id, (item_id,))
                )
            # Touch first, then sweep: the accessed item is fresh and survives.
            await sweep(conn, self.namespace, session_id, self.settings)
            # The item may have been evicted between the lookup and the lock.
            row = await self._select_one(conn, item_id) if result.rowcount else None
        if row is None:
            raise NotFoundError(f"Working memory item {item_id} not found")
        return WorkingMemoryItem.from_row(row)

    async def archive(
        self, item_id: Any, reason: ArchiveReason | str = ArchiveReason.MANUAL_ARCHIVE
    ) -> StaleMemoryItem:
        """Move one item to stale memory: a write event of its session (it takes the session's
        lock, so it never races an add's eviction, and advances the decay counter)."""
        item_id = require_id(item_id)
        reason = require_reason(reason)
        if reason is not ArchiveReason.MANUAL_ARCHIVE:
            # LRU_EVICTION and DECAY_EVICTION say what the service did; a client cannot claim them
            raise ValidationError(
                f"reason must be MANUAL_ARCHIVE: {reason.value} is recorded by the service itself"
            )
        async with self.db.write() as conn:
            session_id = await self._session_of(conn, item_id)
            await session_event(conn, self.namespace, session_id, self.settings)
            archived = await archive_rows(conn, self.namespace, [item_id], reason)
            if not archived:  # the event's sweep archived it (DECAY_EVICTION) just now
                raise NotFoundError(f"Working memory item {item_id} not found")
        return archived[0]

    async def _session_of(self, conn: AsyncConnection, item_id: int) -> str:
        session_id = await conn.scalar(
            select(working_memory.c.session_id).where(
                working_memory.c.id == item_id, working_memory.c.namespace == self.namespace
            )
        )
        if session_id is None:
            raise NotFoundError(f"Working memory item {item_id} not found")
        return str(session_id)

    async def clear(self, session_id: str = DEFAULT_SESSION) -> int:
        """Delete every item of the session; critical items are archived first. Returns count."""
        session_id = require_session_id(session_id)
        params = {
            "namespace": self.namespace,
            "session_id": session_id,
            "critical": self.settings.critical_importance,
        }
        async with self.db.write() as conn:
            await lock_session(conn, self.namespace, session_id)
            critical = (
                (
                    await conn.execute(
                        text(
                            "SELECT id FROM working_memory WHERE namespace = :namespace "
                            "AND session_id = :session_id AND importance > :critical"
                        ),
                        params,
                    )
                )
                .scalars()
                .all()
            )
            archived = await archive_rows(
                conn, self.namespace, list(critical), ArchiveReason.MANUAL_ARCHIVE
            )
            deleted = (
                (
                    await conn.execute(
                        text(
                            "DELETE FROM working_memory "
                            "WHERE namespace = :namespace AND session_id = :session_id "
                            "RETURNING id"
                        ),
                        params,
                    )
                )
                .scalars()
                .all()
            )
            await publish(
                conn, MemoryEvent(EventKind.CLEARED, self.namespace, session_id, tuple(deleted))
            )
        return len(archived) + len(deleted)
