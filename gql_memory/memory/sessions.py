"""Per-session serialization and the session's event counter.

READ COMMITTED alone lets two concurrent adds both count `capacity` items and both skip
eviction (or evict the same row); a transaction-scoped advisory lock per (namespace, session)
makes insert-count-evict-archive atomic with respect to every other writer of that session.
Statements after the lock take fresh snapshots, so they see everything the previous holder
committed.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_LOCK = "pg_advisory_xact_lock(hashtextextended(:key, 0))"


def _key(namespace: str, session_id: str) -> str:
    return f"wm\x1f{namespace}\x1f{session_id}"


async def lock_session(conn: AsyncConnection, namespace: str, session_id: str) -> None:
    """Serialize writers of one (namespace, session) until the transaction ends."""
    await conn.execute(text(f"SELECT {_LOCK}"), {"key": _key(namespace, session_id)})


async def lock_and_count_events(
    conn: AsyncConnection, namespace: str, session_id: str, count: int = 1
) -> int:
    """Take the session's lock and advance its event counter by ``count``, in one round trip.

    The counter row comes out of the locking subquery, so the lock is held before the row is
    written; returns the new counter value.
    """
    counter = await conn.scalar(
        text(
            f"""
            INSERT INTO session_state (namespace, session_id, event_counter)
            SELECT :ns, :sid, :n FROM (SELECT {_LOCK}) AS locked
            ON CONFLICT (namespace, session_id)
            DO UPDATE SET event_counter = session_state.event_counter + :n
            RETURNING event_counter
            """
        ),
        {"ns": namespace, "sid": session_id, "n": count, "key": _key(namespace, session_id)},
    )
    assert counter is not None
    return int(counter)


async def lock_and_count_events_of(
    conn: AsyncConnection, namespace: str, counts: dict[str, int]
) -> None:
    """``lock_and_count_events`` for many sessions in one statement (a batch of turns).

    The locks are taken in session order, the same order every writer uses, so two batches
    touching the same sessions cannot deadlock.
    """
    sessions = sorted(counts)
    await conn.execute(
        text(
            f"""
            INSERT INTO session_state (namespace, session_id, event_counter)
            SELECT :ns, s.sid, s.n
            FROM (SELECT u.sid, u.n, {_LOCK.replace(":key", "u.key")} AS locked
                  FROM unnest(CAST(:sids AS text[]), CAST(:ns_ AS bigint[]),
                              CAST(:keys AS text[]))
                       WITH ORDINALITY AS u(sid, n, key, ord)
                  ORDER BY u.ord) s
            ON CONFLICT (namespace, session_id)
            DO UPDATE SET event_counter = session_state.event_counter
                                          + EXCLUDED.event_counter
            """
        ),
        {
            "ns": namespace,
            "sids": sessions,
            "ns_": [counts[s] for s in sessions],
            "keys": [_key(namespace, s) for s in sessions],
        },
    )
