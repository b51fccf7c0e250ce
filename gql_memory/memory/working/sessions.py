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


async def lock_session(conn: AsyncConnection, namespace: str, session_id: str) -> None:
    """Serialize writers of one (namespace, session) until the transaction ends."""
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(gql_memory_session_lock_key(:ns, :sid))"),
        {"ns": namespace, "sid": session_id},
    )


async def lock_and_count_events(
    conn: AsyncConnection, namespace: str, session_id: str, count: int = 1
) -> int:
    """Take the session's lock and advance its event counter by ``count``, in one round trip
    (the function of migration 0010 every writer uses); returns the new counter value."""
    counter = await conn.scalar(
        text("SELECT gql_memory_count_event(:ns, :sid, :n)"),
        {"ns": namespace, "sid": session_id, "n": count},
    )
    assert counter is not None
    return int(counter)
