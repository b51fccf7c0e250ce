"""A circuit breaker in front of any embedding provider.

An embedder that is down makes every call that embeds wait for its timeouts and retries; a
write then waits seconds to store a row without its vector, and a search seconds to answer
from its text leg. After GQL_MEMORY_EMBEDDING_BREAKER_FAILURES consecutive failed calls the
breaker opens: calls fail at once (ServiceUnavailableError, naming the provider and the last
failure) for GQL_MEMORY_EMBEDDING_BREAKER_COOLDOWN_S. Then one call goes through as a probe
(the others still fail at once); its success closes the breaker, its failure opens it again.

Callers that can do without a vector (storing a turn, an insight or an episode; search's
text leg) catch the error: the breaker only decides how long they wait for it. Its state is
what /readyz and the metrics report (``EmbedderHealth``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gql_memory.config import Settings
from gql_memory.embeddings.provider import (
    EmbeddingProvider,
    EmbeddingRejectedError,
    TextRole,
    Vector,
)
from gql_memory.errors import ServiceUnavailableError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbedderHealth:
    """The embedder as the last calls saw it: ``ok``; ``degraded`` (the last call failed,
    calls still go through); ``down`` (the breaker is open: calls fail at once until
    ``retry_in_s`` has passed). ``reason`` is the last failure's message."""

    state: str
    reason: str | None = None
    consecutive_failures: int = 0
    retry_in_s: float | None = None

    def body(self) -> dict[str, object]:
        """As /readyz shows it."""
        body: dict[str, object] = {"state": self.state}
        if self.reason is not None:
            body["reason"] = self.reason
        if self.retry_in_s is not None:
            body["retryInS"] = round(self.retry_in_s, 1)
        return body


class EmbedderDown(ServiceUnavailableError):
    """The breaker is open: the call was not sent to the provider."""


class CircuitBreakerEmbedder:
    """Wraps a provider: same name, model and dimension; ``embed`` goes through the breaker."""

    def __init__(
        self,
        inner: EmbeddingProvider,
        failures: int,
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[EmbedderHealth], None] | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dim = inner.dim
        self.asymmetry = inner.asymmetry
        self.threshold = failures
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.failures = 0
        self.reason: str | None = None
        self.opened_at: float | None = None  # None: closed
        self.probing = False
        self.on_change = on_change  # told the state (ok, degraded, down) when it changes

    @classmethod
    def for_settings(
        cls,
        inner: EmbeddingProvider,
        settings: Settings,
        on_change: Callable[[EmbedderHealth], None] | None = None,
    ) -> CircuitBreakerEmbedder:
        return cls(
            inner,
            settings.embedding_breaker_failures,
            settings.embedding_breaker_cooldown_s,
            on_change=on_change,
        )

    def __getattr__(self, name: str) -> object:
        # what callers read of the provider itself (base_url, max_chars, window_tokens ...)
        return getattr(self.inner, name)

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        probe = self._admit()
        try:
            vectors = await self.inner.embed(texts, role=role)
        except EmbeddingRejectedError:
            self._answered()  # it is up: these texts are what it refuses
            raise
        except ServiceUnavailableError as exc:
            self._failed(str(exc), probe)
            raise
        finally:
            if probe:
                self.probing = False
        self._answered()
        return vectors

    def _answered(self) -> None:
        if self.failures or self.opened_at is not None:
            log.info("the embedding provider answers again; circuit breaker closed")
            self.failures, self.reason, self.opened_at = 0, None, None
            self._changed()

    def _admit(self) -> bool:
        """Whether the call may go to the provider (raising EmbedderDown if not); True when
        it goes as the probe of an open breaker."""
        if self.opened_at is None:
            return False
        waited = self.clock() - self.opened_at
        if waited >= self.cooldown_s and not self.probing:
            self.probing = True
            return True
        retry_in = max(0.0, self.cooldown_s - waited)
        raise EmbedderDown(
            f"{self.reason} Embedding calls fail at once for {retry_in:.0f} s more "
            f"(circuit breaker open after {self.failures} failed calls)."
        )

    def _failed(self, reason: str, probe: bool) -> None:
        before = self.health().state
        self.failures += 1
        self.reason = reason
        # a call sent before the breaker opened that fails now does not restart its
        # cool-down: only the breaker's opening and a failed probe (re)start it
        if self.failures >= self.threshold and (self.opened_at is None or probe):
            if self.opened_at is None:
                log.warning(
                    "circuit breaker open after %d failed embedding calls: calls fail at "
                    "once for %g s",
                    self.failures,
                    self.cooldown_s,
                )
            self.opened_at = self.clock()
        if self.health().state != before:
            self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.health())

    def health(self) -> EmbedderHealth:
        if self.opened_at is not None:
            retry_in = max(0.0, self.cooldown_s - (self.clock() - self.opened_at))
            return EmbedderHealth("down", self.reason, self.failures, retry_in)
        if self.failures:
            return EmbedderHealth("degraded", self.reason, self.failures)
        return EmbedderHealth("ok")

    async def aclose(self) -> None:
        await self.inner.aclose()


def breaker_of(provider: EmbeddingProvider | None) -> CircuitBreakerEmbedder | None:
    """The breaker in ``provider``'s chain of wrappers (they keep theirs in ``inner``)."""
    inner: object = provider
    while inner is not None:
        if isinstance(inner, CircuitBreakerEmbedder):
            return inner
        inner = inner.__dict__.get("inner") if hasattr(inner, "__dict__") else None
    return None


def embedder_health(provider: EmbeddingProvider | None) -> EmbedderHealth:
    """The health of ``provider`` (``ok`` when no breaker watches it)."""
    breaker = breaker_of(provider)
    return breaker.health() if breaker is not None else EmbedderHealth("ok")
