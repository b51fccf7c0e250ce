"""Edges of the memory graph: typed, weighted, directed links between two nodes of a
namespace, valid over time (time-aware facts: closed, never rewritten, when superseded)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, select, text, update
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.clauses import any_of, jsonb
from gql_memory.db.tables import edges
from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.graph.nodes import NodeRef, resolve_node
from gql_memory.memory.validation import require_id, require_json_object, require_text
from gql_memory.memory.validity import (
    close_facts,
    require_instant,
    require_supersedes,
    superseding,
)

MAX_EDGE_WEIGHT = 1_000_000.0
EDGE_COLUMNS = (
    edges.c.id,
    edges.c.source_id,
    edges.c.target_id,
    edges.c.relation,
    edges.c.weight,
    edges.c.properties,
    edges.c.created_at,
    edges.c.valid_from,
    edges.c.valid_to,
    edges.c.superseded_by,
)
EDGE_FIELDS = tuple(column.name for column in EDGE_COLUMNS)

# Up to :limit edges valid now touching each of :ids (either direction, oldest first): each
# direction is one index range per node, and the window keeps a hub node's million edges in
# the database.
EDGES_OF_SQL = f"""
SELECT node_id, {", ".join(EDGE_FIELDS)} FROM (
    SELECT touching.node_id, e.*,
           row_number() OVER (PARTITION BY touching.node_id ORDER BY e.id) AS position
    FROM (
        SELECT n.node_id, e.id AS edge_id
        FROM unnest(CAST(:ids AS bigint[])) AS n(node_id)
        JOIN edges e ON e.namespace = :ns AND e.source_id = n.node_id AND e.valid_to IS NULL
        UNION
        SELECT n.node_id, e.id
        FROM unnest(CAST(:ids AS bigint[])) AS n(node_id)
        JOIN edges e ON e.namespace = :ns AND e.target_id = n.node_id AND e.valid_to IS NULL
    ) touching
    JOIN edges e ON e.namespace = :ns AND e.id = touching.edge_id
) ranked
WHERE position <= :limit
ORDER BY node_id, id
"""


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


def require_weight(value: Any) -> float:
    """A finite weight in [0, 1e6]: search and traversal read it as a strength."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError("weight must be a finite number")
    if not 0.0 <= value <= MAX_EDGE_WEIGHT:
        raise ValidationError(f"weight must be between 0 and {MAX_EDGE_WEIGHT:.0f}")
    return float(value)


class GraphEdges:
    """The edge operations of a namespace's :class:`~gql_memory.memory.graph.Graph`."""

    db: Database
    settings: Settings
    namespace: str

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
            source_id = await resolve_node(conn, self.namespace, source, "source", create_missing)
            target_id = await resolve_node(conn, self.namespace, target, "target", create_missing)
            if source_id == target_id:
                raise ValidationError("An edge cannot connect a node to itself (self-loop)")
            moment = valid_from or await conn.scalar(select(func.clock_timestamp()))
            await close_facts(conn, "edges", self.namespace, replaced, moment)
            insert_edge = insert(edges).values(
                namespace=self.namespace,
                source_id=source_id,
                target_id=target_id,
                relation=relation,
                weight=weight,
                properties=jsonb(properties),
                created_at=func.clock_timestamp(),
                valid_from=moment,
            )
            upsert = insert_edge.on_conflict_do_update(
                index_elements=[
                    edges.c.namespace,
                    edges.c.source_id,
                    edges.c.target_id,
                    edges.c.relation,
                ],
                index_where=edges.c.valid_to.is_(None),
                set_={
                    "weight": insert_edge.excluded.weight,
                    "properties": func.coalesce(
                        insert_edge.excluded.properties, edges.c.properties
                    ),
                },
            ).returning(*EDGE_COLUMNS)
            edge = Edge.from_columns((await conn.execute(upsert)).one())
            if replaced:
                await conn.execute(
                    update(edges)
                    .where(edges.c.namespace == self.namespace, any_of(edges.c.id, replaced))
                    .values(superseded_by=edge.id)
                )
            await self._publish_edge(conn, EventKind.EDGE_ADDED, edge)
        return edge

    async def _publish_edge(self, conn: AsyncConnection, kind: EventKind, edge: Edge) -> None:
        """An edge event names the edge, its source node and its target node."""
        await publish(
            conn, MemoryEvent(kind, self.namespace, ids=(edge.id, edge.source_id, edge.target_id))
        )

    async def invalidate_edge(self, edge_id: Any, at: datetime | None = None) -> Edge:
        """Close an edge that no longer holds, with no successor (``at``: default now)."""
        edge_id = require_id(edge_id, "id")
        moment = None if at is None else require_instant(at, "at")
        this_edge = (edges.c.namespace == self.namespace, edges.c.id == edge_id)
        async with self.db.write() as conn:
            if await conn.scalar(select(edges.c.id).where(*this_edge)) is None:
                raise NotFoundError(f"Edge {edge_id} not found")
            await close_facts(conn, "edges", self.namespace, [edge_id], moment)
            row = (await conn.execute(select(*EDGE_COLUMNS).where(*this_edge))).one()
            edge = Edge.from_columns(row)
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
                    text(EDGES_OF_SQL).columns(properties=JSONB),
                    {"ns": self.namespace, "ids": list(node_ids), "limit": limit},
                )
            ).all()
        result: dict[int, list[Edge]] = {i: [] for i in node_ids}
        for row in rows:
            result[row.node_id].append(Edge.from_row(row))
        return result
