"""Starlette application factory. Shared resources live in the lifespan, never in globals."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from gql_memory import runtime
from gql_memory.api.persisted import PersistedDocuments
from gql_memory.api.rate_limit import RateLimiter
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.fair import FairShare
from gql_memory.db.migrate import is_current
from gql_memory.db.supervision import EmbeddedState, StateFile
from gql_memory.embeddings import describe, make_provider
from gql_memory.embeddings.breaker import CircuitBreakerEmbedder, embedder_health
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.errors import ForbiddenError, ServiceUnavailableError
from gql_memory.keys import KeyVerifier, auth_mode
from gql_memory.live.hub import EventHub
from gql_memory.live.listener import EventListener
from gql_memory.memory.extraction.rules import rules_for
from gql_memory.runtime import Purpose
from gql_memory.server import ui
from gql_memory.server.admission import OutsideTheSlot
from gql_memory.server.auth import Authenticator
from gql_memory.server.metrics import Metrics
from gql_memory.server.middleware import (
    BodySizeLimitMiddleware,
    RequestContextMiddleware,
    error_response,
)
from gql_memory.server.view import MemoryGraphQL

log = logging.getLogger(__name__)

# While serving, a thread doing CPU work (packing a large context, local embeddings) hands
# the GIL back to the event loop within this long (Python's default is 5 ms): under a tenant's
# heavy request, the other tenants' p99 went from 9.5x to 2.4x their p99 without it
# (bench/soak.py, hash embedder).
GIL_SWITCH_INTERVAL_S = 0.0005


def embedded_state(request: Request) -> EmbeddedState | None:
    """What the supervisor of the embedded PostgreSQL last published (None: no embedded
    server, or nothing to read right now)."""
    state_file: StateFile | None = getattr(request.app.state, "embedded_state", None)
    return state_file.read() if state_file is not None else None


async def healthz(request: Request) -> Response:
    """Liveness: the process answers, and the embedded PostgreSQL it supervises has not been
    down longer than GQL_MEMORY_EMBEDDED_GIVE_UP_S (restarting the service is the remedy left)."""
    embedded = embedded_state(request)
    if embedded is not None and not embedded.alive:
        return JSONResponse({"status": "failing", **embedded.body()}, 503)
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Readiness: the database answers and its schema is at the newest migration.

    With read replicas, a primary that does not answer while a replica does is "read-only":
    200, because queries are still served (writes get SERVICE_UNAVAILABLE); 503 only when
    no server can answer. The replicas' state is their last check's. While the supervised
    embedded PostgreSQL is restarting or its disk is full, 503 and the supervisor's reason."""
    embedded = embedded_state(request)
    if embedded is not None and not embedded.ready:
        return JSONResponse({"status": "unavailable", **embedded.body()}, 503)
    db: Database = request.app.state.db
    primary = Database(db.engine)  # the primary itself, whatever the read routing says
    replicas: dict[str, dict[str, int]] = {}
    if db.replicas is not None:
        up = sum(1 for replica in db.replicas.replicas if replica.up)
        replicas = {"replicas": {"up": up, "total": len(db.replicas.replicas)}}
    try:
        async with asyncio.timeout(3):
            async with primary.read() as conn:
                await conn.execute(text("SELECT 1"))
            current = await is_current(primary)
    except Exception as exc:  # any failure means "not ready"; say why without internals
        log.warning("readiness check failed: %s", exc)
        if replicas and replicas["replicas"]["up"]:
            return JSONResponse({"status": "read-only", "database": "unreachable", **replicas})
        return JSONResponse({"status": "unavailable", "database": "unreachable", **replicas}, 503)
    if not current:
        return JSONResponse({"status": "unavailable", "database": "migrations pending"}, 503)
    # An embedder that is down leaves the server ready: writes are stored waiting for their
    # vectors and searches answer from their text leg; "degraded" says why.
    health = embedder_health(request.app.state.embedder)
    status = "ok" if health.state == "ok" else "degraded"
    return JSONResponse({"status": status, "database": "ok", "embedder": health.body(), **replicas})


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus metrics of this server (of all its workers in multiprocess mode); who may
    read them: ``Authenticator.metrics_refusal``, unless GQL_MEMORY_METRICS_PUBLIC."""
    if not request.app.state.settings.metrics_public:
        client = request.client.host if request.client else None
        authenticator: Authenticator = request.app.state.authenticator
        refusal = await authenticator.metrics_refusal(request.headers, client)
        if refusal is not None:
            status = 403 if isinstance(refusal, ForbiddenError) else 401
            if isinstance(refusal, ServiceUnavailableError):
                status = 503
            return error_response(status, str(refusal), refusal.code)
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
        # so is the trusted-documents manifest (a digest that does not match stops startup)
        documents = PersistedDocuments.for_settings(
            settings, observer=metrics, builtin=ui.builtin_documents(settings)
        )
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        breaker = CircuitBreakerEmbedder.for_settings(
            InstrumentedEmbedder(make_provider(settings), metrics),
            settings,
            on_change=metrics.embedder_changed,
        )
        metrics.embedder_changed(breaker.health())
        # a request waiting for an embedding server gives its admission turn to another
        # meanwhile (an in-process embedder computes, it does not wait: no turn to give)
        embedder = OutsideTheSlot(breaker) if breaker.name == "openai" else breaker
        listener: EventListener | None = None
        try:
            async with runtime.open(
                settings, Purpose.SERVER, embedder=embedder, replica_observer=metrics
            ) as rt:
                db = rt.db
                metrics.instrument_pool(db.engine, settings)
                verifier = KeyVerifier.for_settings(db, settings)
                # A revoked key (on any server: KEY_REVOKED comes through LISTEN) loses its
                # open subscriptions and its cached verdict at once.
                hub = EventHub(
                    settings.subscriber_queue_size,
                    observer=metrics,
                    on_key_revoked=verifier.forget_key,
                )
                log.info(describe(embedder))
                live = settings.live_events
                if live:
                    # Live events: this process's subscribers, fed by its one LISTEN
                    # connection. On the primary, never a replica: NOTIFY is not replicated.
                    listener = EventListener(
                        rt.db_url, hub, settings, observer=metrics, role=settings.database_role
                    )
                    await listener.start()
                app.state.db = db
                app.state.fair_share = FairShare(settings.namespace_slots)
                app.state.rate_limiter = RateLimiter(
                    settings.rate_limit_per_s, settings.rate_limit_burst
                )
                app.state.settings = settings
                app.state.documents = documents
                # the embedded server's supervisor: this runtime's, or serve's (its process)
                published = settings.embedded_state_file
                app.state.embedded_state = rt.embedded_state or (
                    StateFile(published) if published else None
                )
                app.state.embedder = rt.embedder  # with tracing on, it makes spans too
                if rt.backfill is not None:
                    rt.backfill.observer = metrics.backfill_pass
                app.state.event_hub = hub if live else None
                app.state.metrics = metrics
                app.state.authenticator = Authenticator(settings, verifier)
                log.info("serving; API keys %s", auth_mode(settings))
                # What startup built (schema, modules, the model) lives as long as the
                # server: out of the collector's sight, a full collection no longer walks it
                # (pauses of tens of ms on a large result otherwise).
                gc.freeze()
                try:
                    yield
                finally:
                    hub.close()
                    if listener is not None:
                        await listener.stop()
        finally:
            metrics.process_exited()
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
    routes += ui.routes(settings)  # GraphiQL's bundles, the dashboard
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestContextMiddleware)
    return app
