"""Erasure of rows: one memory deleted with every reference to it cleared first, in one
transaction (the session-wide erasure is session_erasure.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db import Database
from gql_memory.db.clauses import any_of
from gql_memory.db.tables import edges, metadata
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.validation import require_id

# What refers to a row of a table, as (table, column), all within its namespace. The foreign
# keys have no ON DELETE action (migration 0013: Citus refuses SET NULL in a key that holds
# the distribution column), so erasing a row clears these first, in the same transaction.
REFERRERS = {
    "insights": (("nodes", "insight_id"), ("insights", "superseded_by")),
    "episodes": (("nodes", "episode_id"), ("episodes", "superseded_by")),
    "raw_dialogue": (("nodes", "raw_id"),),
}


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
