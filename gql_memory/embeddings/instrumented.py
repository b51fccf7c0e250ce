"""An embedding provider that reports calls, texts and latency (a decorator of any provider)."""

from __future__ import annotations

import time
from typing import Protocol

from gql_memory.embeddings.provider import EmbeddingProvider, TextRole, Vector


class EmbeddingRecorder(Protocol):
    """Where the measurements go (gql_memory.server.metrics.Metrics implements it)."""

    def embedding_call(self, provider: str, texts: int, seconds: float, ok: bool) -> None: ...


class InstrumentedEmbedder:
    """Wraps a provider: same name, model and dimension; every ``embed`` call is measured."""

    def __init__(self, inner: EmbeddingProvider, recorder: EmbeddingRecorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.name = inner.name
        self.model = inner.model
        self.dim = inner.dim
        self.asymmetry = inner.asymmetry

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        started = time.perf_counter()
        ok = False
        try:
            vectors = await self.inner.embed(texts, role=role)
            ok = True
            return vectors
        finally:
            self.recorder.embedding_call(self.name, len(texts), time.perf_counter() - started, ok)

    async def aclose(self) -> None:
        await self.inner.aclose()
