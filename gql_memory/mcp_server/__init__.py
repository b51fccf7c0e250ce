"""MCP bridge: `gql-memory mcp` serves the Model Context Protocol over stdio.

Agents that speak MCP get the memory service as ten tools (store_raw_dialogue,
update_working_memory, compress_to_l2_insight, store_episode, hybrid_search, graph_add_node,
graph_add_edge, graph_query_neighbors, graph_find_path, get_context), the nine of the
reference memory server (create_entities ... open_nodes; reference_tools.py) and five read-only
resources (memory://working-memory, memory://stale-memory, memory://l0-raw,
memory://l2-insights, memory://episode-memory; seed 003). Both call the same service layer
as the GraphQL API, through an ``AsyncMemoryStore`` (DATABASE_URL or the embedded
PostgreSQL). Failures take the seeds' shapes (errors.py); a malformed frame gets its JSON-RPC
error (framing.py) and the bridge reads on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import CallToolResult, InputRequiredResult, Tool
from opentelemetry.trace import Status, StatusCode
from pydantic import ConfigDict
from pydantic.networks import AnyUrl

from gql_memory import __version__
from gql_memory.config import Settings
from gql_memory.mcp_server.errors import tool_error
from gql_memory.mcp_server.framing import checked_stdio
from gql_memory.mcp_server.reference_tools import (
    REFERENCE_TOOL_NAMES,
    REFERENCE_TOOLS,
    call_reference_tool,
    reference_handlers,
)
from gql_memory.mcp_server.request_spans import KnownToolNames
from gql_memory.mcp_server.resources import JSON, MemoryResources
from gql_memory.mcp_server.tools import register_tools
from gql_memory.memory import DEFAULT_NAMESPACE
from gql_memory.store import AsyncMemoryStore
from gql_memory.tracing.conventions import ERROR_TYPE, MCP_METHOD_NAME, TOOL_NAME
from gql_memory.tracing.spans import UNKNOWN_CALL

INSTRUCTIONS = (
    "Long-term memory for this agent. Call get_context before answering to load what is "
    "relevant; store turns with store_raw_dialogue, keep short-lived facts with "
    "update_working_memory, distil durable knowledge with compress_to_l2_insight and lessons "
    "with store_episode."
)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class MemoryMCPServer(MCPServer[None]):
    """MCPServer that reads its memory:// resources itself, answers failed calls and reads
    in the seeds' shapes, and whose stdio transport answers a malformed frame instead of
    dropping it."""

    def __init__(self, resources: MemoryResources, store: AsyncMemoryStore, **options: Any) -> None:
        super().__init__("gql-memory", **options)
        self.resources = resources
        resources.register(self)
        self.store = store
        self.reference_handlers = reference_handlers(store)
        # the SDK's span of each message (the list's documented seam) sees known names only
        self.middleware[:] = [
            KnownToolNames(m, self.serves_tool) if isinstance(m, OpenTelemetryMiddleware) else m
            for m in self.middleware
        ]

    def serves_tool(self, name: str) -> bool:
        return name in REFERENCE_TOOL_NAMES or self._tool_manager.get_tool(name) is not None

    def refuse_unknown_arguments(self) -> None:
        """Make each of our tools refuse an argument it does not take, as GraphQL refuses an
        unknown argument: a misspelt or camelCase name (``minRelevance``, ``since``) would
        otherwise be dropped without a word and the call run without it. The input schemas
        say so too (``additionalProperties: false``), so a client can check before calling.
        The reference tools' schemas are their own (reference_tools.py)."""
        for tool in self._tool_manager.list_tools():
            model = tool.fn_metadata.arg_model
            closed = cast(
                type[ArgModelBase],
                type(
                    model.__name__,
                    (model,),
                    {"model_config": ConfigDict(**{**model.model_config, "extra": "forbid"})},
                ),
            )
            tool.fn_metadata.arg_model = closed  # read at each call (FuncMetadata)
            tool.parameters = closed.model_json_schema(by_alias=True)

    async def list_tools(self) -> list[Tool]:
        """Ours, then the nine of the reference memory server (reference_tools.py)."""
        return [*await super().list_tools(), *REFERENCE_TOOLS]

    async def run_stdio_async(self) -> None:
        async with checked_stdio() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                read_stream, write_stream, self._lowlevel_server.create_initialization_options()
            )

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[None, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        tracing = self.store.tracing
        if tracing is None:
            return await self._call_tool(name, arguments, context)
        # a child of the SDK's own "tools/call <tool>" server span (which continues the
        # caller's _meta.traceparent): the memory operation the call is, named by one of our
        # tools, never by what a client sent
        shown = name if self.serves_tool(name) else UNKNOWN_CALL
        with tracing.operation(
            shown,
            self.store.namespace,
            attributes={TOOL_NAME: shown, MCP_METHOD_NAME: "tools/call"},
        ) as span:
            result = await self._call_tool(name, arguments, context)
            if isinstance(result, CallToolResult) and result.is_error:
                error = (result.structured_content or {}).get("error", "tool error")
                span.set_attribute(ERROR_TYPE, str(error))
                span.set_status(Status(StatusCode.ERROR, str(error)))
            return result

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[None, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        if name in REFERENCE_TOOL_NAMES:
            return await call_reference_tool(self.reference_handlers, name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:  # the SDK's and the tools' failures; MCPError passes through
            return tool_error(name, exc)

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[None, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        body = await self.resources.read(str(uri))
        return [ReadResourceContents(content=body, mime_type=JSON)]


def build_server(store: AsyncMemoryStore) -> MemoryMCPServer:
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
        MemoryResources(store),
        store,
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=level if level in LOG_LEVELS else "INFO",
    )
    register_tools(server, store)
    server.refuse_unknown_arguments()
    return server


def run_stdio(settings: Settings, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Serve MCP on stdin/stdout until the client closes the connection.

    The store (and the embedded PostgreSQL) starts inside the server's lifespan, after the
    stdio transport has claimed stdout, so nothing a child process prints can corrupt the
    protocol stream.
    """
    store = AsyncMemoryStore(settings=settings, namespace=namespace)
    anyio.run(build_server(store).run_stdio_async)
