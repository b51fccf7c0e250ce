"""Embedding providers: a small protocol, an OpenAI(-compatible) client, the in-process e5
model (the default) and a lexical hash embedder (tests, CI).

The protocol and the types the providers share live in ``provider`` (every provider imports
them from there); this package re-exports them and picks the provider the settings ask for.
"""

from __future__ import annotations

import logging

from gql_memory.config import Settings
from gql_memory.embeddings.provider import (
    SYMMETRIC,
    Asymmetry,
    EmbeddingProvider,
    TextRole,
    Vector,
)

__all__ = [
    "SYMMETRIC",
    "Asymmetry",
    "EmbeddingProvider",
    "TextRole",
    "Vector",
    "configured_dim",
    "describe",
    "make_provider",
    "provider_kind",
    "summary",
]

log = logging.getLogger(__name__)


def provider_kind(settings: Settings) -> str:
    """openai when asked or when a key or base URL is set; else the in-process default."""
    if settings.embedding_provider is not None:
        return settings.embedding_provider
    return "openai" if settings.openai_api_key or settings.openai_base_url else "local"


def make_provider(settings: Settings) -> EmbeddingProvider:
    """The provider the settings ask for."""
    kind = provider_kind(settings)
    if kind == "openai":
        from gql_memory.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    if kind == "hash":
        from gql_memory.embeddings.hashed import HashEmbedder

        return HashEmbedder(settings.embedding_dim or settings.hash_embedding_dim)
    from gql_memory.embeddings.local import E5Embedder

    return E5Embedder(settings)


def configured_dim(settings: Settings) -> int:
    """The dimension the configured provider produces (without creating a client)."""
    from gql_memory.embeddings.local import E5_DIM
    from gql_memory.embeddings.openai import DEFAULT_OPENAI_DIM

    kind = provider_kind(settings)
    if kind == "local":
        return E5_DIM
    if settings.embedding_dim:
        return settings.embedding_dim
    return DEFAULT_OPENAI_DIM if kind == "openai" else settings.hash_embedding_dim


def describe(provider: EmbeddingProvider) -> str:
    """The startup log line: which provider, which model, which dimension, and what it means."""
    text = (
        f"embeddings: provider={provider.name} model={provider.model} dim={provider.dim} "
        f"({provider.asymmetry.describe()})"
    )
    if provider.name == "local":
        text += (
            " — semantic search with the bundled multilingual-e5-small, in-process on the CPU; "
            "set OPENAI_BASE_URL (and OPENAI_API_KEY) to use an embedding server instead"
        )
    elif provider.name == "hash":
        text += (
            " — the hash embedder is lexical (hashed word and character n-grams), not "
            "semantic: meant for tests; unset GQL_MEMORY_EMBEDDING_PROVIDER for semantic search"
        )
    return text


def summary(provider: EmbeddingProvider) -> str:
    """The embedder in a few words, for serve's banner."""
    if provider.name == "local":
        return f"multilingual-e5-small, in-process ({provider.dim} dimensions)"
    if provider.name == "hash":
        return f"hash: lexical, not semantic, for tests ({provider.dim} dimensions)"
    where = getattr(provider, "base_url", None)
    at = f" at {where}" if where else ""
    return f"{provider.name} {provider.model}{at} ({provider.dim} dimensions)"
