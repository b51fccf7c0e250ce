"""What `gql-memory serve` checks before it starts anything, and what it prints once the
database is ready: a port in use and an embedding server that does not answer are one line
each (ConfigurationError), instead of a traceback after the startup or a failed first write;
the banner says where to go and what the server runs with."""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path

from gql_memory.config import Settings
from gql_memory.errors import ConfigurationError

log = logging.getLogger(__name__)


async def check_embedding_server(settings: Settings) -> None:
    """serve's startup check of an embedding server (GQL_MEMORY_EMBEDDING_STARTUP_CHECK_S):
    one embedding or a ConfigurationError naming the URL and the cause. The in-process
    embedders need none."""
    from gql_memory.embeddings import provider_kind

    if settings.embedding_startup_check_s <= 0 or provider_kind(settings) != "openai":
        return
    from gql_memory.embeddings.openai import OpenAIEmbedder

    embedder = OpenAIEmbedder(settings)
    try:
        await embedder.check(settings.embedding_startup_check_s)
    finally:
        await embedder.aclose()
    log.info("embedding server at %s answered", embedder.base_url)


def refuse_a_port_in_use(host: str, port: int) -> None:
    """A ConfigurationError before PostgreSQL starts, instead of uvicorn's errno after the
    startup: bind the address as uvicorn will (SO_REUSEADDR), then let it go. Other errors
    (an address not of this machine) are uvicorn's to report."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror:
        return
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigurationError(
                    f"port {port} is in use; set GQL_MEMORY_PORT or --port"
                ) from None


def banner(settings: Settings, mode: str, data_dir: Path | None, embedder: str) -> str:
    """What serve prints once the database is ready: where to go, and what it runs with."""
    base = f"http://{settings.host}:{settings.port}"
    if ":" in settings.host:  # an IPv6 address
        base = f"http://[{settings.host}]:{settings.port}"
    rows = [("GraphiQL" if settings.graphiql else "GraphQL", f"{base}/graphql")]
    if settings.dashboard:
        rows.append(("dashboard", f"{base}/dashboard/"))
    if data_dir is not None:
        rows.append(("data dir", f"{data_dir} (embedded PostgreSQL)"))
    else:
        rows.append(("database", "DATABASE_URL (external PostgreSQL)"))
    rows.append(("embedder", embedder))
    if mode == "required":
        keys = "required: send 'Authorization: Bearer <key>' (gql-memory keys create)"
    elif settings.insecure:
        keys = "optional: anyone who can reach this address needs none (--insecure)"
    else:
        keys = "optional: callers on this machine need none"
    rows.append(("API keys", keys))
    lines = [f"  {name:<10} {value}" for name, value in rows]
    return "\n".join(["gql-memory is serving:", *lines, "  (Ctrl-C stops it)"])
