"""Working memory: a small, bounded, per-session context with LRU eviction (seeds 000, 001).

Capacity is enforced per (namespace, session). Eviction takes the least recently accessed
item whose importance is at most the critical threshold; when every item is critical, the
least recently accessed item regardless (hard capacity wins). Evicted items are archived to
stale memory in the same transaction, so nothing is ever lost.
"""

from __future__ import annotations

import builtins
import enum
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, func, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import EVENTS_CHANNEL, Settings
from gql_memory.db import Database
from gql_memory.db.tables import working_memory
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.events import (
    EventKind,
    MemoryEvent,
    live_channel,
    process_origin,
    publish,
)
from gql_memory.memory.validation import (
    require_id,
    require_importance,
    require_json_object,
    require_session_id,
    require_text,
)
from gql_memory.memory.working.archive import (
    ArchiveReason,
    StaleMemoryItem,
    archive_rows,
    require_reason,
)
from gql_memory.memory.working.decay import (
    ATTENTION_SQL,
    decay_params,
    decay_rate,
    delete_threshold,
    session_event,
    sweep,
)
from gql_memory.memory.working.sessions import lock_and_count_events, lock_session

DEFAULT_SESSION = "default"

log = logging.getLogger(__name__)


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


# The one-statement add (migration 0010): lock and count, decay sweep, insert, LRU eviction
# with its archive, NOTIFY. Its arguments in order, with their SQL types (parameters are sent
# as text for provenance, so no JSON codec of the connection gets a say).
_ADD_ARGUMENTS = (
    ("ns", "text"),
    ("sid", "text"),
    ("content", "text"),
    ("importance", "float8"),
    ("attention", "float8"),
    ("ref_kind", "text"),
    ("ref_id", "bigint"),
    ("provenance", "jsonb"),
    ("restored_from", "bigint"),
    ("capacity", "int"),
    ("critical", "float8"),
    ("decay_rate", "float8"),
    ("mention_boost", "float8"),
    ("delete_threshold", "float8"),
    ("channel", "text"),
    ("origin", "text"),
)


def _add_sql(placeholders: list[str]) -> str:
    arguments = ", ".join(
        f"CAST(CAST({p} AS text) AS jsonb)" if name == "provenance" else f"CAST({p} AS {sql_type})"
        for (name, sql_type), p in zip(_ADD_ARGUMENTS, placeholders, strict=True)
    )
    return (
        "SELECT added_id, current_count, evicted_ids, evicted_archived_ids, decayed_ids "
        f"FROM gql_memory_add_working({arguments})"
    )


ADD_SQL_NAMED = _add_sql([f":{name}" for name, _ in _ADD_ARGUMENTS])
ADD_SQL_POSITIONAL = _add_sql([f"${i}" for i in range(1, len(_ADD_ARGUMENTS) + 1)])


def _result(
    row: Any, namespace: str, session_id: str, restored_from: int | None = None
) -> WorkingMemoryResult:
    """The add's result, logged (seed 000: every insert, eviction and archive, with ids and
    reason) in one INFO record: the new id, LRU evictions with the stale rows they went to,
    and the items decay archived (DECAY_EVICTION) on the way."""
    added_id, count, evicted, archived, decayed = row[0], row[1], row[2], row[3], row[4]
    if log.isEnabledFor(logging.INFO):
        log.info(
            "working memory %s %d (session %r, %d items); LRU_EVICTION %s -> stale %s; "
            "DECAY_EVICTION %s",
            "restored" if restored_from is not None else "added",
            added_id,
            session_id,
            count,
            list(evicted),
            list(archived),
            list(decayed),
            extra={
                "event": "working_memory_add",
                "namespace": namespace,
                "session_id": session_id,
                "added_id": added_id,
                "restored_from": restored_from,
                "evicted_ids": list(evicted),
                "archived_ids": list(archived),
                "decayed_ids": list(decayed),
            },
        )
    return WorkingMemoryResult(
        added_id=added_id,
        evicted_id=evicted[0] if evicted else None,
        archived_id=archived[0] if archived else None,
        current_count=count,
        decayed_ids=tuple(decayed),
    )


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

        ``attention`` is the item's decay base; it defaults to the importance. The whole add
        is one statement (a function of migration 0010) run in autocommit: one round trip.
        """
        item = self._item(content, importance, attention, session_id, ref_kind, ref_id, provenance)
        channel = EVENTS_CHANNEL if self.settings.live_events else None
        async with self.db.statement() as conn:
            row = await conn.fetchrow(
                ADD_SQL_POSITIONAL, *item.values(), None, *self._add_settings(channel).values()
            )
        assert row is not None
        return _result(row, self.namespace, item["sid"])

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
        item = self._item(content, importance, attention, session_id, ref_kind, ref_id, provenance)
        row = (
            await conn.execute(
                text(ADD_SQL_NAMED),
                {
                    **item,
                    "restored_from": restored_from,
                    **self._add_settings(live_channel(conn)),
                },
            )
        ).one()
        return _result(row, self.namespace, item["sid"], restored_from)

    def _item(
        self,
        content: Any,
        importance: Any,
        attention: Any,
        session_id: Any,
        ref_kind: Any,
        ref_id: Any,
        provenance: Any,
    ) -> dict[str, Any]:
        """The validated item as the add function's first arguments, in order (before
        restored_from)."""
        content = require_text(content, "Content")
        importance = require_importance(importance)
        if attention is not None:
            attention = require_importance(attention, "attention")
        session_id = require_session_id(session_id)
        kind, ref = _require_ref(ref_kind, ref_id)
        provenance = require_json_object(provenance, "provenance")
        return {
            "ns": self.namespace,
            "sid": session_id,
            "content": content,
            "importance": importance,
            "attention": attention,
            "ref_kind": kind,
            "ref_id": ref,
            "provenance": None if provenance is None else json.dumps(provenance),
        }

    def _add_settings(self, channel: str | None) -> dict[str, Any]:
        settings = self.settings
        return {
            "capacity": settings.working_memory_capacity,
            "critical": settings.critical_importance,
            "decay_rate": decay_rate(settings),
            "mention_boost": settings.mention_boost,
            "delete_threshold": delete_threshold(settings),
            "channel": channel,
            "origin": process_origin(),
        }

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

    async def list_all_sessions(self, limit: int) -> builtins.list[WorkingMemoryItem]:
        """Up to ``limit`` items of every session of the namespace, most recently accessed
        first, each with its session (seed 003's ``memory://working-memory`` without a
        session)."""
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        SELECT_ITEMS_SQL + "WHERE w.namespace = :ns "
                        "ORDER BY w.last_accessed DESC, w.id DESC LIMIT :limit"
                    ).columns(provenance=JSONB),
                    {"ns": self.namespace, "limit": limit, **decay_params(self.settings)},
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
                    # statement_timestamp(), not clock_timestamp(): Citus refuses a VOLATILE
                    # function in an UPDATE of a distributed table; this STABLE one it
                    # evaluates on the coordinator (and it is this statement's own time)
                    last_accessed=func.statement_timestamp(),
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
        in_session = (
            working_memory.c.namespace == self.namespace,
            working_memory.c.session_id == session_id,
        )
        async with self.db.write() as conn:
            await lock_session(conn, self.namespace, session_id)
            critical = await conn.scalars(
                select(working_memory.c.id).where(
                    *in_session, working_memory.c.importance > self.settings.critical_importance
                )
            )
            archived = await archive_rows(
                conn, self.namespace, list(critical), ArchiveReason.MANUAL_ARCHIVE
            )
            deleted = (
                await conn.scalars(
                    delete(working_memory).where(*in_session).returning(working_memory.c.id)
                )
            ).all()
            await publish(
                conn, MemoryEvent(EventKind.CLEARED, self.namespace, session_id, tuple(deleted))
            )
        log.info(
            "working memory session %r cleared: %s deleted (critical ones archived first)",
            session_id,
            list(deleted),
            extra={
                "event": "working_memory_clear",
                "namespace": self.namespace,
                "session_id": session_id,
                "deleted_ids": list(deleted),
            },
        )
        return len(archived) + len(deleted)
