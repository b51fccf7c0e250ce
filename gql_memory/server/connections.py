"""Bounds on HTTP connections, so that slow or idle clients cannot hold the server.

uvicorn has no deadline on reading a request's headers: a connection that sends nothing, or
half a request, stays open for ever, and enough of them exhaust the open-files limit until
no one else can connect. ``serve`` therefore runs uvicorn with ``BoundedHttpProtocol``, its
httptools protocol plus

- a header deadline: a request's complete headers must arrive within
  ``GQL_MEMORY_HEADER_TIMEOUT_S`` of the connection opening (or, on a kept-alive
  connection, of the request's first byte), or the connection is answered 408 and closed;
- a body deadline: its body must follow within ``GQL_MEMORY_BODY_TIMEOUT_S``, or the
  connection is closed (the application sees the client disconnect);
- a connection cap per worker (``GQL_MEMORY_MAX_CONNECTIONS``, kept below the open-files
  limit): a connection past it is answered 503 with ``Retry-After`` at once.

Each connection runs at most one request at a time, so the cap bounds requests in flight too.
Idle kept-alive connections are closed by uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from gql_memory.config import Settings

log = logging.getLogger("gql_memory")

# Open files the process needs besides client connections: the listening socket, log files,
# the event loop's own, the in-process embedder's... (the database pool is counted apart).
FILES_RESERVED = 64
# A refused client gets this long to read the 503 and hang up before its socket is closed
# (closing with its request unread would send a reset, which may destroy the answer).
REFUSAL_LINGER_S = 1.0
RETRY_AFTER_S = 1


def _response(status: bytes, message: bytes, *headers: bytes) -> bytes:
    """A whole HTTP/1.1 response that closes the connection."""
    lines = [
        b"HTTP/1.1 " + status,
        b"content-type: text/plain; charset=utf-8",
        b"content-length: " + str(len(message)).encode(),
        b"connection: close",
        *headers,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n" + message


TOO_MANY_CONNECTIONS = _response(
    b"503 Service Unavailable",
    b"Too many open connections; try again.",
    b"retry-after: " + str(RETRY_AFTER_S).encode(),
)
REQUEST_TIMEOUT = _response(b"408 Request Timeout", b"The request headers came too slowly.")


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    header_timeout_s: float
    body_timeout_s: float


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a connection cap and header and body deadlines."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self.deadline: asyncio.TimerHandle | None = None  # of the headers or the body
        self.refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn's set of this worker's open connections, this one included
        if len(self.connections) > self.limits.max_connections:
            self.refuse()
        else:
            self.start_deadline(self.limits.header_timeout_s, self.headers_too_slow)

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.refused:  # a refused client's request is never read
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # the next request on a kept-alive connection
        self.start_deadline(self.limits.header_timeout_s, self.headers_too_slow)

    def on_headers_complete(self) -> None:
        self.stop_deadline()
        super().on_headers_complete()
        if not self.parser.should_upgrade():  # a websocket's transport changes protocol
            # httptools calls on_message_complete at once when there is no body
            self.start_deadline(self.limits.body_timeout_s, self.body_too_slow)

    def on_message_complete(self) -> None:
        self.stop_deadline()
        super().on_message_complete()

    def start_deadline(self, seconds: float, missed: Callable[[], None]) -> None:
        if self.deadline is None:
            self.deadline = self.loop.call_later(seconds, missed)

    def stop_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def headers_too_slow(self) -> None:
        self.deadline = None
        if self.cycle is not None and not self.cycle.response_complete:
            # a pipelined request waits for the answer to the one before: the wait is ours
            self.start_deadline(self.limits.header_timeout_s, self.headers_too_slow)
        elif not self.transport.is_closing():
            self.transport.write(REQUEST_TIMEOUT)
            self.transport.close()

    def body_too_slow(self) -> None:
        self.deadline = None
        if self.flow.read_paused:
            # the application has not taken what came: the wait is ours
            self.start_deadline(self.limits.body_timeout_s, self.body_too_slow)
        else:
            # a response may have begun: no answer, the application sees a disconnect
            self.transport.close()

    def refuse(self) -> None:
        """Answer 503 at once and stop counting against the cap; the socket lingers until
        the client hangs up, at most ``REFUSAL_LINGER_S``."""
        self.refused = True
        self.connections.discard(self)
        self.transport.write(TOO_MANY_CONNECTIONS)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.deadline = self.loop.call_later(REFUSAL_LINGER_S, self.transport.close)


def raise_open_files_limit() -> int:
    """Raise this process's soft open-files limit to its hard limit (worker processes inherit
    it); return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):  # e.g. macOS refuses more than kern.maxfilesperproc
            pass
    return soft if soft != resource.RLIM_INFINITY else wanted


def connection_limits(settings: Settings, open_files: int) -> ConnectionLimits:
    """The limits of each worker: ``max_connections`` lowered, if need be, so that the
    connections, the database pool and the reserve fit in ``open_files``."""
    pools = 2 if settings.read_database_url else 1  # a replica has a pool of its own
    needed = FILES_RESERVED + pools * (settings.db_pool_size + settings.db_max_overflow)
    fitting = max(1, open_files - needed)
    if settings.max_connections > fitting:
        log.warning(
            "max_connections lowered from %d to %d: the open-files limit is %d",
            settings.max_connections,
            fitting,
            open_files,
        )
    return ConnectionLimits(
        min(settings.max_connections, fitting), settings.header_timeout_s, settings.body_timeout_s
    )


def bounded_http_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """The ``http`` argument of ``uvicorn.run``: ``BoundedHttpProtocol`` with the settings'
    limits, after raising the open-files limit."""
    limits = connection_limits(settings, raise_open_files_limit())
    # uvicorn only calls the class with its own arguments, so a partial adding ours serves (and
    # pickles, to reach worker processes); its signature says a class.
    return cast(type[asyncio.Protocol], functools.partial(BoundedHttpProtocol, limits=limits))
