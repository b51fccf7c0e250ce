"""The instrumented provider: same identity as the one it wraps, every call measured."""

from __future__ import annotations

import pytest

from gql_memory.config import Settings
from gql_memory.embeddings import SYMMETRIC, TextRole, Vector
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.errors import ServiceUnavailableError
from gql_memory.server.metrics import Metrics


class BrokenProvider:
    name, model, dim, asymmetry = "openai", "m", 8, SYMMETRIC

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        raise ServiceUnavailableError("provider down")

    async def aclose(self) -> None:
        pass


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_calls_texts_and_latency_are_counted_by_outcome() -> None:
    metrics = Metrics(Settings())
    local = InstrumentedEmbedder(HashEmbedder(16), metrics)
    assert (local.name, local.dim) == ("hash", 16)
    assert len(await local.embed(["a", "b", "c"], role=TextRole.DOCUMENT)) == 3
    broken = InstrumentedEmbedder(BrokenProvider(), metrics)
    with pytest.raises(ServiceUnavailableError):
        await broken.embed(["x"], role=TextRole.QUERY)
    requests = "gql_memory_embedding_requests_total"
    assert sample(metrics, requests, provider="hash", outcome="ok") == 1
    assert sample(metrics, requests, provider="openai", outcome="error") == 1
    assert sample(metrics, "gql_memory_embedding_texts_total", provider="hash") == 3
    assert sample(metrics, "gql_memory_embedding_duration_seconds_count", provider="hash") == 1
