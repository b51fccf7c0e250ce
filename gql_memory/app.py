"""Starlette application factory. Shared resources live in the lifespan, never in globals."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import sys
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
from gql_memory.api.rate_limit import RateLimiter
from gql_memory.api.schema import build_schema
from gql_memory.auth import KeyVerifier, auth_mode
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import (
    EmbeddedPostgres,
    allow_role_login,
    login_url,
    start_embedded,
)
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
# While serving, a thread doing CPU work (packing a large context, local embeddings) hands
# the GIL back to the event loop within this long (Python's default is 5 ms): under a tenant's
# heavy request, the other tenants' p99 went from 9.5x to 2.4x their p99 without it
# (bench/soak.py, hash embedder).
GIL_SWITCH_INTERVAL_S = 0.0005

# HTTP statuses of operations refused as a whole (data null), by error code.
REFUSED_STATUS = {"UNAUTHENTICATED": 401, "FORBIDDEN": 403, "RATE_LIMITED": 429}


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
                answered = await self._run_while_connected(request, receive)
                if answered is None:
                    log.info("client disconnected; its request was cancelled")
                    state.setdefault("error_codes", []).append("CLIENT_CLOSED")
                    return
                response = answered
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

    async def _run_while_connected(self, request: Request, receive: Receive) -> Response | None:
        """Run the request; if the client goes away first, cancel it (resolvers, running
        statements, transactions) and return None once everything has unwound."""
        await request.body()  # the whole body first (kept by the request for strawberry)
        work = asyncio.ensure_future(self.run(request))
        watcher = asyncio.ensure_future(_cancel_on_disconnect(receive, work))
        try:
            # cancelling this task cancels the awaited work too; either way the work has
            # unwound when the CancelledError arrives here
            return await work
        except asyncio.CancelledError:
            if watcher.done() and not watcher.cancelled():
                return None  # the client went away
            raise
        finally:
            watcher.cancel()

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
            rate_limiter=state.rate_limiter,
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
        """401 (with WWW-Authenticate), 403 or 429 (with Retry-After) when the whole
        operation was refused."""
        response = super().create_response(response_data, sub_response)
        if isinstance(response_data, dict) and response_data.get("data") is None:
            errors = {e["extensions"]["code"]: e for e in response_data.get("errors", [])}
            for code, status in REFUSED_STATUS.items():
                if code in errors:
                    response.status_code = status
                    if status == 401:
                        response.headers["WWW-Authenticate"] = 'Bearer realm="gql-memory"'
                    if status == 429:
                        retry_ms = errors[code]["extensions"].get("retryAfterMs", 1000)
                        response.headers["Retry-After"] = str(math.ceil(retry_ms / 1000))
                    break
        return response


async def _cancel_on_disconnect(receive: Receive, work: asyncio.Future[Any]) -> None:
    """Cancels ``work`` when the client disconnects (the request body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    work.cancel()


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


async def request_url(owner: Database, settings: Settings, url: str, embedded: bool) -> str:
    """The URL requests connect with: GQL_MEMORY_APP_DATABASE_URL, or on the embedded server
    a login as the role itself; otherwise DATABASE_URL (its connections SET ROLE at start)."""
    role = settings.database_role
    if embedded and not settings.app_database_url:
        await allow_role_login(owner, role)
        return login_url(url, role)
    await warn_if_text_search_scans(owner)
    return settings.app_database_url or url


async def warn_if_text_search_scans(owner: Database) -> None:
    """Say how to fix full-text search scanning under row-level security (see 0007)."""
    async with owner.read() as conn:
        leakproof = await conn.scalar(
            text("SELECT proleakproof FROM pg_proc WHERE oid = 'ts_match_vq'::regproc")
        )
    if not leakproof:
        log.warning(
            "full-text search cannot use its index under row-level security until a "
            "superuser runs: ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"
        )


def create_app(settings: Settings | None = None) -> Starlette:
    """The ASGI app. Without DATABASE_URL the lifespan starts the embedded PostgreSQL."""
    settings = settings or Settings()
    metrics = Metrics(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Extraction rules are checked (and compiled, once) before anything starts: a bad
        # rule aborts startup with a message naming it.
        rules_for(settings)
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        embedded: EmbeddedPostgres | None = None
        url = settings.database_url
        if url is None:
            embedded = await asyncio.to_thread(start_embedded, settings.data_dir)
            url = embedded.url
        embedder = InstrumentedEmbedder(make_provider(settings), metrics)
        role = settings.database_role
        db: Database | None = None
        listener: EventListener | None = None
        hub: EventHub | None = None
        try:
            # The owner migrates and checks the configuration; requests run as the
            # non-superuser role under row-level security (migration 0007).
            owner = Database.for_maintenance(url, settings)
            try:
                await upgrade(owner, embedder.dim, role)
                await verify_embedding_config(owner, embedder)
                await ensure_text_search_config(owner, settings.text_search_config)
                app_url = await request_url(owner, settings, url, embedded is not None)
            finally:
                await owner.dispose()
            db = Database.from_url(app_url, settings, role=role)
            metrics.instrument_pool(db.engine, settings)
            verifier = KeyVerifier.for_settings(db, settings)
            # A revoked key (on any server: KEY_REVOKED comes through LISTEN) loses its open
            # subscriptions and its cached verdict at once.
            hub = EventHub(
                settings.subscriber_queue_size,
                observer=metrics,
                on_key_revoked=verifier.forget_key,
            )
            log.info(describe(embedder))
            live = settings.live_events
            if live:
                # Live events: this process's subscribers, fed by its one LISTEN connection.
                listener = EventListener(app_url, hub, settings, observer=metrics, role=role)
                await listener.start()
            app.state.db = db
            app.state.fair_share = FairShare(settings.namespace_slots)
            app.state.rate_limiter = RateLimiter(
                settings.rate_limit_per_s, settings.rate_limit_burst
            )
            app.state.settings = settings
            app.state.embedder = embedder
            app.state.event_hub = hub if live else None
            app.state.metrics = metrics
            app.state.authenticator = Authenticator(settings, verifier)
            log.info("serving; API keys %s", auth_mode(settings))
            # What startup built (schema, modules, the model) lives as long as the server:
            # out of the collector's sight, a full collection no longer walks it (pauses of
            # tens of ms on a large result otherwise).
            gc.freeze()
            yield
        finally:
            if hub is not None:
                hub.close()
            if listener is not None:
                await listener.stop()
            await embedder.aclose()
            if db is not None:
                await db.dispose()
            metrics.process_exited()
            if embedded is not None:
                await asyncio.to_thread(embedded.stop)
            sys.setswitchinterval(switch_interval)
            gc.unfreeze()

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
