"""Erasure on request of one session: everything stored for it, with what referred to it."""

from __future__ import annotations

from sqlalchemy import delete, select, text

from gql_memory.db import Database
from gql_memory.db.tables import raw_dialogue, session_state, stale_memory, working_memory
from gql_memory.memory.erasure import detach
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.graph.autograph import forget_auto_nodes
from gql_memory.memory.validation import require_session_id
from gql_memory.memory.working.sessions import lock_session

SESSION_TABLES = (working_memory, stale_memory, raw_dialogue)
# Insights keep their content when the turns they came from are erased, not the references.
FORGET_SOURCES_SQL = """
UPDATE insights i
SET source_ids = array(SELECT s FROM unnest(i.source_ids) s WHERE s <> ALL(CAST(:ids AS bigint[])))
WHERE i.namespace = :ns AND i.source_ids && CAST(:ids AS bigint[])
"""


async def forget_session(db: Database, namespace: str, session_id: str) -> int:
    """Delete the session's working memory, stale memory and raw dialogue; returns rows deleted.

    This is the one deliberate exception to "nothing is lost": the caller asked for erasure.
    Insights keep their content but lose their references to the erased turns. The automatic
    graph nodes of the erased turns go with them, and so do automatic entities that only they
    named; nodes a client made for a turn stay, detached (their link is cleared).
    """
    session_id = require_session_id(session_id)
    deleted = 0
    async with db.write() as conn:
        await lock_session(conn, namespace, session_id)
        # FOR UPDATE waits for any insight being added with one of these turns as a source
        # (it holds them FOR KEY SHARE), so the clean-up below sees that insight committed
        raw_ids = (
            (
                await conn.execute(
                    select(raw_dialogue.c.id)
                    .where(
                        raw_dialogue.c.namespace == namespace,
                        raw_dialogue.c.session_id == session_id,
                    )
                    .with_for_update()
                )
            )
            .scalars()
            .all()
        )
        await forget_auto_nodes(conn, namespace, raw_ids=raw_ids)
        await detach(conn, "raw_dialogue", namespace, raw_ids)
        for table in SESSION_TABLES:
            result = await conn.execute(
                delete(table).where(
                    table.c.namespace == namespace, table.c.session_id == session_id
                )
            )
            deleted += result.rowcount or 0
        await conn.execute(text(FORGET_SOURCES_SQL), {"ns": namespace, "ids": list(raw_ids)})
        await conn.execute(
            delete(session_state).where(
                session_state.c.namespace == namespace, session_state.c.session_id == session_id
            )
        )
        await publish(conn, MemoryEvent(EventKind.SESSION_FORGOTTEN, namespace, session_id))
    return deleted
