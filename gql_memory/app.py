"""Starlette application factory. Shared resources live in the lifespan, never in globals."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cross_web import HTTPException
from graphql import ExecutionResult
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types.unset import UNSET, UnsetType

from gql_memory.api.auth import Authenticator, Credentials
from gql_memory.api.context import Context
from gql_memory.api.errors import format_error
from gql_memory.api.operation_metrics import OperationMetrics
from gql_memory.api.schema import build_schema
from gql_memory.auth import KeyVerifier, auth_mode
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, start_embedded
from gql_memory.db.fair import FairShare, NamespacedDatabase
from gql_memory.db.migrate import ensure_text_search_config, is_current, upgrade
from gql_memory.embeddings import describe, make_provider
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.event_hub import EventHub
from gql_memory.events_listener import EventListener
from gql_memory.memory import Memory
from gql_memory.memory.embedding_config import verify_embedding_config
from gql_memory.memory.rules import rules_for
from gql_memory.metrics import Metrics
from gql_memory.middleware import BodySizeLimitMiddleware, RequestContextMiddleware, error_response

log = logging.getLogger(__name__)

JSON_REQUIRED = (
    "POST /graphql needs 'Content-Type: application/json'; form, multipart and text bodies "
    "are refused (a web page could send those cross-site)"
)
AUTH_STATUS = {"UNAUTHENTICATED": 401, "FORBIDDEN": 403}


class MemoryGraphQL(GraphQL):  # type: ignore[type-arg]
    """strawberry's ASGI view with authentication, our context, JSON-only errors."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        super().__init__(
            build_schema(settings, [lambda: OperationMetrics(metrics)]),
            graphql_ide="graphiql" if settings.graphiql else None,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        state = scope.setdefault("state", {})
        request_id = state.get("request_id")
        response: Response
        if request.method == "POST" and not _is_json(request.headers.get("content-type", "")):
            response = error_response(415, JSON_REQUIRED, request_id=request_id)
        else:
            try:
                response = await self.run(request)
            except HTTPException as exc:  # strawberry's plain-text refusals, as GraphQL JSON
                response = error_response(exc.status_code, exc.reason, request_id=request_id)
            except ClientDisconnect:
                # The body ended early: the client went away mid-request. Nothing ran, nothing
                # to answer, nothing wrong with the server.
                log.info("client disconnected before the request body was complete")
                state.setdefault("error_codes", []).append("BAD_USER_INPUT")
                return
        if response.status_code in (400, 405, 413, 415):
            state.setdefault("error_codes", []).append("BAD_USER_INPUT")
        await response(scope, receive, send)

    def decode_json(self, data: str | bytes) -> object:
        """Any undecodable body is a 400 (strawberry only catches JSONDecodeError)."""
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise HTTPException(
                400, "Unable to parse request body as JSON (invalid or nested too deeply)"
            ) from exc
        if not isinstance(value, dict | list):
            raise HTTPException(400, "The request body must be a JSON object")
        return value

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        state = request.app.state
        credentials = await state.authenticator.from_headers(request.headers)
        scope_state = request.scope.setdefault("state", {})
        _note_caller(scope_state, credentials)
        return Context(
            request=request,
            response=response,
            settings=state.settings,
            request_id=scope_state.get("request_id", "-"),
            credentials=credentials,
            build_memory=lambda namespace: Memory(
                NamespacedDatabase(state.db, namespace, state.fair_share),
                state.settings,
                namespace,
                state.embedder,
            ),
            events=getattr(state, "event_hub", None),
            refresh_credentials=(
                state.authenticator.refresh if isinstance(request, WebSocket) else None
            ),
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """A key in the connection_init payload overrides the handshake's; no key, no socket."""
        authenticator: Authenticator = context.request.app.state.authenticator
        context.credentials = await authenticator.from_connection_params(
            context.connection_params, context.credentials
        )
        _note_caller(context.request.scope.setdefault("state", {}), context.credentials)
        if context.credentials.principal is None:
            raise ConnectionRejectionError()
        return UNSET

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        state = request.scope.setdefault("state", {})
        request_id = state.get("request_id")
        response: GraphQLHTTPResponse = {"data": result.data}
        if result.errors:
            response["errors"] = [format_error(e, request_id) for e in result.errors]
            state.setdefault("error_codes", []).extend(
                e["extensions"]["code"] for e in response["errors"]
            )
        if result.extensions:
            response["extensions"] = result.extensions
        return response

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        """401 (with WWW-Authenticate) or 403 when the whole operation was refused."""
        response = super().create_response(response_data, sub_response)
        if isinstance(response_data, dict) and response_data.get("data") is None:
            codes = {e["extensions"]["code"] for e in response_data.get("errors", [])}
            for code, status in AUTH_STATUS.items():
                if code in codes:
                    response.status_code = status
                    if status == 401:
                        response.headers["WWW-Authenticate"] = 'Bearer realm="gql-memory"'
                    break
        return response


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _note_caller(state: dict[str, Any], credentials: Credentials) -> None:
    """Who the caller is, for the access log (namespace and key id; never the key)."""
    principal = credentials.principal
    state["namespace"] = principal.namespace if principal else None
    state["key_id"] = principal.key_id if principal else None


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
        verifier = KeyVerifier.for_settings(db, settings)
        # A revoked key (on any server: KEY_REVOKED comes through LISTEN) loses its open
        # subscriptions and its cached verdict at once.
        hub = EventHub(
            settings.subscriber_queue_size, observer=metrics, on_key_revoked=verifier.forget_key
        )
        listener = EventListener(url, hub, settings, observer=metrics)
        live = settings.live_events
        try:
            await upgrade(db, embedder.dim)
            await verify_embedding_config(db, embedder)
            await ensure_text_search_config(db, settings.text_search_config)
            log.info(describe(embedder))
            if live:
                await listener.start()
            app.state.db = db
            app.state.fair_share = FairShare(settings.namespace_slots)
            app.state.settings = settings
            app.state.embedder = embedder
            app.state.event_hub = hub if live else None
            app.state.metrics = metrics
            app.state.authenticator = Authenticator(settings, verifier)
            log.info("serving; API keys %s", auth_mode(settings))
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
    app.add_middleware(RequestContextMiddleware)
    return app
