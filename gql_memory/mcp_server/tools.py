"""The MCP tools: thin wrappers over the same service layer as the GraphQL resolvers.

Each input schema states the bounds (non-empty text, lengths, ranges), so a client can check
a call before making it; the domain layer enforces them with the messages the GraphQL API
gives. A failure (invalid input, a missing node) becomes a tool error result (``isError``)
whose text is the seeds' ``{"error", "details", "tool"}`` (errors.py, via the server), so the
calling model can correct itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gql_memory.config import (
    CONTEXT_DEFAULT_MAX_TOKENS,
    CONTEXT_MAX_TOKENS,
    CONTEXT_MIN_TOKENS,
    MAX_QUERY_CHARS,
)
from gql_memory.errors import NotFoundError
from gql_memory.mcp_server.payloads import pick, plain
from gql_memory.memory.graph.edges import MAX_EDGE_WEIGHT
from gql_memory.memory.graph.traversal import MAX_DEPTH
from gql_memory.memory.vectors import MAX_TOP_K
from gql_memory.store import AsyncMemoryStore

MAX_SESSION_ID_CHARS = 255  # raw_dialogue.session_id is varchar(255) (seed 004)
MAX_SPEAKER_CHARS = 50  # raw_dialogue.speaker is varchar(50) (seed 004)
MAX_LABEL_CHARS = 255


# The bounds below are stated in the schema only (json_schema_extra): the domain layer
# enforces them, with the messages the GraphQL API and the seeds use.
def nonblank(description: str, max_length: int | None = None) -> Any:
    """A string with at least one non-blank character (and at most ``max_length``)."""
    schema: dict[str, Any] = {"minLength": 1, "pattern": r"\S"}
    if max_length is not None:
        schema["maxLength"] = max_length
    return Field(description=description, json_schema_extra=schema)


def bounded(description: str, minimum: float, maximum: float) -> Any:
    return Field(
        description=description, json_schema_extra={"minimum": minimum, "maximum": maximum}
    )


def row_id(description: str) -> Any:
    return Field(description=description, json_schema_extra={"minimum": 1})


Session = Annotated[
    str, nonblank('Session id (default "default").', max_length=MAX_SESSION_ID_CHARS)
]
Label = Annotated[
    str, nonblank('Node label, e.g. "Person" (default "Entity").', max_length=MAX_LABEL_CHARS)
]
NodeName = Annotated[str, nonblank("The node's name.")]
Layer = Literal["INSIGHT", "EPISODE", "RAW"]
Section = Literal["WORKING", "SEARCH", "EPISODES", "GRAPH"]
Result = dict[str, Any]
Tool = Callable[..., Awaitable[Result]]
AsOf = Annotated[
    datetime | None,
    Field(
        description="See the facts valid at this instant (ISO-8601 with a timezone, not in the "
        "future) instead of those valid now."
    ),
]

InterpretTime = Annotated[
    bool | None,
    Field(
        description='Read time expressions in the query ("yesterday", "last week", "two months '
        'ago", "in May 2023", "on 7 May 2023") into a period against reference_time, and rank '
        "what happened in it higher among the hits the search finds (hits carry "
        "interpreted_period and sort by time_score). "
        "Default: the server's setting (off unless configured)."
    ),
]
ReferenceTime = Annotated[
    datetime | None,
    Field(
        description="The instant relative time expressions are read against (ISO-8601 with a "
        "timezone, whose days are counted); default as_of, else now in the server's timezone."
    ),
]

MinRelevance = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="Leave out hits whose relevance (how likely a hit answers the query, 0..1, "
        "calibrated per embedding model) is below this. Default: the server's "
        "GQL_MEMORY_SEARCH_MIN_RELEVANCE (0: every hit).",
    ),
]
ContextMinRelevance = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="Add no search hit or lesson whose relevance (how likely it answers the query, "
        "0..1, calibrated per embedding model) is below this. Default: the server's "
        "GQL_MEMORY_CONTEXT_MIN_RELEVANCE, else the model's calibrated floor (0.005 for "
        "multilingual-e5-small).",
    ),
]


def superseded_ids(kind: str) -> Any:
    return Field(
        description=f"Ids of valid {kind}s this one replaces: they are closed (validTo) and "
        "linked to it, atomically. Nothing is deleted; superseded facts stop coming back from "
        "searches of now.",
        json_schema_extra={"items": {"type": "integer", "minimum": 1}},
    )


FACT_FIELDS = ("valid_from", "valid_to", "superseded_by", "supersedes")


def register_tools(server: MCPServer, store: AsyncMemoryStore) -> None:
    """Register the ten memory tools on ``server``."""

    def tool(description: str) -> Callable[[Tool], Tool]:
        def register(fn: Tool) -> Tool:
            server.add_tool(fn, name=fn.__name__, description=description)
            return fn

        return register

    @tool("Store one dialogue turn verbatim (L0 raw memory).")
    async def store_raw_dialogue(
        session_id: Annotated[
            str, nonblank("Conversation/session id.", max_length=MAX_SESSION_ID_CHARS)
        ],
        speaker: Annotated[
            str, nonblank('"user", "assistant" or any name.', max_length=MAX_SPEAKER_CHARS)
        ],
        content: Annotated[str, nonblank("What was said (no length limit).")],
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
    ) -> Result:
        turn = await store.raw.store(session_id, speaker, content, metadata)
        return {**pick(turn, "id", "timestamp", "session_id"), "status": "success"}

    @tool(
        "Add an item to the session's working memory (capacity-bounded; the least recently "
        "used non-critical item is evicted and archived to stale memory, and items whose "
        "attention decayed away are archived too: decayed_ids)."
    )
    async def update_working_memory(
        content: Annotated[str, nonblank("What to keep in mind.")],
        importance: Annotated[
            float, bounded("0..1; above 0.8 is critical (protected from eviction).", 0.0, 1.0)
        ] = 0.5,
        session_id: Session = "default",
    ) -> Result:
        result = await store.working.add(content, importance, session_id=session_id)
        fields = ("added_id", "evicted_id", "archived_id", "current_count", "decayed_ids")
        return pick(result, *fields)

    @tool("Store a distilled insight (L2 memory), embedded for semantic search.")
    async def compress_to_l2_insight(
        content: Annotated[str, nonblank("The insight, in a sentence or two.")],
        source_ids: Annotated[
            list[int],
            Field(
                description="Ids of the raw dialogue turns it was distilled from.",
                json_schema_extra={"items": {"type": "integer", "minimum": 1}},
            ),
        ] = [],  # noqa: B006 - pydantic copies defaults
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
        supersedes: Annotated[list[int], superseded_ids("insight")] = [],  # noqa: B006
    ) -> Result:
        insight = await store.insights.add(content, source_ids, metadata, supersedes=supersedes)
        hints = await store.insights.possible_contradictions(insight.id)
        return pick(insight, "id", "content", "source_ids", "created_at", *FACT_FIELDS) | {
            # valid insights this one may contradict: supersede them if the fact changed
            "possibly_contradicts": [
                {"id": h.insight.id, "content": h.insight.content, "similarity": h.similarity}
                for h in hints
            ]
        }

    @tool("Store an episode: what was tried, how it went (reward -1..1) and the lesson.")
    async def store_episode(
        query: Annotated[str, nonblank("What was attempted.", max_length=MAX_QUERY_CHARS)],
        reward: Annotated[float, bounded("Outcome from -1 (failure) to 1 (success).", -1.0, 1.0)],
        reflection: Annotated[str, nonblank("The lesson learned.")],
        supersedes: Annotated[list[int], superseded_ids("episode")] = [],  # noqa: B006
    ) -> Result:
        episode = await store.episodes.store(query, reward, reflection, supersedes=supersedes)
        fields = ("id", "query", "reward", "reflection", "created_at", *FACT_FIELDS)
        return pick(episode, *fields)

    @tool(
        "Graph-aware hybrid search (vector + full text fused by score, carried along the memory "
        "graph, boosted by the session's working memory and its graph neighbours); every hit "
        "explains its rank."
    )
    async def hybrid_search(
        query: Annotated[str, nonblank("What to look for.", max_length=MAX_QUERY_CHARS)],
        top_k: Annotated[int, bounded(f"How many hits (1..{MAX_TOP_K}).", 1, MAX_TOP_K)] = 10,
        session_id: Annotated[
            str,
            nonblank(
                'Session whose working memory boosts hits (default "default").',
                max_length=MAX_SESSION_ID_CHARS,
            ),
        ] = "default",
        layers: Annotated[list[Layer], Field(description="Layers to search.")] = ["INSIGHT"],  # noqa: B006
        as_of: AsOf = None,
        interpret_time: InterpretTime = None,
        reference_time: ReferenceTime = None,
        min_relevance: MinRelevance = None,
    ) -> Result:
        hits = await store.search(
            query,
            top_k,
            session_id,
            layers,
            as_of=as_of,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )
        return {"hits": plain(hits)}

    @tool("Create a graph node, or update the one with the same (label, name).")
    async def graph_add_node(
        name: NodeName,
        label: Label = "Entity",
        properties: Annotated[
            dict[str, Any] | None, Field(description="Optional JSON object.")
        ] = None,
        insight_id: Annotated[int | None, row_id("Insight it stands for.")] = None,
        episode_id: Annotated[int | None, row_id("Episode it stands for.")] = None,
        raw_id: Annotated[int | None, row_id("Raw turn it stands for.")] = None,
    ) -> Result:
        node = await store.graph.add_node(
            label, name, properties, insight_id=insight_id, episode_id=episode_id, raw_id=raw_id
        )
        return plain(node)

    @tool("Connect two nodes by name with a typed, weighted edge (missing nodes are created).")
    async def graph_add_edge(
        source_name: Annotated[str, nonblank("Name of the source node.")],
        target_name: Annotated[str, nonblank("Name of the target node.")],
        relation: Annotated[
            str, nonblank('The relation, e.g. "works_at".', max_length=MAX_LABEL_CHARS)
        ],
        source_label: Label = "Entity",
        target_label: Label = "Entity",
        weight: Annotated[float, bounded("Edge weight (default 1.0).", 0.0, MAX_EDGE_WEIGHT)] = 1.0,
        supersedes: Annotated[list[int], superseded_ids("edge")] = [],  # noqa: B006
    ) -> Result:
        edge = await store.graph.add_edge(
            (source_label, source_name),
            (target_label, target_name),
            relation,
            weight,
            create_missing=True,
            supersedes=supersedes,
        )
        return plain(edge)

    @tool(
        "Nodes within `depth` hops of a node, each once at its shortest distance, with a path: "
        "at most `first`, nearest first."
    )
    async def graph_query_neighbors(
        node_name: Annotated[str, nonblank("Name of the start node.")],
        node_label: Label = "Entity",
        depth: Annotated[int, bounded(f"Hops (1..{MAX_DEPTH}).", 1, MAX_DEPTH)] = 1,
        relation: Annotated[str | None, Field(description="Only this relation.")] = None,
        direction: Annotated[
            Literal["OUT", "IN", "BOTH"], Field(description="Edges to follow.")
        ] = "BOTH",
        as_of: AsOf = None,
        first: Annotated[
            int | None,
            Field(
                description="At most this many neighbours, nearest first, then by node id "
                "(default the server's GQL_MEMORY_DEFAULT_PAGE_SIZE, 100; at most "
                "GQL_MEMORY_MAX_PAGE_SIZE, 1000).",
                json_schema_extra={"minimum": 1},
            ),
        ] = None,
    ) -> Result:
        node = await store.graph.node_by_name(node_label, node_name)
        if node is None:
            raise NotFoundError(f"Node ({node_label}, {node_name}) not found")
        found = await store.graph.neighbors(
            node.id, depth, relation, direction, as_of=as_of, first=first
        )
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
        from_name: Annotated[str, nonblank("Name of the start node.")],
        to_name: Annotated[str, nonblank("Name of the end node.")],
        from_label: Label = "Entity",
        to_label: Label = "Entity",
        max_depth: Annotated[
            int, bounded(f"Longest path searched (1..{MAX_DEPTH}).", 1, MAX_DEPTH)
        ] = MAX_DEPTH,
        as_of: AsOf = None,
    ) -> Result:
        start = await store.graph.node_by_name(from_label, from_name)
        goal = await store.graph.node_by_name(to_label, to_name)
        path = None
        if start is not None and goal is not None:
            path = await store.graph.path(start.id, goal.id, max_depth, as_of=as_of)
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
        query: Annotated[
            str, nonblank("What the agent is about to do.", max_length=MAX_QUERY_CHARS)
        ],
        session_id: Session = "default",
        max_tokens: Annotated[
            int,
            bounded(
                f"Token budget ({CONTEXT_MIN_TOKENS}..{CONTEXT_MAX_TOKENS}).",
                CONTEXT_MIN_TOKENS,
                CONTEXT_MAX_TOKENS,
            ),
        ] = CONTEXT_DEFAULT_MAX_TOKENS,
        include: Annotated[list[Section], Field(description="Sections to include.")] = [  # noqa: B006
            "WORKING",
            "SEARCH",
            "EPISODES",
            "GRAPH",
        ],
        as_of: AsOf = None,
        interpret_time: InterpretTime = None,
        reference_time: ReferenceTime = None,
        min_relevance: ContextMinRelevance = None,
    ) -> Result:
        context = await store.context(
            query,
            session_id,
            max_tokens,
            include,
            as_of=as_of,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )
        return pick(
            context,
            "text",
            "total_tokens",
            "max_tokens",
            "sections",
            "notes",
            "below_relevance",
            "min_relevance",
        )
