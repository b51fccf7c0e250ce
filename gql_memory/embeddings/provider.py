"""The provider protocol and the types every embedder shares: a vector, the side of a search a
text is on (TextRole), and how a provider marks the two sides (Asymmetry).

Most open embedders are asymmetric (e5, bge, nomic, gte...): a question and the passage that
answers it are embedded differently, by a prefix or an ``input_type``. So every call says
which side its texts are on: everything stored is a DOCUMENT, everything searched a QUERY.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gql_memory.config import Settings
from gql_memory.errors import ServiceUnavailableError

Vector = list[float]


class EmbeddingRejectedError(ServiceUnavailableError):
    """The provider answered, and refused these texts (HTTP 4xx other than 429): it is up,
    the request is what it will not take. A circuit breaker does not count it as a failure,
    and a row refused this way is not retried forever (memory.waiting)."""


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
