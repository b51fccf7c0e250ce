"""MCP bridge: `gql-memory mcp` serves the Model Context Protocol over stdio.

Agents that speak MCP get the memory service as ten tools (store_raw_dialogue,
update_working_memory, compress_to_l2_insight, store_episode, hybrid_search, graph_add_node,
graph_add_edge, graph_query_neighbors, graph_find_path, get_context) and five read-only
resources (memory://working-memory, memory://stale-memory, memory://l0-raw,
memory://l2-insights, memory://episode-memory; seed 003). Both call the same service layer
as the GraphQL API, through a ``MemoryStore`` (DATABASE_URL or the embedded PostgreSQL).
A malformed frame gets its JSON-RPC error (framing.py) and the bridge reads on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult
from pydantic.networks import AnyUrl

from gql_memory import __version__
from gql_memory.config import Settings
from gql_memory.mcp_server.framing import checked_stdio
from gql_memory.mcp_server.resources import check_parameters, register_resources
from gql_memory.mcp_server.tools import register_tools
from gql_memory.memory import DEFAULT_NAMESPACE
from gql_memory.store import MemoryStore

INSTRUCTIONS = (
    "Long-term memory for this agent. Call get_context before answering to load what is "
    "relevant; store turns with store_raw_dialogue, keep short-lived facts with "
    "update_working_memory, distil durable knowledge with compress_to_l2_insight and lessons "
    "with store_episode."
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class MemoryMCPServer(MCPServer[None]):
    """MCPServer whose memory:// resources refuse parameters they do not know, and whose
    stdio transport answers a malformed frame instead of dropping it."""

    async def run_stdio_async(self) -> None:
        async with checked_stdio() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                read_stream, write_stream, self._lowlevel_server.create_initialization_options()
            )

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[None, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        check_parameters(str(uri))
        return await super().read_resource(uri, context)


def build_server(store: MemoryStore) -> MemoryMCPServer:
    """The MCP server over ``store``; connects it for the server's lifetime if needed."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[None]) -> AsyncIterator[None]:
        if store.connected:  # connected by the caller
            yield
            return
        async with store:
            yield

    level = store.settings.log_level.upper()
    server = MemoryMCPServer(
        "gql-memory",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=level if level in LOG_LEVELS else "INFO",  # type: ignore[arg-type]
    )
    register_tools(server, store)
    register_resources(server, store)
    return server


def run_stdio(settings: Settings, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Serve MCP on stdin/stdout until the client closes the connection.

    The store (and the embedded PostgreSQL) starts inside the server's lifespan, after the
    stdio transport has claimed stdout, so nothing a child process prints can corrupt the
    protocol stream.
    """
    store = MemoryStore(settings=settings, namespace=namespace)
    anyio.run(build_server(store).run_stdio_async)
