"""Response media types of the GraphQL over HTTP spec, negotiated from ``Accept``.

``application/graphql-response+json`` (the spec's type; Apollo Client 4, urql and GraphiQL ask
for it) lets the status code say what happened: a request error — the document does not
parse or validate, its variables do not coerce, the request is refused before execution —
is a 4xx (or 5xx) whose body has no ``data`` entry at all. ``application/json`` (clients that
ask for it, send ``*/*`` or no ``Accept``) keeps the legacy behaviour: 200 with ``data: null``,
except the refusals that have always had their own status (401, 403, 429).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GRAPHQL_RESPONSE_JSON = "application/graphql-response+json"
APPLICATION_JSON = "application/json"
# What our own pages (GraphiQL) send: the spec's type first, JSON for an older server.
PREFERRED_ACCEPT = f"{GRAPHQL_RESPONSE_JSON}, {APPLICATION_JSON};q=0.9"

# Status of a request error under application/graphql-response+json, by error code; any
# other code (BAD_USER_INPUT: parse, validation, variables, limits) is 400.
REQUEST_ERROR_STATUS = {
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "RATE_LIMITED": 429,
    "PERSISTED_QUERY_NOT_FOUND": 404,
    "INTERNAL_SERVER_ERROR": 500,
    "SERVICE_UNAVAILABLE": 503,
}
# Codes that end an operation that already started executing: the response keeps
# ``data: null`` (a field-level outcome, not a request error) under both types.
EXECUTION_CODES = frozenset({"TIMEOUT"})


def negotiate(accept: str | None) -> str:
    """The response type for an ``Accept`` header: the spec's type when the client names it
    with a weight at least that of ``application/json``, otherwise ``application/json``."""
    if not accept:
        return APPLICATION_JSON
    weights: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        media = media.lower()
        weights[media] = max(weights.get(media, 0.0), weight)
    ours = weights.get(GRAPHQL_RESPONSE_JSON, 0.0)
    legacy = max(weights.get(m, 0.0) for m in (APPLICATION_JSON, "application/*", "*/*"))
    return GRAPHQL_RESPONSE_JSON if ours > 0 and ours >= legacy else APPLICATION_JSON


def error_codes(errors: Iterable[Mapping[str, Any]]) -> list[str]:
    return [str((e.get("extensions") or {}).get("code", "")) for e in errors]


def is_request_error(data: object, errors: list[Any] | None) -> bool:
    """A result without any execution: no data, and no error belongs to a field (a field
    error always has a path). A deadline that cancelled execution is not one."""
    if data is not None or not errors:
        return False
    if any(getattr(e, "path", None) for e in errors):
        return False
    return not any(
        (getattr(e, "extensions", None) or {}).get("code") in EXECUTION_CODES for e in errors
    )


def request_error_status(errors: Iterable[Mapping[str, Any]]) -> int:
    """The status of a request error under the spec's type: the first refusal with a status
    of its own (401, 403, 429, ...), else 400."""
    for code in error_codes(errors):
        if code in REQUEST_ERROR_STATUS:
            return REQUEST_ERROR_STATUS[code]
    return 400
