"""Memory events: what changed, published with NOTIFY inside the writing transaction.

PostgreSQL delivers a NOTIFY only when its transaction commits (and in commit order), so a
subscriber never hears of a write that was rolled back, and every server process that LISTENs
— other workers, other replicas — hears of every committed write. Payloads carry kinds and
ids, never content: NOTIFY payloads must stay under 8000 bytes, and a subscriber that wants
the content fetches it (through its own namespace's queries).

One channel (``EVENTS_CHANNEL``) carries every namespace, with the namespace in the payload.
A channel per namespace would make each server LISTEN/UNLISTEN as subscribers come and go,
squeeze arbitrary 255-character namespaces into 63-byte identifiers, and still not isolate
anything (channels are not access-controlled); filtering by namespace in the process that
fans events out is one dictionary lookup, and the isolation test covers it.
"""

from __future__ import annotations

import enum
import json
import os
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import EVENTS_CHANNEL, LIVE_EVENTS_OPTION, NOTIFY_PAYLOAD_MAX_BYTES

if TYPE_CHECKING:
    pass

PAYLOAD_VERSION = 1


class EventKind(enum.Enum):
    """What happened. Working-memory kinds carry the session they happened in."""

    ADDED = "ADDED"
    EVICTED = "EVICTED"
    ARCHIVED = "ARCHIVED"
    DECAYED = "DECAYED"
    RESTORED = "RESTORED"
    ACCESSED = "ACCESSED"
    CLEARED = "CLEARED"
    SESSION_FORGOTTEN = "SESSION_FORGOTTEN"
    DIALOGUE_STORED = "DIALOGUE_STORED"
    INSIGHT_ADDED = "INSIGHT_ADDED"
    INSIGHT_DELETED = "INSIGHT_DELETED"
    EPISODE_STORED = "EPISODE_STORED"
    EPISODE_DELETED = "EPISODE_DELETED"
    NODE_ADDED = "NODE_ADDED"  # created or updated (addNode is an upsert)
    NODE_DELETED = "NODE_DELETED"
    EDGE_ADDED = "EDGE_ADDED"  # created or updated
    # a fact closed with no successor (a superseded one is announced by its successor's add)
    INSIGHT_INVALIDATED = "INSIGHT_INVALIDATED"
    EDGE_INVALIDATED = "EDGE_INVALIDATED"
    # Not published by writes: a server emits it locally to its subscribers after its LISTEN
    # connection was lost and re-established, because events may have been missed meanwhile.
    RESYNC = "RESYNC"
    # Published by `keys revoke`, never delivered: every server closes the key's subscriptions
    # and forgets its cached verdict. Writes committed after the revocation are notified after
    # it (PostgreSQL keeps commit order), so none of them reaches a revoked subscriber.
    KEY_REVOKED = "KEY_REVOKED"


# The kinds that change a session's working memory (what workingMemoryChanged delivers).
WORKING_MEMORY_KINDS = frozenset(
    {
        EventKind.ADDED,
        EventKind.EVICTED,
        EventKind.ARCHIVED,
        EventKind.DECAYED,
        EventKind.RESTORED,
        EventKind.ACCESSED,
        EventKind.CLEARED,
        EventKind.SESSION_FORGOTTEN,
    }
)
# Archive reason (stale.ArchiveReason value) -> the event that reports it.
ARCHIVE_KINDS = {
    "LRU_EVICTION": EventKind.EVICTED,
    "MANUAL_ARCHIVE": EventKind.ARCHIVED,
    "DECAY_EVICTION": EventKind.DECAYED,
}
_ARCHIVE_REASONS = {kind: reason for reason, kind in ARCHIVE_KINDS.items()}

_origin: tuple[int, str] | None = None


def process_origin() -> str:
    """A short random id of this process (fresh after a fork), written into every event.

    It lets a server tell its own events from other workers' (metrics count evictions once,
    in the process that made them) without putting host names or pids into payloads.
    """
    global _origin
    pid = os.getpid()
    if _origin is None or _origin[0] != pid:
        _origin = (pid, uuid.uuid4().hex[:12])
    return _origin[1]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class MemoryEvent:
    """One change in a namespace.

    ``ids`` are the ids of the memories concerned (working-memory ids for the working-memory
    kinds, raw dialogue / insight / episode / node ids for the others; for EDGE_ADDED the
    edge, its source node and its target node). ``archived_ids`` runs
    parallel to ``ids`` for EVICTED / ARCHIVED / DECAYED (the stale-memory rows the items
    went to) and RESTORED (the stale-memory row the item came back from).
    """

    kind: EventKind
    namespace: str
    session_id: str | None = None
    ids: tuple[int, ...] = ()
    archived_ids: tuple[int, ...] = ()
    occurred_at: datetime = field(default_factory=_now)
    origin: str = field(default_factory=process_origin)

    @property
    def archive_reason(self) -> str | None:
        """The stale-memory reason for archive kinds (e.g. "LRU_EVICTION"), else None."""
        return _ARCHIVE_REASONS.get(self.kind)

    def to_payload(self) -> str:
        """Compact JSON for NOTIFY (kinds and ids only: no content ever leaves this way)."""
        data: dict[str, Any] = {
            "v": PAYLOAD_VERSION,
            "k": self.kind.value,
            "ns": self.namespace,
            "t": self.occurred_at.isoformat(),
            "o": self.origin,
            "ids": list(self.ids),
        }
        if self.session_id is not None:
            data["s"] = self.session_id
        if self.archived_ids:
            data["a"] = list(self.archived_ids)
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_payload(cls, payload: str) -> MemoryEvent:
        """Parse a payload; raises ValueError when it is not one of ours."""
        try:
            data = json.loads(payload)
            if data.get("v") != PAYLOAD_VERSION:
                raise ValueError(f"unknown event payload version {data.get('v')!r}")
            return cls(
                kind=EventKind(data["k"]),
                namespace=str(data["ns"]),
                session_id=data.get("s"),
                ids=tuple(int(i) for i in data.get("ids", ())),
                archived_ids=tuple(int(i) for i in data.get("a", ())),
                occurred_at=datetime.fromisoformat(data["t"]),
                origin=str(data.get("o", "")),
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"malformed event payload: {exc}") from exc

    def split(self, max_bytes: int = NOTIFY_PAYLOAD_MAX_BYTES) -> list[MemoryEvent]:
        """This event as one or more events whose payloads each fit in ``max_bytes``.

        Only a bulk write (thousands of ids) needs more than one; ids stay in order.
        """
        if len(self.to_payload().encode()) <= max_bytes or len(self.ids) <= 1:
            return [self]
        half = len(self.ids) // 2
        first = replace(self, ids=self.ids[:half], archived_ids=self.archived_ids[:half])
        rest = replace(self, ids=self.ids[half:], archived_ids=self.archived_ids[half:])
        return first.split(max_bytes) + rest.split(max_bytes)


def live_channel(conn: AsyncConnection) -> str | None:
    """The channel events of this connection go to, or None when live events are off
    (for statements that publish from inside the database, e.g. the one-statement add)."""
    sync = conn.sync_connection
    if sync is not None and not sync.get_execution_options().get(LIVE_EVENTS_OPTION, True):
        return None
    return EVENTS_CHANNEL


async def publish(conn: AsyncConnection, *events: MemoryEvent) -> None:
    """NOTIFY the events inside the caller's transaction: delivered only if it commits.

    One round trip for any number of events; order is kept (PostgreSQL delivers the
    notifications of a transaction in the order they were sent). Nothing is sent when the
    database was opened with live events switched off (``Settings.live_events``).
    """
    if live_channel(conn) is None:
        return
    payloads = [part.to_payload() for event in events for part in event.split()]
    if not payloads:
        return
    await conn.execute(
        text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p"),
        {"channel": EVENTS_CHANNEL, "payloads": payloads},
    )
