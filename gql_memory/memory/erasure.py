"""Erasure on request: forget everything stored for one session."""

from __future__ import annotations

from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.validation import require_session_id
from gql_memory.memory.working import lock_session

SESSION_TABLES = ("working_memory", "stale_memory", "raw_dialogue")


async def forget_session(db: Database, namespace: str, session_id: str) -> int:
    """Delete the session's working memory, stale memory and raw dialogue; returns rows deleted.

    This is the one deliberate exception to "nothing is lost": the caller asked for erasure.
    """
    session_id = require_session_id(session_id)
    deleted = 0
    async with db.write() as conn:
        await lock_session(conn, namespace, session_id)
        for table in SESSION_TABLES:
            result = await conn.execute(
                text(f"DELETE FROM {table} WHERE namespace = :ns AND session_id = :sid"),
                {"ns": namespace, "sid": session_id},
            )
            deleted += result.rowcount or 0
        await publish(conn, MemoryEvent(EventKind.SESSION_FORGOTTEN, namespace, session_id))
    return deleted
