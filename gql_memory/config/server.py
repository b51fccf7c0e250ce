"""The HTTP server: where it listens, its worker processes, and the limits on each
connection (body size, connection count, header and body deadlines, keep-alive, shutdown)."""

from __future__ import annotations

from pydantic import Field


class ServerSettings:
    """Where the server listens and with how many workers (part of ``Settings``)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)


class ConnectionSettings:
    """Limits of HTTP requests and connections (part of ``Settings``)."""

    max_body_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Largest accepted request body (raw dialogue content can be large).",
    )
    max_connections: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="Open HTTP connections per worker process; past it a new connection is "
        "answered 503 with Retry-After. Lowered at startup to fit the open-files limit.",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0.0,
        le=3600.0,
        description="A request's headers must arrive in full within this time of the "
        "connection opening (or of the request's first byte), else 408 and the connection "
        "is closed: idle or half-sent connections cannot pile up.",
    )
    body_timeout_s: float = Field(
        default=60.0,
        gt=0.0,
        le=3600.0,
        description="A request's body must arrive in full within this time of its headers, "
        "else the connection is closed (the request is dropped).",
    )
    keep_alive_timeout_s: int = Field(
        default=5,
        ge=1,
        le=3600,
        description="An idle kept-alive connection is closed after this long.",
    )
    shutdown_timeout_s: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="On SIGTERM, in-flight requests get this long to finish before the stop.",
    )
