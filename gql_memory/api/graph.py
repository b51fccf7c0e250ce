"""GraphQL for the memory graph: nodes, edges, neighbors and shortest paths."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry.scalars import JSON

from gql_memory.api.info import Info
from gql_memory.api.json_values import json_object
from gql_memory.api.pagination import Connection, to_connection
from gql_memory.api.raw import RawDialogue
from gql_memory.api.semantic import AsOfArg, AtArg, Episode, Insight
from gql_memory.memory.graph import edges as graph_edges
from gql_memory.memory.graph import nodes as graph_nodes
from gql_memory.memory.graph import traversal as graph_traversal
from gql_memory.memory.graph import traversal_sql as graph_traversal_sql
from gql_memory.memory.validation import require_page_size

Direction = graph_traversal_sql.Direction  # registered with strawberry below
strawberry.enum(
    graph_traversal_sql.Direction, name="Direction", description="Which edges a traversal follows."
)
IdArg = Annotated[strawberry.ID, strawberry.argument(description="Node id.")]
EdgeIdArg = Annotated[strawberry.ID, strawberry.argument(description="Edge id.")]


@strawberry.type(description="A node of the memory graph, unique per (label, name).")
class Node:
    id: strawberry.ID = strawberry.field(description="Database id of the node.")
    label: str = strawberry.field(description="The node's kind, e.g. Person, Project, Fact.")
    name: str = strawberry.field(description="The node's name, unique within its label.")
    properties: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    created_at: datetime = strawberry.field(description="When the node was created.")
    insight_id: strawberry.Private[int | None]
    episode_id: strawberry.Private[int | None]
    raw_id: strawberry.Private[int | None]

    @strawberry.field(description="The insight this node stands for, if any (batched).")
    async def insight(self, info: Info) -> Insight | None:
        if self.insight_id is None:
            return None
        found = await info.context.loaders.insight.load(self.insight_id)
        return Insight.from_domain(found) if found else None

    @strawberry.field(description="The episode this node stands for, if any (batched).")
    async def episode(self, info: Info) -> Episode | None:
        if self.episode_id is None:
            return None
        found = await info.context.loaders.episode.load(self.episode_id)
        return Episode.from_domain(found) if found else None

    @strawberry.field(description="The raw dialogue turn this node stands for, if any.")
    async def raw_dialogue(self, info: Info) -> RawDialogue | None:
        if self.raw_id is None:
            return None
        found = await info.context.loaders.raw_dialogue.load(self.raw_id)
        return RawDialogue.from_domain(found) if found else None

    @strawberry.field(description="Edges touching this node, in or out, oldest first (batched).")
    async def edges(
        self,
        info: Info,
        first: Annotated[
            int, strawberry.argument(description="At most this many (default 100, max 1000).")
        ] = 100,
    ) -> list[Edge]:
        limit = require_page_size(first, 100, info.context.settings.max_page_size)
        found = await info.context.loaders.node_edges.load((int(self.id), limit))
        return [Edge.from_domain(e) for e in found]

    @classmethod
    def from_domain(cls, node: graph_nodes.Node) -> Node:
        return cls(
            id=strawberry.ID(str(node.id)),
            label=node.label,
            name=node.name,
            properties=JSON(node.properties),
            created_at=node.created_at,
            insight_id=node.insight_id,
            episode_id=node.episode_id,
            raw_id=node.raw_id,
        )


@strawberry.type(description="A directed, typed, weighted edge between two nodes.")
class Edge:
    id: strawberry.ID = strawberry.field(description="Database id of the edge.")
    source_id: strawberry.ID = strawberry.field(description="Id of the source node.")
    target_id: strawberry.ID = strawberry.field(description="Id of the target node.")
    relation: str = strawberry.field(description="The relation, e.g. causes, mentions.")
    weight: float = strawberry.field(description="The edge's weight (default 1.0).")
    properties: JSON | None = strawberry.field(description="Caller-supplied JSON object.")
    created_at: datetime = strawberry.field(description="When the edge was created.")
    valid_from: datetime = strawberry.field(description="When the relation began to hold.")
    valid_to: datetime | None = strawberry.field(
        description="When it stopped holding (superseded or invalidated); null while it holds."
    )
    superseded_by: strawberry.ID | None = strawberry.field(
        description="Id of the edge that superseded this one, if one did."
    )

    @strawberry.field(description="Ids of the edges this one superseded (batched).")
    async def supersedes(self, info: Info) -> list[strawberry.ID]:
        found = await info.context.loaders.edge_supersedes.load(int(self.id))
        return [strawberry.ID(str(i)) for i in found or []]

    @strawberry.field(
        description="The source node (batched); null only if it was deleted meanwhile."
    )
    async def source(self, info: Info) -> Node | None:
        found = await info.context.loaders.node.load(int(self.source_id))
        return Node.from_domain(found) if found else None

    @strawberry.field(
        description="The target node (batched); null only if it was deleted meanwhile."
    )
    async def target(self, info: Info) -> Node | None:
        found = await info.context.loaders.node.load(int(self.target_id))
        return Node.from_domain(found) if found else None

    @classmethod
    def from_domain(cls, edge: graph_edges.Edge) -> Edge:
        return cls(
            id=strawberry.ID(str(edge.id)),
            source_id=strawberry.ID(str(edge.source_id)),
            target_id=strawberry.ID(str(edge.target_id)),
            relation=edge.relation,
            weight=edge.weight,
            properties=JSON(edge.properties),
            created_at=edge.created_at,
            valid_from=edge.valid_from or edge.created_at,
            valid_to=edge.valid_to,
            superseded_by=None
            if edge.superseded_by is None
            else strawberry.ID(str(edge.superseded_by)),
        )


class ConvertedRecords:
    """Graph records turned into GraphQL objects once per traversal: its paths repeat them
    (a node of a 3-hop result sits on the paths of all the nodes reached through it)."""

    def __init__(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._edges: dict[int, Edge] = {}

    def node(self, node: graph_nodes.Node) -> Node:
        converted = self._nodes.get(node.id)
        if converted is None:
            converted = self._nodes[node.id] = Node.from_domain(node)
        return converted

    def edge(self, edge: graph_edges.Edge) -> Edge:
        converted = self._edges.get(edge.id)
        if converted is None:
            converted = self._edges[edge.id] = Edge.from_domain(edge)
        return converted


@strawberry.type(description="A node reached by a traversal, at its shortest distance.")
class Neighbor:
    node: Node = strawberry.field(description="The node reached.")
    distance: int = strawberry.field(description="Hops from the start node (1..depth).")
    domain: strawberry.Private[graph_traversal.Neighbor]
    records: strawberry.Private[ConvertedRecords]

    # path and edges are converted only when a query asks for them
    @strawberry.field(
        description="A shortest path from the start node to this node, both included."
    )
    def path(self) -> list[Node]:
        return [self.records.node(n) for n in self.domain.path]

    @strawberry.field(description="The edges along that path, in order.")
    def edges(self) -> list[Edge]:
        return [self.records.edge(e) for e in self.domain.edges]

    @classmethod
    def from_domain(
        cls, neighbor: graph_traversal.Neighbor, records: ConvertedRecords | None = None
    ) -> Neighbor:
        records = records or ConvertedRecords()
        return cls(
            node=records.node(neighbor.node),
            distance=neighbor.distance,
            domain=neighbor,
            records=records,
        )


@strawberry.type(description="A shortest path between two nodes.")
class GraphPath:
    nodes: list[Node] = strawberry.field(description="The nodes from start to end.")
    edges: list[Edge] = strawberry.field(description="The edges between them, in order.")
    length: int = strawberry.field(description="Number of edges (hops).")

    @classmethod
    def from_domain(cls, path: graph_traversal.GraphPath) -> GraphPath:
        return cls(
            nodes=[Node.from_domain(n) for n in path.nodes],
            edges=[Edge.from_domain(e) for e in path.edges],
            length=path.length,
        )


@strawberry.input(description="A node to create, or to update when (label, name) exists.")
class NodeInput:
    label: str = strawberry.field(description="The node's kind (non-empty).")
    name: str = strawberry.field(description="The node's name (non-empty).")
    properties: JSON | None = strawberry.field(default=None, description="JSON object.")
    insight_id: strawberry.ID | None = strawberry.field(
        default=None, description="Tie the node to this insight."
    )
    episode_id: strawberry.ID | None = strawberry.field(
        default=None, description="Tie the node to this episode."
    )
    raw_id: strawberry.ID | None = strawberry.field(
        default=None, description="Tie the node to this raw dialogue turn."
    )


@strawberry.input(description="A node named by label and name instead of id.")
class NodeKeyInput:
    label: str = strawberry.field(description="The node's label.")
    name: str = strawberry.field(description="The node's name.")


@strawberry.input(
    description="An edge to create (or update: same source, target and relation). Name each "
    "end by id or by (label, name)."
)
class EdgeInput:
    relation: str = strawberry.field(description="The relation (non-empty).")
    source_id: strawberry.ID | None = strawberry.field(default=None, description="Source id.")
    target_id: strawberry.ID | None = strawberry.field(default=None, description="Target id.")
    source: NodeKeyInput | None = strawberry.field(
        default=None, description="Source by label and name (instead of sourceId)."
    )
    target: NodeKeyInput | None = strawberry.field(
        default=None, description="Target by label and name (instead of targetId)."
    )
    weight: float = strawberry.field(default=1.0, description="The edge's weight.")
    properties: JSON | None = strawberry.field(default=None, description="JSON object.")
    create_missing: bool = strawberry.field(
        default=False, description="Create ends named by (label, name) that do not exist."
    )
    supersedes: list[strawberry.ID] = strawberry.field(
        default_factory=list,
        description="Ids of valid edges this one replaces: they are closed at its validFrom and "
        "linked to it, in the same transaction, before it is drawn. Nothing is deleted.",
    )
    valid_from: datetime | None = strawberry.field(
        default=None,
        description="When the relation began to hold, with a timezone (default: now; never "
        "in the future).",
    )


def _end(
    node_id: strawberry.ID | None, key: NodeKeyInput | None, field: str
) -> graph_nodes.NodeRef:
    from gql_memory.errors import ValidationError

    if (node_id is None) == (key is None):
        raise ValidationError(f"Give exactly one of {field}Id and {field}")
    return node_id if node_id is not None else (key.label, key.name)  # type: ignore[union-attr]


@strawberry.type(description="Queries of the memory graph.")
class GraphQueries:
    @strawberry.field(description="One node, or null.")
    async def node(self, info: Info, id: IdArg) -> Node | None:
        found = await info.context.memory.graph.get_node(id)
        return Node.from_domain(found) if found else None

    @strawberry.field(description="The node with this label and name, or null.")
    async def node_by_name(
        self,
        info: Info,
        label: Annotated[str, strawberry.argument(description="The node's label.")],
        name: Annotated[str, strawberry.argument(description="The node's name.")],
    ) -> Node | None:
        found = await info.context.memory.graph.node_by_name(label, name)
        return Node.from_domain(found) if found else None

    @strawberry.field(description="Nodes, newest first, optionally of one label.")
    async def nodes(
        self,
        info: Info,
        label: Annotated[
            str | None, strawberry.argument(description="Only nodes with this label.")
        ] = None,
        first: Annotated[
            int | None, strawberry.argument(description="Page size (default 100, at most 1000).")
        ] = None,
        after: Annotated[
            str | None, strawberry.argument(description="Return items after this cursor.")
        ] = None,
    ) -> Connection[Node]:
        page = await info.context.memory.graph.list_nodes(label=label, first=first, after=after)
        return to_connection(page, Node)

    @strawberry.field(
        description="Nodes within `depth` hops (1..5), each once at its shortest distance, "
        "with a path; one recursive query, cycle-safe. At most `first` of them, nearest "
        "first, then by node id: the traversal stops there."
    )
    async def neighbors(
        self,
        info: Info,
        node_id: Annotated[strawberry.ID, strawberry.argument(description="Start node id.")],
        depth: Annotated[int, strawberry.argument(description="Maximum hops, 1..5.")] = 1,
        relation: Annotated[
            str | None, strawberry.argument(description="Only follow edges of this relation.")
        ] = None,
        direction: Annotated[
            Direction, strawberry.argument(description="OUT, IN or BOTH (default).")
        ] = graph_traversal_sql.Direction.BOTH,
        as_of: AsOfArg = None,
        first: Annotated[
            int | None,
            strawberry.argument(
                description="At most this many neighbours, nearest first, then by node id "
                "(default GQL_MEMORY_DEFAULT_PAGE_SIZE, 100; at most GQL_MEMORY_MAX_PAGE_SIZE, "
                "1000); the query cost counts them."
            ),
        ] = None,
    ) -> list[Neighbor]:
        found = await info.context.memory.graph.neighbors(
            node_id, depth, relation, direction, as_of=as_of, first=first
        )
        records = ConvertedRecords()
        return [Neighbor.from_domain(n, records) for n in found]

    @strawberry.field(description="A shortest path (edges in either direction), or null.")
    async def path(
        self,
        info: Info,
        from_id: Annotated[strawberry.ID, strawberry.argument(description="Start node id.")],
        to_id: Annotated[strawberry.ID, strawberry.argument(description="End node id.")],
        max_depth: Annotated[int, strawberry.argument(description="Maximum hops, 1..5.")] = 5,
        as_of: AsOfArg = None,
    ) -> GraphPath | None:
        found = await info.context.memory.graph.path(from_id, to_id, max_depth, as_of=as_of)
        return GraphPath.from_domain(found) if found else None


@strawberry.type(description="Mutations of the memory graph.")
class GraphMutations:
    @strawberry.mutation(description="Create a node, or update the one with this label and name.")
    async def add_node(
        self, info: Info, input: Annotated[NodeInput, strawberry.argument(description="The node.")]
    ) -> Node:
        node = await info.context.memory.graph.add_node(
            input.label,
            input.name,
            json_object(input.properties),
            insight_id=input.insight_id,
            episode_id=input.episode_id,
            raw_id=input.raw_id,
        )
        return Node.from_domain(node)

    @strawberry.mutation(
        description="Connect two nodes; self-loops are rejected. The edges it supersedes are "
        "closed atomically."
    )
    async def add_edge(
        self, info: Info, input: Annotated[EdgeInput, strawberry.argument(description="The edge.")]
    ) -> Edge:
        edge = await info.context.memory.graph.add_edge(
            _end(input.source_id, input.source, "source"),
            _end(input.target_id, input.target, "target"),
            input.relation,
            input.weight,
            json_object(input.properties),
            create_missing=input.create_missing,
            supersedes=list(input.supersedes),
            valid_from=input.valid_from,
        )
        return Edge.from_domain(edge)

    @strawberry.mutation(
        description="Close an edge that no longer holds, with no successor (validTo = at). "
        "Nothing is deleted; traversals of now stop following it."
    )
    async def invalidate_edge(self, info: Info, id: EdgeIdArg, at: AtArg = None) -> Edge:
        return Edge.from_domain(await info.context.memory.graph.invalidate_edge(id, at))

    @strawberry.mutation(description="Delete a node and its edges; false when there was none.")
    async def delete_node(self, info: Info, id: IdArg) -> bool:
        return await info.context.memory.graph.delete_node(id)
