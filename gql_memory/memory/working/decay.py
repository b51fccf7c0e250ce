"""Event-based decay of working memory (seed 002, ADR-003).

Each (namespace, session) has an event counter that every write event in the session
increments. An item's attention is ``base * decay_rate ** eventsElapsed + mentions *
mention_boost`` where base is its importance (or the extraction rule's attention) and
eventsElapsed counts events since the item was added or last accessed. On each event,
non-critical items whose raw attention fell below the delete threshold are archived with
reason DECAY_EVICTION; survivors report at least the floor. Wall-clock time never decays
anything: a session paused for a week resumes exactly where it was.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.memory.events import live_channel, process_origin
from gql_memory.memory.working.sessions import lock_and_count_events

log = logging.getLogger(__name__)

# Raw attention of working_memory row `w` given its session's counter `s.event_counter`.
# (The formula is the function gql_memory_raw_attention of migration 0010, which the planner
# inlines; the sweep in the database uses the same function.)
RAW_ATTENTION_SQL = (
    "gql_memory_raw_attention(coalesce(w.attention, w.importance), "
    "CAST(:decay_rate AS float8), coalesce(s.event_counter, 0) - w.last_event, "
    "w.mention_count, CAST(:mention_boost AS float8))"
)
ATTENTION_SQL = f"greatest(CAST(:attention_floor AS float8), {RAW_ATTENTION_SQL})"


def decay_rate(settings: Settings) -> float:
    """Attention kept per event: all of it when decay is switched off (``Settings.decay``)."""
    return settings.decay_rate if settings.decay else 1.0


def delete_threshold(settings: Settings) -> float:
    """Raw attention below which decay evicts; 0 (never: attention is >= 0) when decay is
    switched off."""
    return settings.decay_delete_threshold if settings.decay else 0.0


def decay_params(settings: Settings) -> dict[str, float]:
    """Bind parameters used by ATTENTION_SQL / RAW_ATTENTION_SQL."""
    return {
        "decay_rate": decay_rate(settings),
        "mention_boost": settings.mention_boost,
        "attention_floor": settings.attention_floor,
    }


def attention(
    base: float, events_elapsed: int, mentions: int, settings: Settings
) -> tuple[float, float]:
    """(raw, reported) attention in Python — the same formula as the SQL, for callers/tests."""
    raw = base * decay_rate(settings) ** max(events_elapsed, 0) + mentions * settings.mention_boost
    return raw, max(settings.attention_floor, raw)


async def sweep(
    conn: AsyncConnection, namespace: str, session_id: str, settings: Settings
) -> list[int]:
    """Archive (DECAY_EVICTION) the non-critical items of the session whose raw attention
    fell below the delete threshold; the ids they had. The caller holds the session's lock."""
    archived = await conn.execute(
        text(
            "SELECT original_id FROM gql_memory_sweep(:ns, :sid, :critical, :decay_rate, "
            ":mention_boost, :threshold, :channel, :origin) ORDER BY id"
        ),
        {
            "ns": namespace,
            "sid": session_id,
            "critical": settings.critical_importance,
            "decay_rate": decay_rate(settings),
            "mention_boost": settings.mention_boost,
            "threshold": delete_threshold(settings),
            "channel": live_channel(conn),
            "origin": process_origin(),
        },
    )
    decayed = list(archived.scalars())
    if decayed:
        log.info(
            "working memory %s archived to stale (DECAY_EVICTION, session %r)",
            decayed,
            session_id,
            extra={
                "event": "working_memory_decay",
                "namespace": namespace,
                "session_id": session_id,
                "reason": "DECAY_EVICTION",
                "original_ids": decayed,
            },
        )
    return decayed


async def session_event(
    conn: AsyncConnection, namespace: str, session_id: str, settings: Settings
) -> tuple[int, list[int]]:
    """One write event in a session: take the session's lock, advance the counter, then
    sweep; the new counter and the ids of the items the sweep archived."""
    counter = await lock_and_count_events(conn, namespace, session_id)
    return counter, await sweep(conn, namespace, session_id, settings)
