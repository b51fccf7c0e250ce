"""Stale memory: the unlimited archive of everything that left working memory (seed 000 E6),
read, restored into working memory, and raw turns archived on request."""

from __future__ import annotations

import builtins
from typing import Any

from sqlalchemy import and_, select, text, tuple_
from sqlalchemy.dialects.postgresql import JSONB

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.tables import stale_memory
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.validation import (
    require_id,
    require_importance,
    require_page_size,
    require_session_id,
)
from gql_memory.memory.working.archive import ArchiveReason, StaleMemoryItem, require_reason
from gql_memory.memory.working.sessions import lock_session
from gql_memory.memory.working.working_memory import WorkingMemory, WorkingMemoryResult

# Archiving raw turns: each newest turn of the session that no stale item refers to yet
# becomes one (ref RAW); the transcript itself is never changed. Under the session's lock, so
# two concurrent calls never archive the same turn.
ARCHIVE_TURNS_SQL = """
INSERT INTO stale_memory (namespace, session_id, original_content, importance, reason,
                          ref_kind, ref_id)
SELECT r.namespace, r.session_id, r.speaker || ': ' || r.content, :importance,
       'MANUAL_ARCHIVE', 'RAW', r.id
FROM raw_dialogue r
WHERE r.namespace = :ns AND r.session_id = :sid
  AND NOT EXISTS (
      SELECT 1 FROM stale_memory s
      WHERE s.namespace = :ns AND s.session_id = :sid AND s.ref_kind = 'RAW' AND s.ref_id = r.id
        AND s.original_id IS NULL
  )
ORDER BY r."timestamp" DESC, r.id DESC
LIMIT CAST(:newest AS int)
RETURNING *
"""


class StaleMemory:
    """Read and restore archived items of one namespace."""

    def __init__(
        self, db: Database, settings: Settings, namespace: str, working: WorkingMemory
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self._working = working

    async def get(self, item_id: Any) -> StaleMemoryItem | None:
        item_id = require_id(item_id)
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(stale_memory).where(
                        stale_memory.c.id == item_id, stale_memory.c.namespace == self.namespace
                    )
                )
            ).first()
        return StaleMemoryItem.from_row(row) if row else None

    async def list(
        self,
        *,
        session_id: str | None = None,
        importance_min: float | None = None,
        reason: ArchiveReason | str | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> Page[StaleMemoryItem]:
        """Newest first, filtered by session, minimum importance and reason."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        conditions = [stale_memory.c.namespace == self.namespace]
        if session_id is not None:
            conditions.append(stale_memory.c.session_id == require_session_id(session_id))
        if importance_min is not None:
            conditions.append(
                stale_memory.c.importance >= require_importance(importance_min, "importanceMin")
            )
        if reason is not None:
            conditions.append(stale_memory.c.reason == require_reason(reason).value)
        if after is not None:
            moment, row_id = decode_cursor(after)
            conditions.append(
                tuple_(stale_memory.c.archived_at, stale_memory.c.id) < tuple_(moment, row_id)
            )
        query = (
            select(stale_memory)
            .where(and_(*conditions))
            .order_by(stale_memory.c.archived_at.desc(), stale_memory.c.id.desc())
            .limit(limit + 1)
        )
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        items = [StaleMemoryItem.from_row(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[encode_cursor(i.archived_at, i.id) for i in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )

    async def restore(self, item_id: Any) -> WorkingMemoryResult:
        """Move an archived item back into its session's working memory (an add, may evict)."""
        item_id = require_id(item_id)
        async with self.db.write() as conn:
            row = (
                await conn.execute(
                    stale_memory.delete()
                    .where(stale_memory.c.id == item_id, stale_memory.c.namespace == self.namespace)
                    .returning(*stale_memory.c)
                )
            ).first()
            if row is None:
                raise NotFoundError(f"Stale memory item {item_id} not found")
            item = StaleMemoryItem.from_row(row)
            return await self._working.add_in(
                conn,
                content=item.original_content,
                importance=item.importance,
                session_id=item.session_id,
                ref_kind=item.ref_kind,
                ref_id=item.ref_id,
                provenance=item.provenance,
                restored_from=item.id,
            )

    async def archive_turns(
        self, session_id: str, newest: int | None = None, importance: float = 0.5
    ) -> builtins.list[StaleMemoryItem]:
        """Archive the session's raw turns that are not archived yet: the ``newest`` of them,
        or all. Each becomes a stale item (MANUAL_ARCHIVE, ref RAW and the turn's id, content
        'speaker: content'), newest first; the raw dialogue keeps the turn verbatim. For
        callers that treat a session's transcript as a list they can pop from (the OpenAI
        Agents session of gql_memory.integrations)."""
        session_id = require_session_id(session_id)
        if newest is not None and (isinstance(newest, bool) or not 1 <= newest <= 10**6):
            raise ValidationError("newest must be between 1 and 1000000")
        importance = require_importance(importance, "importance")
        async with self.db.write() as conn:
            await lock_session(conn, self.namespace, session_id)
            rows = (
                await conn.execute(
                    text(ARCHIVE_TURNS_SQL).columns(provenance=JSONB),
                    {
                        "ns": self.namespace,
                        "sid": session_id,
                        "newest": newest,
                        "importance": importance,
                    },
                )
            ).all()
        return sorted(
            (StaleMemoryItem.from_row(r) for r in rows), key=lambda i: i.ref_id or 0, reverse=True
        )
