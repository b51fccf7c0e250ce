"""Nodes of the memory graph: labelled, unique per (label, name) in a namespace, optionally
standing for an insight, an episode or a raw turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Table, and_, func, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of, jsonb
from gql_memory.db.tables import episodes, insights, nodes, raw_dialogue
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.erasure import delete_row
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.validation import (
    require_id,
    require_json_object,
    require_page_size,
    require_text,
)

# (namespace, label, name) is a unique btree index, whose rows PostgreSQL caps at ~2.7 kB
MAX_NODE_KEY_BYTES = 2400
NODE_COLUMNS = (
    nodes.c.id,
    nodes.c.label,
    nodes.c.name,
    nodes.c.properties,
    nodes.c.insight_id,
    nodes.c.episode_id,
    nodes.c.raw_id,
    nodes.c.created_at,
)
NODE_FIELDS = tuple(column.name for column in NODE_COLUMNS)
# The memory a node may stand for: its column, and the table of that memory.
LINKS: dict[str, Table] = {"insight_id": insights, "episode_id": episodes, "raw_id": raw_dialogue}

# A node named by id, or by (label, name).
NodeRef = int | str | tuple[str, str]


@dataclass(frozen=True)
class Node:
    id: int
    label: str
    name: str
    properties: dict[str, Any] | None
    insight_id: int | None
    episode_id: int | None
    raw_id: int | None
    created_at: datetime

    @classmethod
    def from_columns(cls, row: Row[Any] | Any) -> Node:
        """A row of exactly NODE_COLUMNS, in order (positional: no name lookups)."""
        return cls(*row)


async def upsert_node(
    conn: AsyncConnection,
    namespace: str,
    label: Any,
    name: Any,
    properties: Any = None,
    links: dict[str, Any] | None = None,
) -> Node:
    """Create the node, or update the one with this (label, name): idempotent. ``links``
    maps a column of LINKS to the id of the memory the node stands for."""
    label = require_text(label, "label", max_length=255)
    name = require_text(name, "name", max_length=MAX_NODE_KEY_BYTES)
    if len(f"{namespace}{label}{name}".encode()) > MAX_NODE_KEY_BYTES:
        raise ValidationError(
            f"label and name together must be at most {MAX_NODE_KEY_BYTES} bytes of UTF-8"
        )
    properties = require_json_object(properties, "properties")
    values: dict[str, int | None] = {}
    for column, table in LINKS.items():
        value = (links or {}).get(column)
        values[column] = None if value is None else require_id(value, column)
        if values[column] is not None:
            found = await conn.scalar(
                select(table.c.id).where(
                    table.c.namespace == namespace, table.c.id == values[column]
                )
            )
            if found is None:
                raise ValidationError(f"{column} {values[column]} does not exist")
    insert_node = insert(nodes).values(
        namespace=namespace, label=label, name=name, properties=jsonb(properties), **values
    )
    kept = ("properties", *LINKS)  # what an update leaves as it was when not given
    upsert = insert_node.on_conflict_do_update(
        index_elements=[nodes.c.namespace, nodes.c.label, nodes.c.name],
        set_={
            column: func.coalesce(insert_node.excluded[column], nodes.c[column]) for column in kept
        },
    ).returning(*NODE_COLUMNS)
    node = Node.from_columns((await conn.execute(upsert)).one())
    await publish(conn, MemoryEvent(EventKind.NODE_ADDED, namespace, ids=(node.id,)))
    return node


async def resolve_node(
    conn: AsyncConnection, namespace: str, ref: NodeRef, field: str, create_missing: bool
) -> int:
    """The id of the node ``ref`` names (by id, or by (label, name)); with
    ``create_missing``, a node named by (label, name) that does not exist is created."""
    if isinstance(ref, tuple):
        label = require_text(ref[0], f"{field}.label", max_length=255)
        name = require_text(ref[1], f"{field}.name", max_length=MAX_NODE_KEY_BYTES)
        found = await conn.scalar(
            select(nodes.c.id).where(
                nodes.c.namespace == namespace, nodes.c.label == label, nodes.c.name == name
            )
        )
        if found is not None:
            return int(found)
        if not create_missing:
            raise ValidationError(
                f"{field} node ({label}, {name}) does not exist (pass createMissing)"
            )
        return (await upsert_node(conn, namespace, label, name)).id
    node_id = require_id(ref, f"{field}Id")
    found = await conn.scalar(
        select(nodes.c.id).where(nodes.c.namespace == namespace, nodes.c.id == node_id)
    )
    if found is None:
        raise NotFoundError(f"Node {node_id} not found")
    return node_id


class GraphNodes:
    """The node operations of a namespace's :class:`~gql_memory.memory.graph.Graph`."""

    db: Database
    settings: Settings
    namespace: str

    async def add_node(
        self,
        label: str,
        name: str,
        properties: dict[str, Any] | None = None,
        *,
        insight_id: int | str | None = None,
        episode_id: int | str | None = None,
        raw_id: int | str | None = None,
    ) -> Node:
        """Create the node, or update the one with this (label, name): idempotent."""
        links = {"insight_id": insight_id, "episode_id": episode_id, "raw_id": raw_id}
        async with self.db.write() as conn:
            return await upsert_node(conn, self.namespace, label, name, properties, links)

    async def get_node(self, node_id: Any) -> Node | None:
        node_id = require_id(node_id)
        return (await self.get_nodes([node_id])).get(node_id)

    async def get_nodes(self, ids: Sequence[int]) -> dict[int, Node]:
        """Nodes by id (for batched loaders); missing ids are absent."""
        if not ids:
            return {}
        async with self.db.read() as conn:
            rows = await conn.execute(
                select(*NODE_COLUMNS).where(
                    nodes.c.namespace == self.namespace, any_of(nodes.c.id, ids)
                )
            )
            return {row[0]: Node.from_columns(row) for row in rows}

    async def node_by_name(self, label: str, name: str) -> Node | None:
        label = require_text(label, "label")
        name = require_text(name, "name")
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(*NODE_COLUMNS).where(
                        nodes.c.namespace == self.namespace,
                        nodes.c.label == label,
                        nodes.c.name == name,
                    )
                )
            ).first()
        return Node.from_columns(row) if row else None

    async def list_nodes(
        self, *, label: str | None = None, first: int | None = None, after: str | None = None
    ) -> Page[Node]:
        """Newest first, optionally only one label."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        conditions = [nodes.c.namespace == self.namespace]
        if label is not None:
            conditions.append(nodes.c.label == require_text(label, "label"))
        if after is not None:
            moment, row_id = decode_cursor(after)
            conditions.append(tuple_(nodes.c.created_at, nodes.c.id) < tuple_(moment, row_id))
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    select(*NODE_COLUMNS)
                    .where(and_(*conditions))
                    .order_by(nodes.c.created_at.desc(), nodes.c.id.desc())
                    .limit(limit + 1)
                )
            ).all()
        items = [Node.from_columns(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[encode_cursor(n.created_at, n.id) for n in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )

    async def delete_node(self, node_id: Any) -> bool:
        """Delete a node and (by cascade) its edges; False when there was none."""
        return await delete_row(self.db, "nodes", self.namespace, node_id, EventKind.NODE_DELETED)
