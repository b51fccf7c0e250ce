"""The archive every path out of working memory goes through (LRU, decay, manual, clear): why
an item left, the stale item it became, and the one statement that moves rows there."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.errors import ValidationError
from gql_memory.memory.events import live_channel, process_origin

log = logging.getLogger(__name__)


class ArchiveReason(enum.Enum):
    """Why an item left working memory."""

    LRU_EVICTION = "LRU_EVICTION"
    MANUAL_ARCHIVE = "MANUAL_ARCHIVE"
    DECAY_EVICTION = "DECAY_EVICTION"


def require_reason(value: Any) -> ArchiveReason:
    if isinstance(value, ArchiveReason):
        return value
    try:
        return ArchiveReason(str(value))
    except ValueError as exc:
        allowed = ", ".join(r.value for r in ArchiveReason)
        raise ValidationError(f"reason must be one of {allowed}") from exc


@dataclass(frozen=True)
class StaleMemoryItem:
    """An archived working-memory item, kept with its original content and importance."""

    id: int
    session_id: str
    original_id: int | None
    original_content: str
    importance: float
    reason: ArchiveReason
    archived_at: datetime
    ref_kind: str | None = None
    ref_id: int | None = None
    provenance: dict[str, Any] | None = None

    @property
    def archived_turn_id(self) -> int | None:
        """The raw turn this item archives (``archive_turns``: no working-memory original,
        ref RAW); None for an item that left working memory, whatever it refers to."""
        if self.original_id is None and self.ref_kind == "RAW":
            return self.ref_id
        return None

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> StaleMemoryItem:
        m = row._mapping
        return cls(
            id=m["id"],
            session_id=m["session_id"],
            original_id=m["original_id"],
            original_content=m["original_content"],
            importance=m["importance"],
            reason=ArchiveReason(m["reason"]),
            archived_at=m["archived_at"],
            ref_kind=m["ref_kind"],
            ref_id=m["ref_id"],
            provenance=m["provenance"],
        )


async def archive_rows(
    conn: AsyncConnection, namespace: str, ids: list[int], reason: ArchiveReason
) -> list[StaleMemoryItem]:
    """Move working-memory rows to stale memory and report them, in one statement (the
    function of migration 0010 that every archive path goes through: LRU, decay, manual,
    clear)."""
    if not ids:
        return []
    rows = (
        await conn.execute(
            text(
                """
                SELECT * FROM gql_memory_archive(:namespace, :ids, :reason, :channel, :origin)
                ORDER BY id
                """
            ).columns(provenance=JSONB),
            {
                "namespace": namespace,
                "ids": ids,
                "reason": reason.value,
                "channel": live_channel(conn),
                "origin": process_origin(),
            },
        )
    ).all()
    archived = [StaleMemoryItem.from_row(r) for r in rows]
    if archived:
        log.info(
            "working memory %s archived to stale %s (%s)",
            [a.original_id for a in archived],
            [a.id for a in archived],
            reason.value,
            extra={
                "event": "working_memory_archive",
                "namespace": namespace,
                "reason": reason.value,
                "original_ids": [a.original_id for a in archived],
                "archived_ids": [a.id for a in archived],
            },
        )
    return archived
