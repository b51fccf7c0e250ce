"""The memory graph of one namespace: its nodes, edges and traversals together."""

from __future__ import annotations

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory.graph.edges import GraphEdges
from gql_memory.memory.graph.nodes import GraphNodes
from gql_memory.memory.graph.traversal import GraphTraversal


class Graph(GraphNodes, GraphEdges, GraphTraversal):
    """The graph of one namespace."""

    def __init__(self, db: Database, settings: Settings, namespace: str) -> None:
        self.db = db
        self.settings = settings
        self.namespace = namespace
