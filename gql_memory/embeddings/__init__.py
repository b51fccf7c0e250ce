"""Embedding providers: a small protocol, an OpenAI(-compatible) client, the in-process e5
model (the default) and a lexical hash embedder (tests, CI).

Most open embedders are asymmetric (e5, bge, nomic, gte...): a question and the passage that
answers it are embedded differently, by a prefix or an ``input_type``. So every call says
which side its texts are on: everything stored is a DOCUMENT, everything searched a QUERY.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gql_memory.config import Settings

log = logging.getLogger(__name__)

Vector = list[float]


class TextRole(enum.Enum):
    """Which side of a search a text is on."""

    QUERY = "query"
    DOCUMENT = "document"


@dataclass(frozen=True)
class Asymmetry:
    """How a provider marks the two sides: text put before the input, and the ``input_type``
    sent with the request (empty: nothing). Part of what makes stored vectors comparable."""

    query_prefix: str = ""
    document_prefix: str = ""
    query_input_type: str = ""
    document_input_type: str = ""

    def prefix(self, role: TextRole) -> str:
        return self.query_prefix if role is TextRole.QUERY else self.document_prefix

    def input_type(self, role: TextRole) -> str:
        return self.query_input_type if role is TextRole.QUERY else self.document_input_type

    def describe(self) -> str:
        parts = [
            f"{name}={value!r}"
            for name, value in (
                ("query prefix", self.query_prefix),
                ("document prefix", self.document_prefix),
                ("query input_type", self.query_input_type),
                ("document input_type", self.document_input_type),
            )
            if value
        ]
        return ", ".join(parts) or "symmetric (no prefixes, no input_type)"

    @classmethod
    def from_settings(cls, settings: Settings) -> Asymmetry:
        return cls(
            settings.embedding_query_prefix,
            settings.embedding_document_prefix,
            settings.embedding_query_input_type,
            settings.embedding_document_input_type,
        )


SYMMETRIC = Asymmetry()


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    name: str
    model: str
    dim: int
    asymmetry: Asymmetry

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        """One vector per text, in order, embedded as ``role``. Raises
        ServiceUnavailableError when it cannot."""
        ...

    async def aclose(self) -> None:
        """Release network resources."""
        ...


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
