"""The memory graph: labelled nodes (optionally tied to an insight, episode or raw turn) and
typed, weighted edges; breadth-first traversal in one recursive CTE."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
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

MAX_DEPTH = 5
MAX_NODE_KEY_BYTES = 2400
NODE_COLUMNS = "id, label, name, properties, insight_id, episode_id, raw_id, created_at"
EDGE_COLUMNS = "id, source_id, target_id, relation, weight, properties, created_at"
_NODE_FIELDS = tuple(NODE_COLUMNS.split(", "))
_EDGE_FIELDS = tuple(EDGE_COLUMNS.split(", "))


class Direction(enum.Enum):
    """Which edges a traversal follows from a node."""

    OUT = "OUT"
    IN = "IN"
    BOTH = "BOTH"


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
    def from_row(cls, row: Row[Any] | Any) -> Node:
        m = row._mapping
        return cls(*(m[k] for k in _NODE_FIELDS))

    @classmethod
    def from_columns(cls, row: Row[Any] | Any) -> Node:
        """A row of exactly NODE_COLUMNS, in order (positional: no name lookups)."""
        return cls(*row)


@dataclass(frozen=True)
class Edge:
    id: int
    source_id: int
    target_id: int
    relation: str
    weight: float
    properties: dict[str, Any] | None
    created_at: datetime

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> Edge:
        m = row._mapping
        return cls(*(m[k] for k in _EDGE_FIELDS))

    @classmethod
    def from_columns(cls, row: Row[Any] | Any) -> Edge:
        """A row of exactly EDGE_COLUMNS, in order (positional: no name lookups)."""
        return cls(*row)


@dataclass(frozen=True)
class Neighbor:
    """A node reached from the start, at its shortest distance, with one shortest path."""

    node: Node
    distance: int
    path: list[Node]
    edges: list[Edge]


@dataclass(frozen=True)
class GraphPath:
    nodes: list[Node]
    edges: list[Edge]

    @property
    def length(self) -> int:
        return len(self.edges)


NodeRef = int | str | tuple[str, str]

# Breadth-first search, one level per iteration. Each level row carries the nodes found at
# that distance with the node and edge they were reached through, and the set visited so
# far, so every node appears once, at its shortest distance, and cycles end the walk.
BFS_SQL = """
WITH RECURSIVE bfs(depth, nodes, parents, edge_ids, visited) AS (
    SELECT 0, ARRAY[CAST(:start AS bigint)], ARRAY[CAST(NULL AS bigint)],
           ARRAY[CAST(NULL AS bigint)], ARRAY[CAST(:start AS bigint)]
    UNION ALL
    SELECT b.depth + 1, step.nodes, step.parents, step.edge_ids, b.visited || step.nodes
    FROM bfs b
    CROSS JOIN LATERAL (
        SELECT array_agg(s.node ORDER BY s.node) AS nodes,
               array_agg(s.parent ORDER BY s.node) AS parents,
               array_agg(s.edge_id ORDER BY s.node) AS edge_ids
        FROM (
            SELECT DISTINCT ON (c.node) c.node, c.parent, c.edge_id
            FROM (
                SELECT e.target_id AS node, e.source_id AS parent, e.id AS edge_id
                FROM edges e
                WHERE :follow_out AND e.namespace = :ns AND e.source_id = ANY(b.nodes)
                  AND (CAST(:relation AS text) IS NULL OR e.relation = :relation)
                UNION ALL
                SELECT e.source_id, e.target_id, e.id
                FROM edges e
                WHERE :follow_in AND e.namespace = :ns AND e.target_id = ANY(b.nodes)
                  AND (CAST(:relation AS text) IS NULL OR e.relation = :relation)
            ) c
            -- an anti-join (hashable) rather than `<> ALL(visited)`, which is quadratic
            LEFT JOIN unnest(b.visited) AS seen(id) ON seen.id = c.node
            WHERE seen.id IS NULL
            ORDER BY c.node, c.edge_id
        ) s
    ) step
    WHERE b.depth < :max_depth AND step.nodes IS NOT NULL
      AND NOT (CAST(:target AS bigint) IS NOT NULL AND CAST(:target AS bigint) = ANY(b.visited))
)
SELECT depth, nodes, parents, edge_ids FROM bfs WHERE depth > 0
"""


def require_depth(value: Any, field: str = "depth") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEPTH:
        raise ValidationError(f"{field} must be an integer between 1 and {MAX_DEPTH}")
    return value


def require_direction(value: Any) -> Direction:
    try:
        return value if isinstance(value, Direction) else Direction(str(value))
    except ValueError as exc:
        raise ValidationError("direction must be OUT, IN or BOTH") from exc


MAX_EDGE_WEIGHT = 1_000_000.0


def require_weight(value: Any) -> float:
    """A finite weight in [0, 1e6]: search and traversal read it as a strength."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError("weight must be a finite number")
    if not 0.0 <= value <= MAX_EDGE_WEIGHT:
        raise ValidationError(f"weight must be between 0 and {MAX_EDGE_WEIGHT:.0f}")
    return float(value)


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


class Graph:
    """The graph of one namespace."""

    def __init__(self, db: Database, settings: Settings, namespace: str) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace

    # --- nodes ---------------------------------------------------------------------------

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
        async with self.db.write() as conn:
            return await self._upsert_node(
                conn, label, name, properties, insight_id, episode_id, raw_id
            )

    async def _upsert_node(
        self,
        conn: AsyncConnection,
        label: Any,
        name: Any,
        properties: Any = None,
        insight_id: Any = None,
        episode_id: Any = None,
        raw_id: Any = None,
    ) -> Node:
        label = require_text(label, "label", max_length=255)
        name = require_text(name, "name", max_length=MAX_NODE_KEY_BYTES)
        # (namespace, label, name) is a unique btree index, whose rows PostgreSQL caps at ~2.7 kB
        if len(f"{self.namespace}{label}{name}".encode()) > MAX_NODE_KEY_BYTES:
            raise ValidationError(
                f"label and name together must be at most {MAX_NODE_KEY_BYTES} bytes of UTF-8"
            )
        properties = require_json_object(properties, "properties")
        links = {
            "insight_id": ("insights", insight_id),
            "episode_id": ("episodes", episode_id),
            "raw_id": ("raw_dialogue", raw_id),
        }
        values: dict[str, int | None] = {}
        for column, (table, value) in links.items():
            values[column] = None if value is None else require_id(value, column)
            if values[column] is not None:
                exists = await conn.scalar(
                    text(f"SELECT 1 FROM {table} WHERE namespace = :ns AND id = :id"),
                    {"ns": self.namespace, "id": values[column]},
                )
                if not exists:
                    raise ValidationError(f"{column} {values[column]} does not exist")
        row = (
            await conn.execute(
                text(
                    f"""
                    INSERT INTO nodes (namespace, label, name, properties, insight_id,
                                       episode_id, raw_id)
                    VALUES (:ns, :label, :name, CAST(:properties AS jsonb), :insight_id,
                            :episode_id, :raw_id)
                    ON CONFLICT (namespace, label, name) DO UPDATE SET
                        properties = coalesce(EXCLUDED.properties, nodes.properties),
                        insight_id = coalesce(EXCLUDED.insight_id, nodes.insight_id),
                        episode_id = coalesce(EXCLUDED.episode_id, nodes.episode_id),
                        raw_id = coalesce(EXCLUDED.raw_id, nodes.raw_id)
                    RETURNING {NODE_COLUMNS}
                    """
                ).columns(properties=JSONB),
                {
                    "ns": self.namespace,
                    "label": label,
                    "name": name,
                    "properties": _json(properties),
                    **values,
                },
            )
        ).one()
        node = Node.from_row(row)
        await publish(conn, MemoryEvent(EventKind.NODE_ADDED, self.namespace, ids=(node.id,)))
        return node

    async def get_node(self, node_id: Any) -> Node | None:
        node_id = require_id(node_id)
        return (await self.get_nodes([node_id])).get(node_id)

    async def get_nodes(self, ids: Sequence[int]) -> dict[int, Node]:
        if not ids:
            return {}
        async with self.db.read() as conn:
            return await self._nodes(conn, ids)

    async def _nodes(self, conn: AsyncConnection, ids: Sequence[int]) -> dict[int, Node]:
        rows = (
            await conn.execute(
                text(
                    f"SELECT {NODE_COLUMNS} FROM nodes WHERE namespace = :ns AND id = ANY(:ids)"
                ).columns(properties=JSONB),
                {"ns": self.namespace, "ids": list(ids)},
            )
        ).all()
        return {row[0]: Node.from_columns(row) for row in rows}

    async def node_by_name(self, label: str, name: str) -> Node | None:
        label = require_text(label, "label")
        name = require_text(name, "name")
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    text(
                        f"SELECT {NODE_COLUMNS} FROM nodes "
                        "WHERE namespace = :ns AND label = :label AND name = :name"
                    ).columns(properties=JSONB),
                    {"ns": self.namespace, "label": label, "name": name},
                )
            ).first()
        return Node.from_row(row) if row else None

    async def list_nodes(
        self, *, label: str | None = None, first: int | None = None, after: str | None = None
    ) -> Page[Node]:
        """Newest first, optionally only one label."""
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        params: dict[str, Any] = {"ns": self.namespace, "n": limit + 1}
        where = "namespace = :ns"
        if label is not None:
            where += " AND label = :label"
            params["label"] = require_text(label, "label")
        if after is not None:
            params["moment"], params["after_id"] = decode_cursor(after)
            where += " AND (created_at, id) < (:moment, :after_id)"
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} "
                        "ORDER BY created_at DESC, id DESC LIMIT :n"
                    ).columns(properties=JSONB),
                    params,
                )
            ).all()
        items = [Node.from_row(r) for r in rows[:limit]]
        return Page(
            items=items,
            cursors=[encode_cursor(n.created_at, n.id) for n in items],
            has_next_page=len(rows) > limit,
            has_previous_page=after is not None,
        )

    async def delete_node(self, node_id: Any) -> bool:
        """Delete a node and (by cascade) its edges; False when there was none."""
        return await delete_row(self.db, "nodes", self.namespace, node_id, EventKind.NODE_DELETED)

    # --- edges ---------------------------------------------------------------------------

    async def add_edge(
        self,
        source: NodeRef,
        target: NodeRef,
        relation: str,
        weight: float = 1.0,
        properties: dict[str, Any] | None = None,
        *,
        create_missing: bool = False,
    ) -> Edge:
        """Connect two nodes (by id or (label, name)); idempotent on (source, target, relation).

        With ``create_missing``, nodes named by (label, name) that do not exist are created.
        """
        relation = require_text(relation, "relation", max_length=255)
        weight = require_weight(weight)
        properties = require_json_object(properties, "properties")
        async with self.db.write() as conn:
            source_id = await self._resolve(conn, source, "source", create_missing)
            target_id = await self._resolve(conn, target, "target", create_missing)
            if source_id == target_id:
                raise ValidationError("An edge cannot connect a node to itself (self-loop)")
            row = (
                await conn.execute(
                    text(
                        f"""
                        INSERT INTO edges (namespace, source_id, target_id, relation, weight,
                                           properties)
                        VALUES (:ns, :s, :t, :relation, :weight, CAST(:properties AS jsonb))
                        ON CONFLICT (namespace, source_id, target_id, relation) DO UPDATE SET
                            weight = EXCLUDED.weight,
                            properties = coalesce(EXCLUDED.properties, edges.properties)
                        RETURNING {EDGE_COLUMNS}
                        """
                    ).columns(properties=JSONB),
                    {
                        "ns": self.namespace,
                        "s": source_id,
                        "t": target_id,
                        "relation": relation,
                        "weight": weight,
                        "properties": _json(properties),
                    },
                )
            ).one()
            edge = Edge.from_row(row)
            await publish(
                conn,
                MemoryEvent(
                    EventKind.EDGE_ADDED,
                    self.namespace,
                    ids=(edge.id, edge.source_id, edge.target_id),
                ),
            )
        return edge

    async def _resolve(
        self, conn: AsyncConnection, ref: NodeRef, field: str, create_missing: bool
    ) -> int:
        if isinstance(ref, tuple):
            label = require_text(ref[0], f"{field}.label", max_length=255)
            name = require_text(ref[1], f"{field}.name", max_length=MAX_NODE_KEY_BYTES)
            found = await conn.scalar(
                text("SELECT id FROM nodes WHERE namespace = :ns AND label = :l AND name = :n"),
                {"ns": self.namespace, "l": label, "n": name},
            )
            if found is not None:
                return int(found)
            if not create_missing:
                raise ValidationError(
                    f"{field} node ({label}, {name}) does not exist (pass createMissing)"
                )
            return (await self._upsert_node(conn, label, name)).id
        node_id = require_id(ref, f"{field}Id")
        exists = await conn.scalar(
            text("SELECT 1 FROM nodes WHERE namespace = :ns AND id = :id"),
            {"ns": self.namespace, "id": node_id},
        )
        if not exists:
            raise NotFoundError(f"Node {node_id} not found")
        return node_id

    async def edges_of(self, node_ids: Sequence[int], limit: int = 100) -> dict[int, list[Edge]]:
        """Up to ``limit`` edges touching each node (either direction, oldest first), for
        batched loaders: a hub node with a million edges does not bring them all back."""
        if not node_ids:
            return {}
        async with self.db.read() as conn:
            rows = (
                await conn.execute(
                    text(
                        f"""
                        SELECT node_id, {EDGE_COLUMNS} FROM (
                            SELECT touching.node_id, e.*,
                                   row_number() OVER (PARTITION BY touching.node_id
                                                      ORDER BY e.id) AS position
                            FROM (
                                SELECT n.node_id, e.id AS edge_id
                                FROM unnest(CAST(:ids AS bigint[])) AS n(node_id)
                                JOIN edges e ON e.namespace = :ns AND e.source_id = n.node_id
                                UNION
                                SELECT n.node_id, e.id
                                FROM unnest(CAST(:ids AS bigint[])) AS n(node_id)
                                JOIN edges e ON e.namespace = :ns AND e.target_id = n.node_id
                            ) touching
                            JOIN edges e ON e.id = touching.edge_id
                        ) ranked
                        WHERE position <= :limit
                        ORDER BY node_id, id
                        """
                    ).columns(properties=JSONB),
                    {"ns": self.namespace, "ids": list(node_ids), "limit": limit},
                )
            ).all()
        result: dict[int, list[Edge]] = {i: [] for i in node_ids}
        for row in rows:
            result[row.node_id].append(Edge.from_row(row))
        return result

    # --- traversal -----------------------------------------------------------------------

    async def neighbors(
        self,
        node_id: Any,
        depth: int = 1,
        relation: str | None = None,
        direction: Direction | str = Direction.BOTH,
    ) -> list[Neighbor]:
        """Every node within ``depth`` hops, once, at its shortest distance, with a path."""
        start = require_id(node_id, "nodeId")
        depth = require_depth(depth)
        direction = require_direction(direction)
        if relation is not None:
            relation = require_text(relation, "relation")
        async with self.db.read() as conn:
            levels = await self._bfs(conn, start, depth, relation, direction, None)
            parents = _parents(levels)
            nodes = await self._nodes(conn, [start, *parents])
            edges = await self._edges(conn, [edge for _, edge in parents.values()])
        if start not in nodes:
            return []
        result = []
        for found_depth, found, _, _ in levels:
            for node in found:
                path_ids, edge_ids = _walk_back(parents, start, node)
                result.append(
                    Neighbor(
                        node=nodes[node],
                        distance=found_depth,
                        path=[nodes[i] for i in path_ids],
                        edges=[edges[e] for e in edge_ids],
                    )
                )
        return result

    async def path(self, from_id: Any, to_id: Any, max_depth: int = MAX_DEPTH) -> GraphPath | None:
        """A shortest path between two nodes (edges in either direction), or None."""
        start = require_id(from_id, "fromId")
        goal = require_id(to_id, "toId")
        max_depth = require_depth(max_depth, "maxDepth")
        async with self.db.read() as conn:
            if start == goal:
                nodes = await self._nodes(conn, [start])
                return GraphPath(nodes=[nodes[start]], edges=[]) if nodes else None
            levels = await self._bfs(conn, start, max_depth, None, Direction.BOTH, goal)
            parents = _parents(levels)
            if goal not in parents:
                return None
            path_ids, edge_ids = _walk_back(parents, start, goal)
            nodes = await self._nodes(conn, path_ids)
            edges = await self._edges(conn, edge_ids)
        return GraphPath(nodes=[nodes[i] for i in path_ids], edges=[edges[e] for e in edge_ids])

    async def _bfs(
        self,
        conn: AsyncConnection,
        start: int,
        depth: int,
        relation: str | None,
        direction: Direction,
        target: int | None,
    ) -> list[tuple[int, list[int], list[int], list[int]]]:
        rows = (
            await conn.execute(
                text(BFS_SQL),
                {
                    "start": start,
                    "ns": self.namespace,
                    "relation": relation,
                    "follow_out": direction in (Direction.OUT, Direction.BOTH),
                    "follow_in": direction in (Direction.IN, Direction.BOTH),
                    "max_depth": depth,
                    "target": target,
                },
            )
        ).all()
        return [(r.depth, r.nodes, r.parents, r.edge_ids) for r in rows]

    async def _edges(self, conn: AsyncConnection, ids: Sequence[int]) -> dict[int, Edge]:
        if not ids:
            return {}
        rows = (
            await conn.execute(
                text(
                    f"SELECT {EDGE_COLUMNS} FROM edges WHERE namespace = :ns AND id = ANY(:ids)"
                ).columns(properties=JSONB),
                {"ns": self.namespace, "ids": list(ids)},
            )
        ).all()
        return {row[0]: Edge.from_columns(row) for row in rows}


def _parents(
    levels: list[tuple[int, list[int], list[int], list[int]]],
) -> dict[int, tuple[int, int]]:
    """node -> (parent node, edge) for every node the search reached."""
    return {
        node: (parent, edge)
        for _, nodes, parents, edges in levels
        for node, parent, edge in zip(nodes, parents, edges, strict=True)
    }


def _walk_back(
    parents: dict[int, tuple[int, int]], start: int, node: int
) -> tuple[list[int], list[int]]:
    path, edge_ids = [node], []
    while node != start:
        node, edge = parents[node]
        path.append(node)
        edge_ids.append(edge)
    return path[::-1], edge_ids[::-1]
