"""An embedder that embeds each distinct (role, text) once, over any provider.

Within one context assembly, search and episodes share the query's vector; in the LoCoMo
benchmark, the search modes after the first share it. The cache lives as long as the wrapper:
make one per unit of work.
"""

from __future__ import annotations

from gql_memory.embeddings.provider import EmbeddingProvider, TextRole, Vector


class EmbedOnce:
    """Same name, model, dimension and marking as the provider it wraps."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.asymmetry = inner.asymmetry
        self._vectors: dict[tuple[TextRole, str], Vector] = {}

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        missing = [t for t in dict.fromkeys(texts) if (role, t) not in self._vectors]
        if missing:
            vectors = await self.inner.embed(missing, role=role)
            self._vectors.update(zip([(role, t) for t in missing], vectors, strict=True))
        return [self._vectors[(role, t)] for t in texts]

    async def aclose(self) -> None:
        """The inner embedder belongs to the caller."""
