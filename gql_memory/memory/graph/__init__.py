"""The memory graph: labelled nodes (optionally tied to an insight, episode or raw turn) and
typed, weighted edges valid over time; breadth-first traversal in one recursive CTE.

``nodes`` and ``edges`` write and read them, ``traversal`` walks them with the statements of
``traversal_sql``; :class:`Graph` is all three for one namespace.
"""

from __future__ import annotations

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory.graph.edges import MAX_EDGE_WEIGHT, Edge, GraphEdges, require_weight
from gql_memory.memory.graph.nodes import MAX_NODE_KEY_BYTES, GraphNodes, Node, NodeRef
from gql_memory.memory.graph.traversal import (
    MAX_DEPTH,
    GraphPath,
    GraphTraversal,
    Neighbor,
    require_depth,
    require_direction,
)
from gql_memory.memory.graph.traversal_sql import Direction

__all__ = [
    "MAX_DEPTH",
    "MAX_EDGE_WEIGHT",
    "MAX_NODE_KEY_BYTES",
    "Direction",
    "Edge",
    "Graph",
    "GraphPath",
    "Neighbor",
    "Node",
    "NodeRef",
    "require_depth",
    "require_direction",
    "require_weight",
]


class Graph(GraphNodes, GraphEdges, GraphTraversal):
    """The graph of one namespace."""

    def __init__(self, db: Database, settings: Settings, namespace: str) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
