"""The MCP SDK's server span of each message (its ``OpenTelemetryMiddleware``: ``tools/call
<tool>`` with ``gen_ai.tool.name``) names only the tools this server has. Any other ``name``
a client sends is ``unknown`` there, as GraphQL's unknown fields are: otherwise a client
could put text of its choosing, of any length, into span names (and past
GQL_MEMORY_TRACE_CONTENT, which is off by default)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from gql_memory.tracing.spans import UNKNOWN_CALL


class KnownToolNames:
    """The SDK's span middleware, shown a served tool's name or ``unknown``; the message
    itself goes on as it came (the answer still says which tool is unknown)."""

    def __init__(self, spans: ServerMiddleware[Any], serves: Callable[[str], bool]) -> None:
        self.spans = spans
        self.serves = serves

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        name = ctx.params.get("name") if ctx.params else None
        if name is None or (
            ctx.method == "tools/call" and isinstance(name, str) and self.serves(name)
        ):
            return await self.spans(ctx, call_next)
        shown = replace(ctx, params={**(ctx.params or {}), "name": UNKNOWN_CALL})

        async def as_sent(_: ServerRequestContext[Any, Any]) -> HandlerResult:
            return await call_next(ctx)

        return await self.spans(shown, as_sent)
