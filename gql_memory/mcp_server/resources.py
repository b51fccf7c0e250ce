"""The read-only memory:// resources of seed 003, with its parameters and error semantics.

Invalid parameters (a missing or empty query, a malformed number or date range, a limit out
of range, a parameter the resource does not know) are an MCP error with code -32602
(invalid params, the seed's "400") and a message naming the parameter; a query without
matches is ``[]``; an unknown resource URI is the SDK's "Unknown resource" error. Every
resource only reads (READ ONLY transactions): reading never changes memory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from gql_memory.errors import ValidationError
from gql_memory.mcp_server.payloads import pick
from gql_memory.memory.episodes import DEFAULT_MIN_SIMILARITY, DEFAULT_TOP_K
from gql_memory.store import MemoryStore

JSON = "application/json"
# Each resource's query parameters (all optional on the wire; the handlers say which are
# required). A parameter not listed here is refused rather than silently ignored.
PARAMETERS = {
    "l2-insights": ("query", "top_k"),
    "working-memory": ("session_id", "limit"),
    "episode-memory": ("query", "min_similarity", "top_k"),
    "l0-raw": ("session_id", "date_range", "speaker", "limit"),
    "stale-memory": ("importance_min", "session_id", "reason", "limit"),
}
STATIC = ("working-memory", "stale-memory", "l0-raw")  # readable without any parameter


def invalid(message: str, uri: str | None = None) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message, data={"uri": uri} if uri else None)


def check_parameters(uri: str) -> None:
    """Refuse unknown or repeated query parameters of a memory:// URI (typos must not be
    silently ignored: `sesion_id=x` would otherwise read every session)."""
    parts = urlsplit(uri)
    allowed = PARAMETERS.get(parts.netloc)
    if parts.scheme != "memory" or allowed is None:
        return
    names = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
    for name in names:
        if name not in allowed:
            raise invalid(
                f"unknown parameter {name!r} for memory://{parts.netloc} "
                f"(allowed: {', '.join(allowed)})",
                uri,
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise invalid(f"parameter {repeated[0]!r} is given more than once", uri)


def _number(value: str | None, name: str, kind: Callable[[str], Any]) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError as exc:
        label = "an integer" if kind is int else "a number"
        raise invalid(f"{name} must be {label}, not {value!r}") from exc


def _required(value: str | None, name: str) -> str:
    if value is None or not value.strip():
        raise invalid(f"{name} is required and must not be empty")
    return value


async def _json(read: Awaitable[Iterable[Any]]) -> str:
    try:
        return json.dumps(list(await read), ensure_ascii=False)
    except ValidationError as exc:
        raise invalid(str(exc)) from exc


def register_resources(server: MCPServer, store: MemoryStore) -> None:
    """Register the five memory:// resources (and parameter-free variants) on ``server``."""

    async def l2_insights(query: str | None = None, top_k: str | None = None) -> str:
        """Top-K L2 insights for a query: [{id, content, score, source_ids}]."""
        k = _number(top_k, "top_k", int)

        async def read() -> list[dict[str, Any]]:
            hits = await store.insights.search(_required(query, "query"), 5 if k is None else k)
            return [
                {**pick(h.insight, "id", "content", "source_ids"), "score": h.score} for h in hits
            ]

        return await _json(read())

    async def working_memory(session_id: str | None = None, limit: str | None = None) -> str:
        """The session's working memory, most recently accessed first."""
        count = _number(limit, "limit", int)

        async def read() -> list[dict[str, Any]]:
            if count is not None and not 1 <= count <= store.settings.max_page_size:
                raise ValidationError(f"limit must be between 1 and {store.settings.max_page_size}")
            items = await store.working.list(session_id if session_id is not None else "default")
            fields = ("id", "session_id", "content", "importance", "attention")
            return [pick(i, *fields, "last_accessed", "created_at") for i in items[:count]]

        return await _json(read())

    async def episode_memory(
        query: str | None = None, min_similarity: str | None = None, top_k: str | None = None
    ) -> str:
        """Similar past episodes (default min_similarity 0.70, top 3)."""
        threshold = _number(min_similarity, "min_similarity", float)
        k = _number(top_k, "top_k", int)

        async def read() -> list[dict[str, Any]]:
            hits = await store.episodes.similar(
                _required(query, "query"),
                DEFAULT_MIN_SIMILARITY if threshold is None else threshold,
                DEFAULT_TOP_K if k is None else k,
            )
            fields = ("id", "query", "reward", "reflection")
            return [{**pick(h.episode, *fields), "similarity": h.similarity} for h in hits]

        return await _json(read())

    async def l0_raw(
        session_id: str | None = None,
        date_range: str | None = None,
        speaker: str | None = None,
        limit: str | None = None,
    ) -> str:
        """Raw dialogue turns, newest first; date_range as YYYY-MM-DD:YYYY-MM-DD."""
        count = _number(limit, "limit", int)

        async def read() -> list[dict[str, Any]]:
            page = await store.raw.list(
                session_id=session_id, date_range=date_range, speaker=speaker, first=count
            )
            fields = ("id", "session_id", "timestamp", "speaker", "content", "metadata")
            return [pick(t, *fields) for t in page.items]

        return await _json(read())

    async def stale_memory(
        importance_min: str | None = None,
        session_id: str | None = None,
        reason: str | None = None,
        limit: str | None = None,
    ) -> str:
        """Archived items, newest first, optionally with importance >= importance_min."""
        minimum = _number(importance_min, "importance_min", float)
        count = _number(limit, "limit", int)

        async def read() -> list[dict[str, Any]]:
            page = await store.stale.list(
                importance_min=minimum, session_id=session_id, reason=reason, first=count
            )
            fields = ("id", "session_id", "original_id", "original_content", "importance")
            return [pick(i, *fields, "reason", "archived_at") for i in page.items]

        return await _json(read())

    handlers = {
        "l2-insights": l2_insights,
        "working-memory": working_memory,
        "episode-memory": episode_memory,
        "l0-raw": l0_raw,
        "stale-memory": stale_memory,
    }
    for name, handler in handlers.items():
        query = "{?" + ",".join(PARAMETERS[name]) + "}"
        description = (handler.__doc__ or "").strip()
        server.resource(
            f"memory://{name}{query}",
            name=name,
            description=description,
            mime_type=JSON,
            # the parameters are search text and filters, not file paths
            security=ResourceSecurity(exempt_params=frozenset(PARAMETERS[name])),
        )(handler)
        if name in STATIC:
            server.resource(f"memory://{name}", name=name, description=description, mime_type=JSON)(
                _without_parameters(handler)
            )


def _without_parameters(handler: Callable[..., Awaitable[str]]) -> Callable[[], Awaitable[str]]:
    async def read() -> str:
        return await handler()

    return read
