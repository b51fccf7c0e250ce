"""Embedding providers: a small protocol, an OpenAI(-compatible) client and a local fallback."""

from __future__ import annotations

import logging
from typing import Protocol, runtime_checkable

from gql_memory.config import Settings

log = logging.getLogger(__name__)

Vector = list[float]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    name: str
    model: str
    dim: int

    async def embed(self, texts: list[str]) -> list[Vector]:
        """One vector per text, in order. Raises ServiceUnavailableError when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release network resources."""
        ...


def make_provider(settings: Settings) -> EmbeddingProvider:
    """The provider the settings ask for: OpenAI when a key or base URL is set, else local."""
    from gql_memory.embeddings.local import LocalEmbedder
    from gql_memory.embeddings.openai import OpenAIEmbedder

    kind = settings.embedding_provider
    if kind is None:
        kind = "openai" if settings.openai_api_key or settings.openai_base_url else "local"
    if kind == "openai":
        return OpenAIEmbedder(settings)
    return LocalEmbedder(settings.embedding_dim or settings.local_embedding_dim)


def configured_dim(settings: Settings) -> int:
    """The dimension the configured provider produces (without creating a client)."""
    from gql_memory.embeddings.openai import DEFAULT_OPENAI_DIM

    if settings.embedding_dim:
        return settings.embedding_dim
    kind = settings.embedding_provider
    if kind is None:
        kind = "openai" if settings.openai_api_key or settings.openai_base_url else "local"
    return DEFAULT_OPENAI_DIM if kind == "openai" else settings.local_embedding_dim


def describe(provider: EmbeddingProvider) -> str:
    """The startup log line: which provider, which model, which dimension, and what it means."""
    text = f"embeddings: provider={provider.name} model={provider.model} dim={provider.dim}"
    if provider.name == "local":
        text += (
            " — the local embedder is lexical (hashed word and character n-grams), not "
            "semantic: set OPENAI_API_KEY or OPENAI_BASE_URL for semantic search"
        )
    return text
