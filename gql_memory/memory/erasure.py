"""Erasure on request: forget everything stored for one session, or one memory, with what
referred to it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import and_, delete, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import (
    edges,
    metadata,
    nodes,
    raw_dialogue,
    session_state,
    stale_memory,
    working_memory,
)
from gql_memory.memory.autograph import INSIGHT_LABEL, MENTIONS, SPOKEN_BY, TURN_LABEL
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.sessions import lock_session
from gql_memory.memory.validation import require_id, require_session_id

SESSION_TABLES = (working_memory, stale_memory, raw_dialogue)
# What refers to a row of a table, as (table, column), all within its namespace. The foreign
# keys have no ON DELETE action (migration 0013: Citus refuses SET NULL in a key that holds
# the distribution column), so erasing a row clears these first, in the same transaction.
REFERRERS = {
    "insights": (("nodes", "insight_id"), ("insights", "superseded_by")),
    "episodes": (("nodes", "episode_id"), ("episodes", "superseded_by")),
    "raw_dialogue": (("nodes", "raw_id"),),
}
# Insights keep their content when the turns they came from are erased, not the references.
FORGET_SOURCES_SQL = """
UPDATE insights i
SET source_ids = array(SELECT s FROM unnest(i.source_ids) s WHERE s <> ALL(CAST(:ids AS bigint[])))
WHERE i.namespace = :ns AND i.source_ids && CAST(:ids AS bigint[])
"""
# What the graph builds by itself carries this in its properties (see memory.autograph).
AUTOMATIC = {"auto": True}
# Erasure: the automatic nodes of erased memories, then automatic entities nothing links to.
FORGET_ORPHAN_ENTITIES_SQL = """
DELETE FROM nodes n
WHERE n.namespace = :ns AND n.label = 'Entity' AND n.properties @> '{"auto": true}'
  AND n.id = ANY(CAST(:entity_ids AS bigint[]))
  AND NOT EXISTS (SELECT 1 FROM edges e WHERE e.namespace = :ns
                  AND (e.source_id = n.id OR e.target_id = n.id))
"""
LINKED_ENTITIES_SQL = """
SELECT DISTINCT e.target_id FROM edges e
JOIN nodes n ON n.namespace = e.namespace AND n.id = e.source_id
WHERE e.namespace = :ns AND e.relation = ANY(CAST(:entity_relations AS text[]))
  AND ((n.label = 'Turn' AND n.raw_id = ANY(CAST(:raw_ids AS bigint[])))
       OR (n.label = 'Insight' AND n.insight_id = ANY(CAST(:insight_ids AS bigint[]))))
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
    erased = metadata.tables[table]
    async with db.write() as conn:
        if before is not None:
            await before(conn, row_id)
        await detach(conn, table, namespace, [row_id])
        result = await conn.execute(
            delete(erased).where(erased.c.namespace == namespace, erased.c.id == row_id)
        )
        if result.rowcount:
            await publish(conn, MemoryEvent(event, namespace, ids=(row_id,)))
    return bool(result.rowcount)


async def detach(conn: AsyncConnection, table: str, namespace: str, ids: Sequence[int]) -> None:
    """Clear every reference to the rows ``ids`` of ``table`` (insights, episodes,
    raw_dialogue, nodes), which the caller then erases in the same transaction.

    The rows are locked first: a writer about to refer to one of them (its foreign-key check
    takes a key-share lock) waits, then finds it erased, so no reference appears in between.
    """
    if not ids:
        return
    erased = metadata.tables[table]
    await conn.execute(
        select(erased.c.id)
        .where(erased.c.namespace == namespace, any_of(erased.c.id, ids))
        .with_for_update()
    )
    if table == "nodes":
        # A node's edges go with it (ON DELETE CASCADE); the facts they superseded stay,
        # detached.
        touching = edges.alias("e")
        edges_of_nodes = select(touching.c.id).where(
            touching.c.namespace == namespace,
            or_(any_of(touching.c.source_id, ids), any_of(touching.c.target_id, ids)),
        )
        await conn.execute(
            update(edges)
            .where(edges.c.namespace == namespace, edges.c.superseded_by.in_(edges_of_nodes))
            .values(superseded_by=None)
        )
        return
    for name, column in REFERRERS[table]:
        referrer = metadata.tables[name]
        await conn.execute(
            update(referrer)
            .where(referrer.c.namespace == namespace, any_of(referrer.c[column], ids))
            .values({column: None})
        )


async def forget_auto_nodes(
    conn: AsyncConnection,
    namespace: str,
    raw_ids: Sequence[int] = (),
    insight_ids: Sequence[int] = (),
) -> None:
    """Before memories are erased: their automatic nodes go (edges cascade), and so do the
    automatic entities that only they mentioned (names taken from erased text)."""
    params = {"ns": namespace, "raw_ids": list(raw_ids), "insight_ids": list(insight_ids)}
    linked = {**params, "entity_relations": [MENTIONS, SPOKEN_BY]}
    entities = (await conn.execute(text(LINKED_ENTITIES_SQL), linked)).scalars().all()
    standing_for_them = or_(
        and_(nodes.c.label == TURN_LABEL, any_of(nodes.c.raw_id, raw_ids)),
        and_(nodes.c.label == INSIGHT_LABEL, any_of(nodes.c.insight_id, insight_ids)),
    )
    auto_nodes = select(nodes.c.id).where(
        nodes.c.namespace == namespace, nodes.c.properties.contains(AUTOMATIC), standing_for_them
    )
    auto = (await conn.execute(auto_nodes)).scalars().all()
    await detach(conn, "nodes", namespace, auto)
    if auto:
        await conn.execute(
            delete(nodes).where(nodes.c.namespace == namespace, any_of(nodes.c.id, auto))
        )
    if entities:
        await conn.execute(
            text(FORGET_ORPHAN_ENTITIES_SQL), {"ns": namespace, "entity_ids": list(entities)}
        )
