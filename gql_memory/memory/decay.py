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

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.memory.sessions import lock_and_count_events, lock_and_count_events_of
from gql_memory.memory.stale import ArchiveReason, StaleMemoryItem, archive_rows

# Raw attention of working_memory row `w` given its session's counter `s.event_counter`.
RAW_ATTENTION_SQL = (
    "(coalesce(w.attention, w.importance) * power(CAST(:decay_rate AS float8), "
    "greatest(coalesce(s.event_counter, 0) - w.last_event, 0)) "
    "+ w.mention_count * CAST(:mention_boost AS float8))"
)
ATTENTION_SQL = f"greatest(CAST(:attention_floor AS float8), {RAW_ATTENTION_SQL})"


def decay_params(settings: Settings) -> dict[str, float]:
    """Bind parameters used by ATTENTION_SQL / RAW_ATTENTION_SQL."""
    return {
        "decay_rate": settings.decay_rate,
        "mention_boost": settings.mention_boost,
        "attention_floor": settings.attention_floor,
    }


def attention(
    base: float, events_elapsed: int, mentions: int, settings: Settings
) -> tuple[float, float]:
    """(raw, reported) attention in Python — the same formula as the SQL, for callers/tests."""
    raw = base * settings.decay_rate ** max(events_elapsed, 0) + mentions * settings.mention_boost
    return raw, max(settings.attention_floor, raw)


async def sweep(
    conn: AsyncConnection, namespace: str, session_id: str | list[str], settings: Settings
) -> list[StaleMemoryItem]:
    """Archive (DECAY_EVICTION) the non-critical items of the session(s) whose raw attention
    fell below the delete threshold."""
    sessions = [session_id] if isinstance(session_id, str) else session_id
    victims = (
        (
            await conn.execute(
                text(
                    f"""
                SELECT w.id FROM working_memory w
                LEFT JOIN session_state s
                  ON s.namespace = w.namespace AND s.session_id = w.session_id
                WHERE w.namespace = :ns AND w.session_id = ANY(:sids)
                  AND w.importance <= :critical
                  AND {RAW_ATTENTION_SQL} < :threshold
                """
                ),
                {
                    "ns": namespace,
                    "sids": sessions,
                    "critical": settings.critical_importance,
                    "threshold": settings.decay_delete_threshold,
                    **decay_params(settings),
                },
            )
        )
        .scalars()
        .all()
    )
    return await archive_rows(conn, namespace, list(victims), ArchiveReason.DECAY_EVICTION)


async def session_event(
    conn: AsyncConnection, namespace: str, session_id: str, settings: Settings, count: int = 1
) -> tuple[int, list[StaleMemoryItem]]:
    """One write event (or ``count``) in a session: take the session's lock, advance the
    counter, then sweep."""
    counter = await lock_and_count_events(conn, namespace, session_id, count)
    return counter, await sweep(conn, namespace, session_id, settings)


async def sessions_events(
    conn: AsyncConnection, namespace: str, counts: dict[str, int], settings: Settings
) -> list[StaleMemoryItem]:
    """Write events in many sessions at once (a batch of turns): lock, count, one sweep."""
    await lock_and_count_events_of(conn, namespace, counts)
    return await sweep(conn, namespace, sorted(counts), settings)
