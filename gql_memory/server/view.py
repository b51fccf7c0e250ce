"""The GraphQL view: strawberry's ASGI view with our HTTP policy.

JSON-only POST bodies, authentication into the request context, the negotiated response
media type (application/graphql-response+json or application/json) and its status codes,
batches, persisted document ids, HTTP streams (graphql-sse, multipart) that live like
WebSockets, and cancellation when the client goes away.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.extensions import SchemaExtension
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.subscriptions import (
    GRAPHQL_SSE_PROTOCOL,
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)
from strawberry.types import ExecutionResult as StrawberryExecutionResult
from strawberry.types.unset import UNSET, UnsetType

from gql_memory.api.errors import format_error
from gql_memory.api.extensions.operation_metrics import OperationMetrics
from gql_memory.api.extensions.read_consistency import ReadConsistency
from gql_memory.api.info import Context, Credentials
from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.fair import NamespacedDatabase
from gql_memory.db.positions import ReadSession, read_session
from gql_memory.errors import RateLimitedError, UnauthenticatedError, ValidationError
from gql_memory.memory import Memory
from gql_memory.server.admission import AdmissionTicket, FairAdmission, current_ticket
from gql_memory.server.auth import Authenticator
from gql_memory.server.http_requests import RequestRefused, check_batch, operation_data
from gql_memory.server.media_types import (
    GRAPHQL_RESPONSE_JSON,
    PREFERRED_ACCEPT,
    is_request_error,
    negotiate,
    request_error_status,
)
from gql_memory.server.metrics import Metrics
from gql_memory.server.middleware import error_response
from gql_memory.server.state import RequestState, request_state
from gql_memory.server.ui import graphiql_page, key_needed
from gql_memory.tracing import tracing_for

log = logging.getLogger(__name__)

JSON_REQUIRED = (
    "POST /graphql needs 'Content-Type: application/json'; form, multipart and text bodies "
    "are refused (a web page could send those cross-site)"
)

# HTTP statuses of operations refused as a whole (data null), by error code.
REFUSED_STATUS = {"UNAUTHENTICATED": 401, "FORBIDDEN": 403, "RATE_LIMITED": 429}


class MemoryGraphQL(GraphQL[Context, None]):
    """strawberry's ASGI view with authentication, our context, JSON-only errors."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        extensions: list[Callable[[], SchemaExtension]] = [lambda: OperationMetrics(metrics)]
        tracing = tracing_for(settings)
        if tracing is not None:  # OpenTelemetry: a span per operation (docs/observability.md)
            from gql_memory.api.extensions.operation_tracing import OperationTracing

            extensions.append(lambda: OperationTracing(tracing))
        if settings.read_database_urls:
            extensions.append(ReadConsistency)  # extensions.lsn, X-Read-After-LSN
        super().__init__(
            build_schema(settings, extensions),
            graphql_ide="graphiql" if settings.graphiql else None,
            # graphql-transport-ws over WebSocket; over HTTP, graphql-sse (Accept:
            # text/event-stream) and Apollo's multipart subscriptions
            subscription_protocols=(
                GRAPHQL_TRANSPORT_WS_PROTOCOL,
                GRAPHQL_SSE_PROTOCOL,
                MULTIPART_SUBSCRIPTION_PROTOCOL,
            ),
        )
        self.max_batch = settings.max_batch
        # how many requests run at once, and whose runs next (server/admission.py)
        self.admission = FairAdmission.for_settings(settings, metrics)
        self.admission_timeout_s = settings.request_timeout_s or None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        request = Request(scope=scope, receive=receive)
        state = request_state(scope)
        request_id = state.request_id
        media_type = state.media_type = negotiate(request.headers.get("accept"))
        response: Response
        if request.method == "POST" and not _is_json(request.headers.get("content-type", "")):
            response = error_response(
                415, JSON_REQUIRED, request_id=request_id, media_type=media_type
            )
        else:
            try:
                answered = await self._run_while_connected(request, receive)
                if answered is None:
                    log.info("client disconnected; its request was cancelled")
                    state.error_codes.append("CLIENT_CLOSED")
                    return
                response = answered
            except HTTPException as exc:  # strawberry's plain-text refusals, as GraphQL JSON
                code = exc.code if isinstance(exc, RequestRefused) else "BAD_USER_INPUT"
                response = error_response(
                    exc.status_code, exc.reason, code, request_id=request_id, media_type=media_type
                )
                if exc.status_code == 401:
                    response.headers["WWW-Authenticate"] = 'Bearer realm="gql-memory"'
            except ClientDisconnect:
                # The body ended early: the client went away mid-request. Nothing ran, nothing
                # to answer, nothing wrong with the server.
                log.info("client disconnected before the request body was complete")
                state.error_codes.append("BAD_USER_INPUT")
                return
        if response.status_code in (400, 405, 413, 415):
            state.error_codes.append("BAD_USER_INPUT")
        await response(scope, receive, send)

    async def _run_while_connected(self, request: Request, receive: Receive) -> Response | None:
        """Run the request; if the client goes away first, cancel it (resolvers, running
        statements, transactions) and return None once everything has unwound."""
        await request.body()  # the whole body first (kept by the request for strawberry)
        # taken in execute_operation, once the caller is known; given back with the response
        ticket = request_state(request.scope).admission = AdmissionTicket(self.admission)
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
            ticket.leave()

    async def parse_http_body(
        self, request: AsyncHTTPRequestAdapter
    ) -> GraphQLRequestData | list[GraphQLRequestData]:
        """One operation or a batch of at most GQL_MEMORY_MAX_BATCH, parameters type-checked
        (POST bodies are JSON: ``__call__`` refused anything else)."""
        transport = self._get_stream_transport_from_headers(request.headers)
        protocol = transport.protocol if transport else "http"
        if request.method == "GET":
            data = self.parse_query_params(request.query_params)
        else:
            data = self.parse_json(await request.get_body())
        if isinstance(data, list):
            check_batch(data, self.max_batch, transport.batching_error if transport else None)
            return [operation_data(item, protocol) for item in data]
        return operation_data(data, protocol)

    async def execute_operation(  # noqa: PLR0917
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        request_data: GraphQLRequestData | list[GraphQLRequestData],
        context: Context,
        root_value: Any,
        sub_response: Response,
    ) -> Any:
        """A batch runs its operations one after another, in order, each as if sent alone
        (its own cost check, rate-limit admission and deadline); an operation the view
        would refuse (no document, a mutation over GET) fails alone. First the request
        waits for its turn to run (``_admit``)."""
        refusal = await self._admit(request, request_data, context)
        if refusal is not None:
            result = StrawberryExecutionResult(data=None, errors=[refusal])
            return [result] * len(request_data) if isinstance(request_data, list) else result
        if not isinstance(request_data, list):
            return await super().execute_operation(
                request, request_adapter, request_data, context, root_value, sub_response
            )
        results = []
        for data in request_data:
            try:
                result = await self.execute_single(
                    request, request_adapter, sub_response, context, root_value, data
                )
            except HTTPException as exc:
                error = GraphQLError(exc.reason, original_error=ValidationError(exc.reason))
                result = StrawberryExecutionResult(data=None, errors=[error])
            results.append(result)
        return results

    async def _admit(
        self,
        request: Request,
        request_data: GraphQLRequestData | list[GraphQLRequestData],
        context: Context,
    ) -> GraphQLError | None:
        """Wait for a slot in the caller's namespace's queue (server/admission.py), or the
        refusal to answer with (RATE_LIMITED). Callers without a principal are refused by
        the ScopeGuard before any parsing, and streams live for minutes: neither waits."""
        ticket = request_state(request.scope).admission
        principal = context.credentials.principal
        streamed = not isinstance(request_data, list) and self._get_stream_transport(
            request_data.protocol
        )
        if ticket is None or principal is None or streamed:
            return None
        try:
            await ticket.enter(principal.namespace, self.admission_timeout_s)
        except RateLimitedError as exc:
            return GraphQLError(str(exc), original_error=exc)
        current_ticket.set(ticket)  # its embedder calls run outside the slot (OutsideTheSlot)
        return None

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

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        """Carries the negotiated media type on to ``create_response``."""
        sub_response = await super().get_sub_response(request)
        sub_response.media_type = request_state(request.scope).media_type
        return sub_response

    def should_render_graphql_ide(self, request: Any) -> bool:
        """A browser's GET without a document, not a GET naming a persisted document."""
        params = request.query_params
        return super().should_render_graphql_ide(request) and not (
            params.get("documentId") or params.get("extensions")
        )

    async def render_graphql_ide(self, request: Request) -> Response:
        """GraphiQL with its bundles from this server (gql_memory/server/ui.py), asking for the
        spec's media type (and JSON from an older server). Its welcome text says whether this
        caller needs an API key: what a request of its without one would meet."""
        needed = await key_needed(request)
        return graphiql_page({"Accept": PREFERRED_ACCEPT}, key_needed=needed)

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        state = request.app.state
        with _primary_first(state.db):
            credentials = await state.authenticator.from_headers(request.headers)
        this_request = request_state(request.scope)
        _note_caller(this_request, credentials)
        # An HTTP stream (SSE, multipart) lives like a WebSocket: its key is re-checked while
        # it is open, and a caller without a valid key gets a 401, not a stream of errors.
        long_lived = isinstance(request, WebSocket) or (
            self._get_stream_transport_from_headers(request.headers) is not None
        )
        if long_lived and not isinstance(request, WebSocket) and credentials.principal is None:
            error = credentials.error or UnauthenticatedError("An API key is required")
            raise RequestRefused(401, str(error), error.code)
        db: Database = state.db
        if long_lived and db.replicas is not None:
            # a subscription reads when an event arrives, right after a commit on the primary
            # that the replicas may not have replayed yet: it reads on the primary while it
            # is up (queries over a WebSocket still read on replicas, see ReadConsistency)
            db = Database(db.engine, db.replicas, ReadSession(prefer_primary=True))
        return Context(
            request=request,
            response=response,
            settings=state.settings,
            request_id=this_request.request_id,
            credentials=credentials,
            build_memory=lambda namespace: Memory(
                NamespacedDatabase(db, namespace, state.fair_share),
                state.settings,
                namespace,
                state.embedder,
            ),
            events=getattr(state, "event_hub", None),
            rate_limiter=state.rate_limiter,
            documents=state.documents,
            refresh_credentials=state.authenticator.refresh if long_lived else None,
            # the names OperationRecorder notes go straight to the access log
            operations=this_request.operations,
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """A key in the connection_init payload overrides the handshake's; no key, no socket."""
        authenticator: Authenticator = context.request.app.state.authenticator
        with _primary_first(context.request.app.state.db):
            context.credentials = await authenticator.from_connection_params(
                context.connection_params, context.credentials
            )
        _note_caller(request_state(context.request.scope), context.credentials)
        if context.credentials.principal is None:
            raise ConnectionRejectionError()
        return UNSET

    async def process_result(
        self, request: Request, result: StrawberryExecutionResult
    ) -> GraphQLHTTPResponse:
        state = request_state(request.scope)
        response: GraphQLHTTPResponse = {"data": result.data}
        if result.errors:
            errors = [format_error(e, state.request_id) for e in result.errors]
            response["errors"] = list(errors)
            state.error_codes.extend(e["extensions"]["code"] for e in errors)
            # the spec's type: a request error (nothing executed) has no data entry at all
            if state.media_type == GRAPHQL_RESPONSE_JSON and is_request_error(
                result.data, result.errors
            ):
                del response["data"]
        if result.extensions:
            response["extensions"] = result.extensions
        return response

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        """The negotiated media type. Under application/graphql-response+json a request
        error (no data entry) gets its 4xx/5xx status; under application/json, 401 (with
        WWW-Authenticate), 403 or 429 (with Retry-After) when the whole operation was
        refused, 200 otherwise."""
        response = super().create_response(response_data, sub_response)
        if sub_response.media_type == GRAPHQL_RESPONSE_JSON:
            response.headers["content-type"] = f"{GRAPHQL_RESPONSE_JSON}; charset=utf-8"
        if not isinstance(response_data, dict) or response_data.get("data") is not None:
            return response
        errors = _formatted_errors(response_data)
        if "data" not in response_data:
            response.status_code = request_error_status(errors)
        else:
            codes = {e["extensions"]["code"] for e in errors}
            refused = [s for code, s in REFUSED_STATUS.items() if code in codes]
            response.status_code = refused[0] if refused else response.status_code
        by_code = {e["extensions"]["code"]: e for e in errors}
        if response.status_code == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="gql-memory"'
        if response.status_code == 429:
            retry_ms = by_code["RATE_LIMITED"]["extensions"].get("retryAfterMs", 1000)
            response.headers["Retry-After"] = str(math.ceil(retry_ms / 1000))
        return response


def _formatted_errors(response: GraphQLHTTPResponse) -> list[dict[str, Any]]:
    """The response's errors, each as ``format_error`` wrote it (with extensions.code)."""
    return [error for error in response.get("errors") or [] if isinstance(error, dict)]


async def _cancel_on_disconnect(receive: Receive, work: asyncio.Future[Any]) -> None:
    """Cancels ``work`` when the client disconnects (the request body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    work.cancel()


def _primary_first(db: Database) -> AbstractContextManager[object]:
    """With read replicas, reads on the primary while it is up: API keys are verified there,
    because a key created a moment ago may not have reached the replicas yet (verdicts are
    cached, so this is one lookup per key and TTL). During a primary outage, on replicas."""
    if db.replicas is None:
        return nullcontext()
    return read_session(ReadSession(prefer_primary=True))


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def _note_caller(state: RequestState, credentials: Credentials) -> None:
    """Who the caller is, for the access log (namespace and key id; never the key)."""
    principal = credentials.principal
    state.namespace = principal.namespace if principal else None
    state.key_id = principal.key_id if principal else None
