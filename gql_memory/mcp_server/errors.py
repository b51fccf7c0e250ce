"""The seeds' error shapes for the MCP bridge (seeds 000, 003, 004).

A failed tool call is a result with ``isError: true`` whose text (and structured content) is
``{"error", "details", "tool"}``; a failed resource read is a JSON-RPC error whose ``data`` is
``{"error", "details", "resource"}``. ``error`` is the kind of failure (the same words for
tools and resources), ``details`` says what exactly, in terms of the caller's parameters.
An unexpected failure is logged with its traceback; only its kind reaches the client.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp.server.mcpserver.exceptions import UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError as ArgumentError
from sqlalchemy.exc import SQLAlchemyError

from gql_memory.errors import (
    GqlMemoryError,
    NotFoundError,
    RequestTimeoutError,
    ServiceUnavailableError,
    ValidationError,
)

log = logging.getLogger(__name__)

# MCP's code for a resource that does not exist (protocol versions 2024-11-05 to 2025-11-25;
# later versions retired it without reusing it). Kept apart from -32602, invalid params, so a
# client can tell a wrong URI from a wrong parameter (seed 003's 404 versus 400).
RESOURCE_NOT_FOUND = -32002

INVALID_PARAMETERS = "Invalid parameters"
UNKNOWN_TOOL = "Unknown tool"
UNKNOWN_RESOURCE = "Unknown resource"
KINDS: dict[type[GqlMemoryError], str] = {
    ValidationError: INVALID_PARAMETERS,
    NotFoundError: "Not found",
    ServiceUnavailableError: "Service unavailable",
    RequestTimeoutError: "Timeout",
}


# What ``failure`` maps by kind; unwrapping stops at the first of these.
KNOWN = (ArgumentError, GqlMemoryError, SQLAlchemyError)


def failure(exc: BaseException) -> tuple[str, str]:
    """(error, details) for an exception raised while serving a call or a read."""
    if isinstance(exc, ArgumentError):
        problems = (
            f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        return INVALID_PARAMETERS, "; ".join(problems)
    if isinstance(exc, GqlMemoryError):
        kind = next((k for cls, k in KINDS.items() if isinstance(exc, cls)), None)
        return kind or "Operation failed", str(exc)
    if isinstance(exc, SQLAlchemyError):
        return "Database operation failed", f"{type(exc).__name__}; see the server log"
    return "Internal error", f"{type(exc).__name__}; see the server log"


def _root_cause(exc: BaseException) -> BaseException:
    """The exception the SDK's wrappers (``Error executing tool …``) were raised from: the
    first of ours or of the database layer, which ``failure`` knows (not the driver's error
    under it, which the database layer wrapped on purpose)."""
    while exc.__cause__ is not None and not isinstance(exc, KNOWN):
        exc = exc.__cause__
    return exc


def tool_error(tool: str, exc: Exception) -> CallToolResult:
    """The ``isError`` result of a failed tool call, in the seeds' shape."""
    cause = _root_cause(exc)
    if cause is exc and not isinstance(exc, UnexpectedToolError):
        error, details = UNKNOWN_TOOL, str(exc)  # the SDK's own refusal: "Unknown tool: x"
    else:
        error, details = failure(cause)
    if error in ("Internal error", "Database operation failed"):
        log.error("tool %s failed", tool, exc_info=cause)
    else:
        log.info("tool %s refused: %s: %s", tool, error, details)
    body = {"error": error, "details": details, "tool": tool}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )


def resource_error(code: int, error: str, details: str, uri: str) -> MCPError:
    """The JSON-RPC error of a failed resource read: ``details`` as the message, the seeds'
    ``{"error", "details", "resource"}`` as its data."""
    data: dict[str, Any] = {"error": error, "details": details, "resource": uri}
    return MCPError(code=code, message=details, data=data)


def invalid_parameter(details: str, uri: str) -> MCPError:
    return resource_error(INVALID_PARAMS, INVALID_PARAMETERS, details, uri)


def unknown_resource(uri: str) -> MCPError:
    return resource_error(RESOURCE_NOT_FOUND, UNKNOWN_RESOURCE, f"Unknown resource: {uri}", uri)


def read_failed(exc: Exception, uri: str) -> MCPError:
    """A domain error (a validation the parameters did not catch) keeps its kind and code;
    anything else is an internal error, logged with its traceback."""
    error, details = failure(exc)
    if error == INVALID_PARAMETERS:
        return invalid_parameter(details, uri)
    if not isinstance(exc, GqlMemoryError):
        log.error("resource %s failed", uri, exc_info=exc)
    return resource_error(INTERNAL_ERROR, error, details, uri)
