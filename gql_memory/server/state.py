"""Typed per-request state: what the middleware, the GraphQL view and the access log share
about one HTTP request or websocket connection."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.types import Scope

from gql_memory.server.admission import AdmissionTicket
from gql_memory.server.media_types import APPLICATION_JSON

# The one key of the ASGI scope's "state" that holds a RequestState.
REQUEST_STATE_KEY = "gql_memory_request"


@dataclass
class RequestState:
    """Made once per request by RequestContextMiddleware, filled in on the way through."""

    request_id: str  # the caller's X-Request-ID if sane, else a new one; echoed and logged
    media_type: str = APPLICATION_JSON  # of the response, negotiated from Accept (HTTP only)
    namespace: str | None = None  # the authenticated caller's, for the access log
    key_id: int | None = None  # the caller's API key id (never the key), for the access log
    # "<type> <name>" of each GraphQL operation; the view shares it with Context.operations
    operations: list[str] = field(default_factory=list)
    error_codes: list[str] = field(default_factory=list)  # of every error answered, in order
    # the request's slot among those that run at once (server/admission.py); GraphQL over HTTP
    admission: AdmissionTicket | None = None


def request_state(scope: Scope) -> RequestState:
    """The request's state, as RequestContextMiddleware (in front of every route) stored it."""
    state: RequestState = scope["state"][REQUEST_STATE_KEY]
    return state
