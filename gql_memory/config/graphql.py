"""The GraphQL endpoint: pagination, the browser UIs beside it, and what one operation
may be (document size, batch, trusted and persisted documents, depth, cost, deadline,
rate), and how many run at once (fair admission across namespaces)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field


class PaginationSettings:
    """Page sizes of the paginated lists (part of ``Settings``)."""

    default_page_size: int = Field(default=100, ge=1)
    max_page_size: int = Field(default=1000, ge=1)


class GraphQLSettings:
    """Settings of the GraphQL endpoint and its operation limits (part of ``Settings``)."""

    graphiql: bool = Field(default=True, description="Serve the GraphiQL IDE at /graphql.")
    dashboard: bool = Field(
        default=True,
        description="Serve the memory dashboard at /dashboard/ (a static page that asks "
        "for an API key and keeps it in the browser tab).",
    )
    introspection: bool = Field(default=True, description="Allow schema introspection.")
    max_document_chars: int = Field(
        default=256 * 1024,
        ge=1024,
        description="Longest GraphQL document (the query text, not its variables); larger "
        "values belong in variables.",
    )
    max_batch: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="Most operations in one batched POST (a JSON array); a longer batch is "
        "refused whole with BATCH_TOO_LARGE. Each operation counts against the cost and rate "
        "limits as if sent alone.",
    )
    trusted_documents: Path | None = Field(
        default=None,
        description="Manifest of trusted documents: a JSON object mapping the SHA-256 hex "
        "digest of each document's text to the text (GraphQL Code Generator's persisted "
        'documents file); requests may then send `documentId: "sha256:<hex>"`.',
    )
    trusted_documents_only: bool = Field(
        default=False,
        description="Serve only the documents of the trusted manifest: anything else is "
        "refused with PERSISTED_QUERY_REQUIRED, and APQ registration too.",
    )
    apq_cache_size: int = Field(
        default=1000,
        ge=0,
        le=1_000_000,
        description="Automatic persisted queries kept per namespace and server process "
        "(least recently used dropped first; 0: APQ off).",
    )
    apq_max_bytes_per_namespace: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="Memory the automatic persisted queries of one namespace may take per "
        "server process, in bytes as Python holds them (a 4-byte character counts 4); the "
        "least recently used are dropped first, a larger document is run but not registered.",
    )
    apq_max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Memory all namespaces' automatic persisted queries may take per server "
        "process, in bytes; above it the least recently used namespace loses its least "
        "recently used documents first.",
    )
    max_query_depth: int = Field(default=12, ge=1)
    max_query_tokens: int = Field(default=2000, ge=10)
    max_aliases: int = Field(default=30, ge=1)
    max_query_cost: int = Field(
        default=200_000,
        ge=1,
        description="Largest operation cost: the objects it can return, nested list bounds "
        "multiplied (see gql_memory.api.extensions.cost); above it the operation is refused.",
    )
    request_timeout_s: float = Field(
        default=30.0,
        ge=0.0,
        le=3600.0,
        description="Deadline of one query or mutation (0: none): past it the work is "
        "cancelled, its statements too, and the caller gets TIMEOUT. A client that "
        "disconnects cancels its request the same way.",
    )
    rate_limit_per_s: float = Field(
        default=500.0,
        ge=0.0,
        description="Sustained operations per second per API key and server process (0: no "
        "limit); above it the caller gets RATE_LIMITED with extensions.retryAfterMs.",
    )
    rate_limit_burst: int = Field(
        default=1000,
        ge=1,
        description="Operations one API key may send at once before the rate applies.",
    )
    admission_slots: int = Field(
        default=1,
        ge=0,
        le=10_000,
        description="GraphQL requests over HTTP that run at once per server process within "
        "their turn (GQL_MEMORY_ADMISSION_TURN_MS) while more than one namespace is active (0: "
        "no limit). The others wait in their namespace's queue, and a turn that frees goes to "
        "the next namespace in turn: a tenant with many concurrent clients gets no more of "
        "the server than a tenant with one. A namespace alone on the server (no other active "
        "for GQL_MEMORY_ADMISSION_IDLE_S) is not limited (gql_memory.server.admission).",
    )
    admission_turn_ms: float = Field(
        default=50.0,
        ge=0.0,
        le=60_000.0,
        description="A request's turn: while namespaces compete, a request that has run this "
        "long no longer counts against GQL_MEMORY_ADMISSION_SLOTS, so nobody waits behind a "
        "slow one (a lock, a long statement) for longer (0: a request counts until it ends).",
    )
    admission_idle_s: float = Field(
        default=1.0,
        gt=0.0,
        le=3600.0,
        description="How long after its last request a namespace still counts as active for "
        "admission: while another one is, a namespace's requests share the slots.",
    )
    admission_queue: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Requests one namespace may have waiting for a slot per server process; "
        "one more is answered RATE_LIMITED with extensions.retryAfterMs, and so is a request "
        "still waiting at its deadline (GQL_MEMORY_REQUEST_TIMEOUT_S).",
    )
