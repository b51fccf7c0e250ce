"""Traversal of the memory graph: the nodes within a few hops (at most a page of them,
nearest first), each at its shortest distance with one shortest path, and a shortest path
between two nodes; now or as of an instant. The statements are in traversal_sql.py; this
module checks the request and builds the result (a large one off the event loop)."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from gql_memory.config import INLINE_NEIGHBORS, Settings
from gql_memory.db import Database
from gql_memory.errors import ValidationError
from gql_memory.memory.graph.edges import Edge
from gql_memory.memory.graph.nodes import Node
from gql_memory.memory.graph.traversal_sql import NEIGHBORS_SQL, PATH_SQL, Direction
from gql_memory.memory.offload import run_cpu_when
from gql_memory.memory.validation import require_id, require_page_size, require_text
from gql_memory.memory.validity import require_as_of

MAX_DEPTH = 5
_T = TypeVar("_T")


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


def require_depth(value: Any, field: str = "depth") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEPTH:
        raise ValidationError(f"{field} must be an integer between 1 and {MAX_DEPTH}")
    return value


def require_direction(value: Any) -> Direction:
    try:
        return value if isinstance(value, Direction) else Direction(str(value))
    except ValueError as exc:
        raise ValidationError("direction must be OUT, IN or BOTH") from exc


class GraphTraversal:
    """The traversals of a namespace's :class:`~gql_memory.memory.graph.Graph`."""

    db: Database
    settings: Settings
    namespace: str

    async def neighbors(
        self,
        node_id: Any,
        depth: int = 1,
        relation: str | None = None,
        direction: Direction | str = Direction.BOTH,
        *,
        as_of: datetime | None = None,
        first: int | None = None,
    ) -> list[Neighbor]:
        """The nodes within ``depth`` hops, each once, at its shortest distance, with a path,
        along the edges valid now (or at ``as_of``): the ``first`` of them (default
        GQL_MEMORY_DEFAULT_PAGE_SIZE, at most GQL_MEMORY_MAX_PAGE_SIZE), nearest first, then
        by node id. The database stops at that many too."""
        start = require_id(node_id, "nodeId")
        depth = require_depth(depth)
        limit = require_page_size(
            first, self.settings.default_page_size, self.settings.max_page_size
        )
        direction = require_direction(direction)
        as_of = require_as_of(as_of)
        if relation is not None:
            relation = require_text(relation, "relation")
        statement = NEIGHBORS_SQL[direction, relation is not None, as_of is not None]
        params: dict[str, Any] = {
            "start": start,
            "ns": self.namespace,
            "max_depth": depth,
            "first": limit,
        }
        if relation is not None:
            params["relation"] = relation
        if as_of is not None:
            params["as_of"] = as_of
        async with self.db.read() as conn:
            levels = await statement.fetch(conn, **params)
        reached = sum(len(level[1]) for level in levels[1:])
        return await run_cpu_when(reached > INLINE_NEIGHBORS, _built_neighbors, levels)

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


def _built_neighbors(levels: Sequence[Any]) -> list[Neighbor]:
    with _collection_deferred():
        return _neighbors(levels)


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
