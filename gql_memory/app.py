"""Starlette application factory. Shared resources live in the lifespan, never in globals."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from graphql import ExecutionResult
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from gql_memory.api.context import Context
from gql_memory.api.errors import format_error
from gql_memory.api.loaders import Loaders
from gql_memory.api.operation_metrics import OperationMetrics
from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, start_embedded
from gql_memory.db.migrate import is_current, upgrade
from gql_memory.embeddings import describe, make_provider
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.event_hub import EventHub
from gql_memory.events_listener import EventListener
from gql_memory.memory import DEFAULT_NAMESPACE, Memory
from gql_memory.memory.embedding_config import verify_embedding_config
from gql_memory.memory.rules import rules_for
from gql_memory.metrics import Metrics

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-request-id"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class MemoryGraphQL(GraphQL):  # type: ignore[type-arg]
    """strawberry's ASGI view with our context and error formatting."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        super().__init__(
            build_schema(settings, [lambda: OperationMetrics(metrics)]),
            graphql_ide="graphiql" if settings.graphiql else None,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
        )

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        state = request.app.state
        memory = Memory(state.db, state.settings, DEFAULT_NAMESPACE, state.embedder)
        return Context(
            request=request,
            response=response,
            memory=memory,
            settings=state.settings,
            request_id=request.scope.get("state", {}).get("request_id", "-"),
            loaders=Loaders(memory),
            events=getattr(state, "event_hub", None),
        )

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        request_id = request.scope.get("state", {}).get("request_id")
        response: GraphQLHTTPResponse = {"data": result.data}
        if result.errors:
            response["errors"] = [format_error(e, request_id) for e in result.errors]
        if result.extensions:
            response["extensions"] = result.extensions
        return response


class RequestIdMiddleware:
    """Gives every request an id (the caller's X-Request-ID if sane) and echoes it back."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers", [])).get(REQUEST_ID_HEADER.encode(), b"").decode()
        request_id = given if _SAFE_REQUEST_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)


class BodySizeLimitMiddleware:
    """Rejects request bodies over the limit with 413 and a GraphQL-shaped error."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except _BodyTooLarge:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {
                "errors": [
                    {
                        "message": f"Request body exceeds {self.max_bytes} bytes",
                        "extensions": {"code": "BAD_USER_INPUT"},
                    }
                ]
            },
            status_code=413,
        )
        await response(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Readiness: the database answers and its schema is at the newest migration."""
    db: Database = request.app.state.db
    try:
        async with asyncio.timeout(3):
            async with db.read() as conn:
                await conn.execute(text("SELECT 1"))
            current = await is_current(db)
    except Exception as exc:  # any failure means "not ready"; say why without internals
        log.warning("readiness check failed: %s", exc)
        return JSONResponse({"status": "unavailable", "database": "unreachable"}, 503)
    if not current:
        return JSONResponse({"status": "unavailable", "database": "migrations pending"}, 503)
    return JSONResponse({"status": "ok", "database": "ok"})


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus metrics of this server (of all its workers in multiprocess mode)."""
    body, content_type = request.app.state.metrics.exposition()
    return Response(body, media_type=content_type)


def create_app(settings: Settings | None = None) -> Starlette:
    """The ASGI app. Without DATABASE_URL the lifespan starts the embedded PostgreSQL."""
    settings = settings or Settings()
    metrics = Metrics(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Extraction rules are checked (and compiled, once) before anything starts: a bad
        # rule aborts startup with a message naming it.
        rules_for(settings)
        embedded: EmbeddedPostgres | None = None
        url = settings.database_url
        if url is None:
            embedded = await asyncio.to_thread(start_embedded, settings.data_dir)
            url = embedded.url
        db = Database.from_url(url, settings)
        metrics.instrument_pool(db.engine, settings)
        embedder = InstrumentedEmbedder(make_provider(settings), metrics)
        # Live events: this process's subscribers, fed by its one LISTEN connection.
        hub = EventHub(settings.subscriber_queue_size, observer=metrics)
        listener = EventListener(url, hub, settings, observer=metrics)
        live = settings.live_events
        try:
            await upgrade(db, embedder.dim)
            await verify_embedding_config(db, embedder)
            log.info(describe(embedder))
            if live:
                await listener.start()
            app.state.db = db
            app.state.settings = settings
            app.state.embedder = embedder
            app.state.event_hub = hub if live else None
            app.state.metrics = metrics
            yield
        finally:
            hub.close()
            await listener.stop()
            await embedder.aclose()
            await db.dispose()
            metrics.process_exited()
            if embedded is not None:
                await asyncio.to_thread(embedded.stop)

    graphql = MemoryGraphQL(settings, metrics)
    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
    ]
    if settings.metrics:
        routes.append(Route("/metrics", metrics_endpoint))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    return app
