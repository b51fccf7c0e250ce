"""The memory graph: labelled nodes (optionally tied to an insight, episode or raw turn) and
typed, weighted edges; breadth-first traversal in one recursive CTE."""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Row, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.erasure import delete_row
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.graph_sql import (
    EDGE_COLUMNS,
    EDGE_FIELDS,
    NEIGHBORS_SQL,
    NODE_COLUMNS,
    NODE_FIELDS,
    PATH_SQL,
    Direction,
)
from gql_memory.memory.pagination import Page, decode_cursor, encode_cursor
from gql_memory.memory.validation import (
    require_id,
    require_json_object,
    require_page_size,
    require_text,
)
from gql_memory.memory.validity import (
    close_facts,
    require_as_of,
    require_instant,
    require_supersedes,
    superseding,
)

MAX_DEPTH = 5
MAX_NODE_KEY_BYTES = 2400
_T = TypeVar("_T")


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
        return cls(*(m[k] for k in NODE_FIELDS))

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
    valid_from: datetime | None = None  # when the relation began to hold
    valid_to: datetime | None = None  # when it was superseded or invalidated; None while valid
    superseded_by: int | None = None

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> Edge:
        m = row._mapping
        return cls(*(m[k] for k in EDGE_FIELDS))

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
        supersedes: Sequence[int | str] = (),
        valid_from: datetime | None = None,
    ) -> Edge:
        """Connect two nodes (by id or (label, name)); idempotent on (source, target, relation)
        among the edges valid now.

        With ``create_missing``, nodes named by (label, name) that do not exist are created.
        The edges it ``supersedes`` are closed at its valid_from (default: now) and linked to
        it, atomically, before it is drawn (so it may replace an edge with its own key).
        """
        relation = require_text(relation, "relation", max_length=255)
        weight = require_weight(weight)
        properties = require_json_object(properties, "properties")
        replaced = require_supersedes(supersedes)
        if valid_from is not None:
            valid_from = require_instant(valid_from, "validFrom")
        async with self.db.write() as conn:
            source_id = await self._resolve(conn, source, "source", create_missing)
            target_id = await self._resolve(conn, target, "target", create_missing)
            if source_id == target_id:
                raise ValidationError("An edge cannot connect a node to itself (self-loop)")
            moment = valid_from or await conn.scalar(text("SELECT clock_timestamp()"))
            await close_facts(conn, "edges", self.namespace, replaced, moment)
            row = (
                await conn.execute(
                    text(
                        f"""
                        INSERT INTO edges (namespace, source_id, target_id, relation, weight,
                                           properties, created_at, valid_from)
                        VALUES (:ns, :s, :t, :relation, :weight, CAST(:properties AS jsonb),
                                clock_timestamp(), :valid_from)
                        ON CONFLICT (namespace, source_id, target_id, relation)
                            WHERE valid_to IS NULL
                        DO UPDATE SET
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
                        "valid_from": moment,
                    },
                )
            ).one()
            edge = Edge.from_row(row)
            if replaced:
                await conn.execute(
                    text(
                        "UPDATE edges SET superseded_by = :id "
                        "WHERE namespace = :ns AND id = ANY(:ids)"
                    ),
                    {"ns": self.namespace, "id": edge.id, "ids": replaced},
                )
            await self._publish_edge(conn, EventKind.EDGE_ADDED, edge)
        return edge

    async def _publish_edge(self, conn: AsyncConnection, kind: EventKind, edge: Edge) -> None:
        """An edge event names the edge, its source node and its target node."""
        await publish(
            conn, MemoryEvent(kind, self.namespace, ids=(edge.id, edge.source_id, edge.target_id))
        )

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

    async def invalidate_edge(self, edge_id: Any, at: datetime | None = None) -> Edge:
        """Close an edge that no longer holds, with no successor (``at``: default now)."""
        edge_id = require_id(edge_id, "id")
        moment = None if at is None else require_instant(at, "at")
        async with self.db.write() as conn:
            exists = await conn.scalar(
                text("SELECT 1 FROM edges WHERE namespace = :ns AND id = :id"),
                {"ns": self.namespace, "id": edge_id},
            )
            if not exists:
                raise NotFoundError(f"Edge {edge_id} not found")
            await close_facts(conn, "edges", self.namespace, [edge_id], moment)
            row = (
                await conn.execute(
                    text(
                        f"SELECT {EDGE_COLUMNS} FROM edges WHERE namespace = :ns AND id = :id"
                    ).columns(properties=JSONB),
                    {"ns": self.namespace, "id": edge_id},
                )
            ).one()
            edge = Edge.from_row(row)
            await self._publish_edge(conn, EventKind.EDGE_INVALIDATED, edge)
        return edge

    async def edge_supersedes(self, edge_ids: Sequence[int]) -> dict[int, list[int]]:
        """For each edge, the edges it superseded (for batched loaders)."""
        async with self.db.read() as conn:
            return await superseding(conn, "edges", self.namespace, list(edge_ids))

    async def edges_of(self, node_ids: Sequence[int], limit: int = 100) -> dict[int, list[Edge]]:
        """Up to ``limit`` edges valid now touching each node (either direction, oldest
        first), for batched loaders: a hub node with a million edges does not bring them all
        back."""
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
                                    AND e.valid_to IS NULL
                                UNION
                                SELECT n.node_id, e.id
                                FROM unnest(CAST(:ids AS bigint[])) AS n(node_id)
                                JOIN edges e ON e.namespace = :ns AND e.target_id = n.node_id
                                    AND e.valid_to IS NULL
                            ) touching
                            JOIN edges e ON e.namespace = :ns AND e.id = touching.edge_id
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
        *,
        as_of: datetime | None = None,
    ) -> list[Neighbor]:
        """Every node within ``depth`` hops, once, at its shortest distance, with a path,
        along the edges valid now (or at ``as_of``)."""
        start = require_id(node_id, "nodeId")
        depth = require_depth(depth)
        direction = require_direction(direction)
        as_of = require_as_of(as_of)
        if relation is not None:
            relation = require_text(relation, "relation")
        statement = NEIGHBORS_SQL[direction, relation is not None, as_of is not None]
        params: dict[str, Any] = {"start": start, "ns": self.namespace, "max_depth": depth}
        if relation is not None:
            params["relation"] = relation
        if as_of is not None:
            params["as_of"] = as_of
        async with self.db.read() as conn:
            levels = await statement.fetch(conn, **params)
        with _collection_deferred():
            return _neighbors(levels)

    async def path(
        self,
        from_id: Any,
        to_id: Any,
        max_depth: int = MAX_DEPTH,
        *,
        as_of: datetime | None = None,
    ) -> GraphPath | None:
        """A shortest path between two nodes (edges valid now, or at ``as_of``, in either
        direction), or None."""
        start = require_id(from_id, "fromId")
        goal = require_id(to_id, "toId")
        max_depth = require_depth(max_depth, "maxDepth")
        as_of = require_as_of(as_of)
        params: dict[str, Any] = {"as_of": as_of} if as_of is not None else {}
        async with self.db.read() as conn:
            rows = await PATH_SQL[as_of is not None].fetch(
                conn, start=start, target=goal, ns=self.namespace, max_depth=max_depth, **params
            )
        if not rows or rows[0][0] != start:  # not reached, or the start is not a node here
            return None
        return GraphPath(
            nodes=[Node.from_columns(row[:8]) for row in rows],
            edges=[Edge.from_columns(row[8:]) for row in rows[1:]],
        )


@contextmanager
def _collection_deferred() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector while a traversal's result is built.

    The thousands of objects built are all alive, so a collection during the build frees
    nothing, yet each one moves them towards the oldest generation and brings on a full,
    heap-wide collection (tens of ms) sooner: that pause set the 3-hop p95. One collection
    after the build does the young-generation work once. Restores the previous state.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _frozen(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the frozen dataclass ``cls`` with these fields, without its generated
    ``__init__``: that one calls ``object.__setattr__`` once per field, several times slower,
    and a traversal builds thousands (pickle and copy build instances the same way)."""
    instance = object.__new__(cls)
    object.__setattr__(instance, "__dict__", fields)
    return instance


def _neighbors(levels: Sequence[Any]) -> list[Neighbor]:
    """Neighbors from the traversal's level rows (the start node alone at depth 0)."""
    if not levels:  # no start node in this namespace
        return []
    start = Node.from_columns([column[0] for column in levels[0][1:9]])
    # node id -> (path, edges) to it; a level's parents are all known before the level
    routes: dict[int, tuple[list[Node], list[Edge]]] = {start.id: ([start], [])}
    result = []
    for level in levels[1:]:
        distance = level[0]
        # the level's node columns and edge columns line up by node id; strict, should a
        # reached node be missing from this namespace (an edge across namespaces)
        for (
            node_id,
            label,
            name,
            node_properties,
            insight_id,
            episode_id,
            raw_id,
            node_created,
            parent,
            edge_id,
            source_id,
            target_id,
            relation,
            weight,
            edge_properties,
            edge_created,
            edge_valid_from,
            edge_valid_to,
            edge_superseded_by,
        ) in zip(*level[1:], strict=True):
            node = _frozen(
                Node,
                {
                    "id": node_id,
                    "label": label,
                    "name": name,
                    "properties": node_properties,
                    "insight_id": insight_id,
                    "episode_id": episode_id,
                    "raw_id": raw_id,
                    "created_at": node_created,
                },
            )
            edge = _frozen(
                Edge,
                {
                    "id": edge_id,
                    "source_id": source_id,
                    "target_id": target_id,
                    "relation": relation,
                    "weight": weight,
                    "properties": edge_properties,
                    "created_at": edge_created,
                    "valid_from": edge_valid_from,
                    "valid_to": edge_valid_to,
                    "superseded_by": edge_superseded_by,
                },
            )
            nodes, edges = routes[parent]
            path, along = [*nodes, node], [*edges, edge]
            routes[node_id] = (path, along)
            result.append(
                _frozen(
                    Neighbor, {"node": node, "distance": distance, "path": path, "edges": along}
                )
            )
    return result
