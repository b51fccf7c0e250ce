"""The read-only memory:// resources of seed 003, with its parameters and error semantics.

The bridge reads memory:// URIs itself (the SDK's templates only list them): the query string
is decoded as a form (``+`` is a space, ``%20`` too), every parameter is checked under the
seed's name, and failures take the seed's shape (errors.py). Invalid parameters (a missing or
empty query, a malformed number or date range, a limit out of range, a date range over a
year, a parameter the resource does not know, one given twice) are the JSON-RPC error -32602
(the seed's "400"); an unknown resource is -32002 (its "404"); a query without matches is
``[]``. Every resource only reads (READ ONLY transactions): reading never changes memory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import SplitResult, parse_qsl, urlsplit

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.exceptions import MCPError

from gql_memory.config import MAX_DATE_RANGE_DAYS, MAX_QUERY_CHARS
from gql_memory.errors import ValidationError
from gql_memory.mcp_server.errors import invalid_parameter, read_failed, unknown_resource
from gql_memory.mcp_server.payloads import pick
from gql_memory.mcp_server.tools import MAX_SESSION_ID_CHARS
from gql_memory.memory.episodes import DEFAULT_MIN_SIMILARITY, DEFAULT_TOP_K
from gql_memory.memory.raw import parse_date_range
from gql_memory.memory.validation import require_importance, require_text
from gql_memory.memory.vectors import require_similarity, require_top_k
from gql_memory.memory.working.archive import require_reason
from gql_memory.store import AsyncMemoryStore

JSON = "application/json"
INSIGHTS_TOP_K = 5  # seed 003: memory://l2-insights returns the top 5 by default
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
Rows = list[dict[str, Any]]
Handler = Callable[..., Awaitable[Rows]]


def query_parameters(parts: SplitResult, uri: str) -> dict[str, str]:
    """The URI's parameters, decoded as a form; unknown or repeated ones are refused (typos
    must not be silently ignored: ``sesion_id=x`` would otherwise read every session)."""
    allowed = PARAMETERS[parts.netloc]
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    for name in names:
        if name not in allowed:
            raise invalid_parameter(
                f"unknown parameter {name!r} for memory://{parts.netloc} "
                f"(allowed: {', '.join(allowed)})",
                uri,
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise invalid_parameter(f"parameter {repeated[0]!r} is given more than once", uri)
    return dict(pairs)


def _number(value: str | None, name: str, kind: Callable[[str], Any]) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError as exc:
        label = "an integer" if kind is int else "a number"
        raise ValidationError(f"{name} must be {label}, not {value!r}") from exc


def _query(value: str | None) -> str:
    if value is None or not value.strip():
        raise ValidationError("query is required and must not be empty")
    return require_text(value, "query", max_length=MAX_QUERY_CHARS)


def _session(value: str | None) -> str | None:
    if value is None:
        return None
    return require_text(value, "session_id", max_length=MAX_SESSION_ID_CHARS)


class MemoryResources:
    """The five memory:// resources over one store: registered for listing, read here."""

    def __init__(self, store: AsyncMemoryStore) -> None:
        self.store = store
        self.handlers: dict[str, Handler] = {
            "l2-insights": self.l2_insights,
            "working-memory": self.working_memory,
            "episode-memory": self.episode_memory,
            "l0-raw": self.l0_raw,
            "stale-memory": self.stale_memory,
        }

    def register(self, server: MCPServer) -> None:
        """List the resources (and their parameter-free variants) on ``server``."""
        for name, handler in self.handlers.items():
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
                server.resource(
                    f"memory://{name}", name=name, description=description, mime_type=JSON
                )(_without_parameters(handler))

    async def read(self, uri: str) -> str:
        """The resource's JSON; MCPError in the seed's shape when it cannot be read."""
        parts = urlsplit(uri)
        handler = self.handlers.get(parts.netloc) if parts.scheme == "memory" else None
        if handler is None or parts.path or parts.fragment:
            raise unknown_resource(uri)
        parameters = query_parameters(parts, uri)
        try:
            return json.dumps(await handler(**parameters), ensure_ascii=False)
        except MCPError:
            raise
        except Exception as exc:
            raise read_failed(exc, uri) from exc

    def _limit(self, value: str | None) -> int:
        settings = self.store.settings
        count = _number(value, "limit", int)
        if count is None:
            return settings.default_page_size
        if not 1 <= count <= settings.max_page_size:
            raise ValidationError(f"limit must be between 1 and {settings.max_page_size}")
        return int(count)

    async def l2_insights(self, query: str | None = None, top_k: str | None = None) -> Rows:
        """Top-K L2 insights for a query (default top_k 5, at most 100):
        [{id, content, score, source_ids}]."""
        k = _number(top_k, "top_k", int)
        k = INSIGHTS_TOP_K if k is None else require_top_k(k, "top_k")
        hits = await self.store.insights.search(_query(query), k)
        return [{**pick(h.insight, "id", "content", "source_ids"), "score": h.score} for h in hits]

    async def working_memory(self, session_id: str | None = None, limit: str | None = None) -> Rows:
        """Working memory, most recently accessed first: the session's, or without session_id
        every session's, each item with its session_id."""
        count = self._limit(limit)
        session = _session(session_id)
        if session is None:
            items = await self.store.working.list_all_sessions(count)
        else:
            items = (await self.store.working.list(session))[:count]
        fields = ("id", "session_id", "content", "importance", "attention")
        return [pick(i, *fields, "last_accessed", "created_at") for i in items]

    async def episode_memory(
        self,
        query: str | None = None,
        min_similarity: str | None = None,
        top_k: str | None = None,
    ) -> Rows:
        """Similar past episodes (default min_similarity 0.70, top 3):
        [{id, query, reward, reflection, similarity}]."""
        threshold = _number(min_similarity, "min_similarity", float)
        if threshold is not None:
            threshold = require_similarity(threshold, "min_similarity")
        k = _number(top_k, "top_k", int)
        if k is not None:
            k = require_top_k(k, "top_k")
        hits = await self.store.episodes.similar(
            _query(query),
            DEFAULT_MIN_SIMILARITY if threshold is None else threshold,
            DEFAULT_TOP_K if k is None else k,
        )
        fields = ("id", "query", "reward", "reflection")
        return [{**pick(h.episode, *fields), "similarity": h.similarity} for h in hits]

    async def l0_raw(
        self,
        session_id: str | None = None,
        date_range: str | None = None,
        speaker: str | None = None,
        limit: str | None = None,
    ) -> Rows:
        """Raw dialogue turns, newest first; date_range as YYYY-MM-DD:YYYY-MM-DD, at most a
        year."""
        start = end = None
        if date_range is not None:
            start, end = parse_date_range(date_range)
            if (end.date() - start.date()).days + 1 > MAX_DATE_RANGE_DAYS:
                raise ValidationError(
                    f"date_range must not span more than {MAX_DATE_RANGE_DAYS} days (one year)"
                )
        page = await self.store.raw.list(
            session_id=_session(session_id),
            from_=start,
            to=end,
            speaker=None if speaker is None else require_text(speaker, "speaker"),
            first=self._limit(limit),
        )
        fields = ("id", "session_id", "timestamp", "speaker", "content", "metadata")
        return [pick(t, *fields) for t in page.items]

    async def stale_memory(
        self,
        importance_min: str | None = None,
        session_id: str | None = None,
        reason: str | None = None,
        limit: str | None = None,
    ) -> Rows:
        """Archived items, newest first, optionally with importance >= importance_min."""
        minimum = _number(importance_min, "importance_min", float)
        if minimum is not None:
            minimum = require_importance(minimum, "importance_min")
        page = await self.store.stale.list(
            importance_min=minimum,
            session_id=_session(session_id),
            reason=None if reason is None else require_reason(reason),
            first=self._limit(limit),
        )
        fields = ("id", "session_id", "original_id", "original_content", "importance")
        return [pick(i, *fields, "reason", "archived_at") for i in page.items]


def _without_parameters(handler: Handler) -> Callable[[], Awaitable[Rows]]:
    async def read() -> Rows:
        return await handler()

    return read
