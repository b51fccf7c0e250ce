"""Embedding calls as GenAI ``embeddings`` spans (children of the memory operation that
embeds): provider, model and how many texts, never the texts."""

from __future__ import annotations

from opentelemetry.trace import SpanKind

from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.tracing.conventions import EMBEDDINGS, OPERATION_NAME, PROVIDER_NAME, REQUEST_MODEL
from gql_memory.tracing.spans import Tracing, failed

INPUT_COUNT = "gql_memory.embeddings.input_count"  # no convention names it


class TracedEmbedder:
    """Wraps a provider: same name, model and dimension; every ``embed`` call is a span."""

    def __init__(self, inner: EmbeddingProvider, tracing: Tracing) -> None:
        self.inner = inner
        self.tracing = tracing
        self.name = inner.name
        self.model = inner.model
        self.dim = inner.dim
        self.asymmetry = inner.asymmetry

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        with self.tracing.tracer.start_as_current_span(
            f"{EMBEDDINGS} {self.model}",
            kind=SpanKind.CLIENT,
            attributes={
                OPERATION_NAME: EMBEDDINGS,
                PROVIDER_NAME: self.name,
                REQUEST_MODEL: self.model,
                INPUT_COUNT: len(texts),
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await self.inner.embed(texts, role=role)
            except BaseException as exc:
                failed(span, exc)
                raise

    async def aclose(self) -> None:
        await self.inner.aclose()
