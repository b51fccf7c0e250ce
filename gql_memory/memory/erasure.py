"""Erasure on request: forget everything stored for one session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db import Database
from gql_memory.memory.autograph import forget_auto_nodes
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.sessions import lock_session
from gql_memory.memory.validation import require_id, require_session_id

SESSION_TABLES = ("working_memory", "stale_memory", "raw_dialogue")


async def forget_session(db: Database, namespace: str, session_id: str) -> int:
    """Delete the session's working memory, stale memory and raw dialogue; returns rows deleted.

    This is the one deliberate exception to "nothing is lost": the caller asked for erasure.
    Insights keep their content but lose their references to the erased turns. The automatic
    graph nodes of the erased turns go with them, and so do automatic entities that only they
    named; nodes a client made for a turn stay, detached (the foreign key clears their link).
    """
    session_id = require_session_id(session_id)
    params = {"ns": namespace, "sid": session_id}
    deleted = 0
    async with db.write() as conn:
        await lock_session(conn, namespace, session_id)
        # FOR UPDATE waits for any insight being added with one of these turns as a source
        # (it holds them FOR KEY SHARE), so the clean-up below sees that insight committed
        raw_ids = (
            (
                await conn.execute(
                    text(
                        "SELECT id FROM raw_dialogue WHERE namespace = :ns AND session_id = :sid "
                        "FOR UPDATE"
                    ),
                    params,
                )
            )
            .scalars()
            .all()
        )
        await forget_auto_nodes(conn, namespace, raw_ids=raw_ids)
        for table in SESSION_TABLES:
            result = await conn.execute(
                text(f"DELETE FROM {table} WHERE namespace = :ns AND session_id = :sid"), params
            )
            deleted += result.rowcount or 0
        await conn.execute(
            text(
                """
                UPDATE insights i
                SET source_ids = array(
                    SELECT s FROM unnest(i.source_ids) s WHERE s <> ALL(CAST(:ids AS bigint[])))
                WHERE i.namespace = :ns AND i.source_ids && CAST(:ids AS bigint[])
                """
            ),
            {"ns": namespace, "ids": list(raw_ids)},
        )
        await conn.execute(
            text("DELETE FROM session_state WHERE namespace = :ns AND session_id = :sid"), params
        )
        await publish(conn, MemoryEvent(EventKind.SESSION_FORGOTTEN, namespace, session_id))
    return deleted


async def delete_row(
    db: Database,
    table: str,
    namespace: str,
    row_id: Any,
    event: EventKind,
    before: Callable[[AsyncConnection, int], Awaitable[None]] | None = None,
) -> bool:
    """Erase one row of a namespace by id and report it; False when there was none.
    ``before`` runs first in the same transaction (e.g. to erase what stands for the row)."""
    row_id = require_id(row_id)
    async with db.write() as conn:
        if before is not None:
            await before(conn, row_id)
        result = await conn.execute(
            text(f"DELETE FROM {table} WHERE namespace = :ns AND id = :id"),
            {"ns": namespace, "id": row_id},
        )
        if result.rowcount:
            await publish(conn, MemoryEvent(event, namespace, ids=(row_id,)))
    return bool(result.rowcount)
