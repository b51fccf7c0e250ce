"""The MCP tools: thin wrappers over the same service layer as the GraphQL resolvers.

A domain error (invalid input, a missing node) becomes a tool error result (``isError``)
carrying the same message the GraphQL API returns, so the calling model can correct itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from gql_memory.config import CONTEXT_DEFAULT_MAX_TOKENS, CONTEXT_MAX_TOKENS, CONTEXT_MIN_TOKENS
from gql_memory.errors import GqlMemoryError
from gql_memory.mcp_server.payloads import pick, plain
from gql_memory.store import MemoryStore

Session = Annotated[str, Field(description='Session id (default "default").')]
Label = Annotated[str, Field(description='Node label, e.g. "Person" (default "Entity").')]
Layer = Literal["INSIGHT", "EPISODE", "RAW"]
Section = Literal["WORKING", "SEARCH", "EPISODES", "GRAPH"]
Result = dict[str, Any]
Tool = Callable[..., Awaitable[Result]]


def _domain_errors(tool: Tool) -> Tool:
    """Domain errors as tool errors with their message (not as internal errors)."""

    @wraps(tool)
    async def run(*args: Any, **kwargs: Any) -> Result:
        try:
            return await tool(*args, **kwargs)
        except GqlMemoryError as exc:
            raise ToolError(str(exc)) from exc

    return run


def register_tools(server: MCPServer, store: MemoryStore) -> None:
    """Register the ten memory tools on ``server``."""

    def tool(description: str) -> Callable[[Tool], Tool]:
        def register(fn: Tool) -> Tool:
            server.add_tool(_domain_errors(fn), name=fn.__name__, description=description)
            return fn

        return register

    @tool("Store one dialogue turn verbatim (L0 raw memory).")
    async def store_raw_dialogue(
        session_id: Annotated[str, Field(description="Conversation/session id.")],
        speaker: Annotated[str, Field(description='"user", "assistant" or any name.')],
        content: Annotated[str, Field(description="What was said (no length limit).")],
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
    ) -> Result:
        turn = await store.raw.store(session_id, speaker, content, metadata)
        return pick(turn, "id", "session_id", "timestamp")

    @tool(
        "Add an item to the session's working memory (capacity-bounded; the least recently "
        "used non-critical item is evicted and archived to stale memory)."
    )
    async def update_working_memory(
        content: Annotated[str, Field(description="What to keep in mind.")],
        importance: Annotated[
            float, Field(description="0..1; above 0.8 is critical (protected from eviction).")
        ] = 0.5,
        session_id: Session = "default",
    ) -> Result:
        result = await store.working.add(content, importance, session_id=session_id)
        return pick(result, "added_id", "evicted_id", "archived_id", "current_count")

    @tool("Store a distilled insight (L2 memory), embedded for semantic search.")
    async def compress_to_l2_insight(
        content: Annotated[str, Field(description="The insight, in a sentence or two.")],
        source_ids: Annotated[
            list[int], Field(description="Ids of the raw dialogue turns it was distilled from.")
        ] = [],  # noqa: B006 - pydantic copies defaults
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
    ) -> Result:
        insight = await store.insights.add(content, source_ids, metadata)
        return pick(insight, "id", "content", "source_ids", "created_at")

    @tool("Store an episode: what was tried, how it went (reward -1..1) and the lesson.")
    async def store_episode(
        query: Annotated[str, Field(description="What was attempted.")],
        reward: Annotated[float, Field(description="Outcome from -1 (failure) to 1 (success).")],
        reflection: Annotated[str, Field(description="The lesson learned.")],
    ) -> Result:
        episode = await store.episodes.store(query, reward, reflection)
        return pick(episode, "id", "query", "reward", "reflection", "created_at")

    @tool(
        "Graph-aware hybrid search (vector + full text fused by score, carried along the memory "
        "graph, boosted by the session's working memory and its graph neighbours); every hit "
        "explains its rank."
    )
    async def hybrid_search(
        query: Annotated[str, Field(description="What to look for.")],
        top_k: Annotated[int, Field(description="How many hits (1..100).")] = 10,
        session_id: Annotated[
            str, Field(description='Session whose working memory boosts hits (default "default").')
        ] = "default",
        layers: Annotated[list[Layer], Field(description="Layers to search.")] = ["INSIGHT"],  # noqa: B006
    ) -> Result:
        hits = await store.search(query, top_k, session_id, layers)
        return {"hits": plain(hits)}

    @tool("Create a graph node, or update the one with the same (label, name).")
    async def graph_add_node(
        name: Annotated[str, Field(description="The node's name.")],
        label: Label = "Entity",
        properties: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
        insight_id: Annotated[int | None, Field(description="Insight it stands for.")] = None,
        episode_id: Annotated[int | None, Field(description="Episode it stands for.")] = None,
        raw_id: Annotated[int | None, Field(description="Raw turn it stands for.")] = None,
    ) -> Result:
        node = await store.graph.add_node(
            label, name, properties, insight_id=insight_id, episode_id=episode_id, raw_id=raw_id
        )
        return plain(node)

    @tool("Connect two nodes by name with a typed, weighted edge (missing nodes are created).")
    async def graph_add_edge(
        source_name: Annotated[str, Field(description="Name of the source node.")],
        target_name: Annotated[str, Field(description="Name of the target node.")],
        relation: Annotated[str, Field(description='The relation, e.g. "works_at".')],
        source_label: Label = "Entity",
        target_label: Label = "Entity",
        weight: Annotated[float, Field(description="Edge weight (default 1.0).")] = 1.0,
    ) -> Result:
        edge = await store.graph.add_edge(
            (source_label, source_name),
            (target_label, target_name),
            relation,
            weight,
            create_missing=True,
        )
        return plain(edge)

    @tool("Nodes within `depth` hops of a node, each once at its shortest distance, with a path.")
    async def graph_query_neighbors(
        node_name: Annotated[str, Field(description="Name of the start node.")],
        node_label: Label = "Entity",
        depth: Annotated[int, Field(description="Hops (1..5).")] = 1,
        relation: Annotated[str | None, Field(description="Only this relation.")] = None,
        direction: Annotated[
            Literal["OUT", "IN", "BOTH"], Field(description="Edges to follow.")
        ] = "BOTH",
    ) -> Result:
        node = await store.graph.node_by_name(node_label, node_name)
        if node is None:
            raise ToolError(f"Node ({node_label}, {node_name}) not found")
        found = await store.graph.neighbors(node.id, depth, relation, direction)
        return {
            "node": plain(node),
            "neighbors": [
                {
                    "node": plain(n.node),
                    "distance": n.distance,
                    "path": [p.name for p in n.path],
                    "relations": [e.relation for e in n.edges],
                }
                for n in found
            ],
        }

    @tool("A shortest path between two nodes (edges in either direction), or found=false.")
    async def graph_find_path(
        from_name: Annotated[str, Field(description="Name of the start node.")],
        to_name: Annotated[str, Field(description="Name of the end node.")],
        from_label: Label = "Entity",
        to_label: Label = "Entity",
        max_depth: Annotated[int, Field(description="Longest path searched (1..5).")] = 5,
    ) -> Result:
        start = await store.graph.node_by_name(from_label, from_name)
        goal = await store.graph.node_by_name(to_label, to_name)
        path = None
        if start is not None and goal is not None:
            path = await store.graph.path(start.id, goal.id, max_depth)
        if path is None:
            return {"found": False, "length": None, "nodes": [], "edges": []}
        return {
            "found": True,
            "length": path.length,
            "nodes": plain(path.nodes),
            "edges": plain(path.edges),
        }

    @tool(
        "The best context for the agent's next step, packed under a token budget: working "
        "memory, search hits, lessons from similar episodes and graph facts, each with why it "
        "was chosen and its token cost. Paste `text` into the prompt."
    )
    async def get_context(
        query: Annotated[str, Field(description="What the agent is about to do.")],
        session_id: Session = "default",
        max_tokens: Annotated[
            int, Field(description=f"Token budget ({CONTEXT_MIN_TOKENS}..{CONTEXT_MAX_TOKENS}).")
        ] = CONTEXT_DEFAULT_MAX_TOKENS,
        include: Annotated[list[Section], Field(description="Sections to include.")] = [  # noqa: B006
            "WORKING",
            "SEARCH",
            "EPISODES",
            "GRAPH",
        ],
    ) -> Result:
        context = await store.context(query, session_id, max_tokens, include)
        return pick(context, "text", "total_tokens", "max_tokens", "sections", "notes")
