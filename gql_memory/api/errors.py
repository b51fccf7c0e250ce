"""The one place where errors become GraphQL errors with an ``extensions.code``.

Domain errors keep their message and get their code; GraphQL syntax/validation errors are
BAD_USER_INPUT; anything else is masked as INTERNAL_SERVER_ERROR and logged server-side with
the request id that the client also receives.
"""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError
from strawberry.exceptions import MissingQueryError

from gql_memory.errors import GqlMemoryError

log = logging.getLogger("gql_memory.api")

INTERNAL_MESSAGE = "Internal server error"


def classify(error: GraphQLError) -> tuple[str, str]:
    """(code, client-safe message) for an error."""
    code = (error.extensions or {}).get("code")
    if isinstance(code, str):
        return code, error.message  # already annotated (see ``annotate``)
    original = error.original_error
    if original is None or isinstance(original, GraphQLError):
        return "BAD_USER_INPUT", error.message
    if isinstance(original, GqlMemoryError) and original.code != "INTERNAL_SERVER_ERROR":
        return original.code, str(original)
    if isinstance(original, MissingQueryError):  # e.g. a websocket subscribe with query ""
        return "BAD_USER_INPUT", "The request has no GraphQL document (empty query)"
    return "INTERNAL_SERVER_ERROR", INTERNAL_MESSAGE


def annotate(error: GraphQLError, request_id: str | None) -> None:
    """Give the error its code and request id and mask internals, in place.

    Done once, when the schema processes errors, so that every transport — HTTP JSON and
    the websocket messages strawberry builds from ``error.formatted`` — shows the same safe
    error. The original exception stays in ``error.original_error`` for the server log.
    """
    code, message = classify(error)
    error.message = message
    extensions = {**(error.extensions or {}), "code": code}
    if isinstance(error.original_error, GqlMemoryError):
        extensions.update(error.original_error.extensions)
    if request_id:
        extensions["requestId"] = request_id
    error.extensions = extensions


def log_errors(errors: list[GraphQLError], request_id: str | None) -> None:
    for error in errors:
        code, _ = classify(error)
        if code == "INTERNAL_SERVER_ERROR":
            log.error(
                "internal error (request %s) at %s",
                request_id,
                error.path,
                exc_info=error.original_error,
                extra={"request_id": request_id},
            )
        elif code == "SERVICE_UNAVAILABLE":
            log.warning("service unavailable (request %s): %s", request_id, error.original_error)


def format_error(error: GraphQLError, request_id: str | None) -> dict[str, Any]:
    """The error as the client sees it (annotating it first if that has not happened)."""
    annotate(error, request_id)
    return dict(error.formatted)
