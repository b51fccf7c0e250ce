"""--merge: which records of a file the namespace already holds, by their natural keys.

A record stands for a row of the namespace when the columns of one of its kind's MERGE_KEYS
are equal (docs/interchange.md, merge keys); rows this import added do not count, so a file's
two equal records stay two rows, and importing a file twice adds nothing the second time.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.memory.interchange.format import Kind, Record
from gql_memory.memory.interchange.ids import IdMap

# A row the namespace already holds, for --merge: the columns that say "the same row".
MERGE_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "raw": (("import_key",), ("session_id", "speaker", "content", "timestamp")),
    "insight": (("content", "created_at"),),
    "episode": (("query", "reflection", "created_at"),),
    "node": (("label", "name"),),
    # the second: the edge valid now between the same nodes (one at a time, by an index)
    "edge": (
        ("source_id", "target_id", "relation", "valid_from"),
        ("source_id", "target_id", "relation"),
    ),
    "working": (("session_id", "content", "created_at"),),
    "stale": (("session_id", "original_content", "archived_at"),),
    "consolidation": (("kind", "reason", "created_at"),),
}


async def held_rows(
    conn: AsyncConnection, ids: IdMap, namespace: str, kind: Kind, batch: list[Record]
) -> dict[int, int]:
    """--merge: the file's rows the namespace already holds (by natural key), old id ->
    the row's id. Rows this import added do not count: a file's two equal rows stay two."""
    table = kind.table
    matched: dict[int, int] = {}
    for key in MERGE_KEYS[kind.name]:
        candidates = [
            r
            for r in batch
            if r.values["id"] not in matched
            and all(r.values.get(c) is not None for c in key)
            and (len(key) != 3 or kind.name != "edge" or r.values["valid_to"] is None)
        ]
        if not candidates:
            continue
        columns = [table.c[c] for c in key]
        conditions: list[ColumnElement[bool]] = [
            table.c.namespace == namespace,
            tuple_(*columns).in_([tuple(r.values[c] for c in key) for r in candidates]),
        ]
        if kind.name == "edge" and len(key) == 3:
            conditions.append(table.c.valid_to.is_(None))
        found = (
            await conn.execute(
                select(table.c.id, *columns).where(and_(*conditions)).order_by(table.c.id)
            )
        ).all()
        # asked apart, not joined: Citus joins no distributed table to a temporary one
        added = await ids.added_by_this_import(kind, [row[0] for row in found])
        rows: dict[tuple[Any, ...], int] = {}
        for row in found:
            if row[0] not in added:
                rows.setdefault(tuple(row[1:]), row[0])
        for record in candidates:
            if (match := rows.get(tuple(record.values[c] for c in key))) is not None:
                matched[record.values["id"]] = match
    return matched
