"""ASGI middleware: request ids with one structured access-log line per request, body limit.

The access log carries what an operator needs (request id, operation names, namespace,
key id, status, duration) and never a header, a query string or a body.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gql_memory.server.state import REQUEST_STATE_KEY, RequestState, request_state

access_log = logging.getLogger("gql_memory.access")

REQUEST_ID_HEADER = "x-request-id"
_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def error_response(
    status: int,
    message: str,
    code: str = "BAD_USER_INPUT",
    request_id: str | None = None,
    headers: dict[str, str] | None = None,
    media_type: str = "application/json",
) -> JSONResponse:
    """A GraphQL-shaped error body for requests refused before any GraphQL runs; under
    application/graphql-response+json (a request error) it has no ``data`` entry."""
    extensions = {"code": code}
    if request_id:
        extensions["requestId"] = request_id
    body: dict[str, Any] = {"errors": [{"message": message, "extensions": extensions}]}
    if media_type == "application/json":
        body = {"data": None, **body}
    return JSONResponse(
        body,
        status_code=status,
        headers=headers,
        media_type=media_type
        if media_type == "application/json"
        else f"{media_type}; charset=utf-8",
    )


class RequestContextMiddleware:
    """Gives every request an id (the caller's X-Request-ID if sane), echoes it, logs it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers", [])).get(REQUEST_ID_HEADER.encode(), b"")
        given_id = given.decode("latin-1")
        request_id = given_id if _SAFE_REQUEST_ID.match(given_id) else uuid.uuid4().hex
        state = RequestState(request_id)
        scope.setdefault("state", {})[REQUEST_STATE_KEY] = state
        started = time.perf_counter()
        status = 101 if scope["type"] == "websocket" else 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message["headers"] = headers
            elif message["type"] == "websocket.close":
                status = message.get("code", 1000)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if scope.get("path") not in ("/healthz", "/readyz"):
                self._log(scope, state, status, time.perf_counter() - started)

    @staticmethod
    def _log(scope: Scope, state: RequestState, status: int, seconds: float) -> None:
        method = scope.get("method", "WS")
        access_log.info(
            "%s %s %s",
            method,
            scope.get("path"),
            status,
            extra={
                "request_id": state.request_id,
                "method": method,
                "path": scope.get("path"),
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "operations": state.operations,
                "error_codes": state.error_codes,
                "namespace": state.namespace,
                "key_id": state.key_id,
            },
        )


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
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not response_started:
                await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            f"Request body exceeds {self.max_bytes} bytes (GQL_MEMORY_MAX_BODY_BYTES)",
            request_id=request_state(scope).request_id,
        )
        await response(scope, receive, send)


class _BodyTooLarge(Exception):
    pass
