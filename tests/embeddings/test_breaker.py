"""The circuit breaker in front of the embedding provider (issue 43, items 3-4): after
repeated failures calls fail at once for a cool-down, then one probe goes through."""

from __future__ import annotations

import asyncio

import pytest

from gql_memory.embeddings import SYMMETRIC, TextRole, Vector
from gql_memory.embeddings.breaker import (
    CircuitBreakerEmbedder,
    EmbedderDown,
    EmbedderHealth,
    breaker_of,
    embedder_health,
)
from gql_memory.embeddings.instrumented import InstrumentedEmbedder
from gql_memory.errors import ServiceUnavailableError


class Scripted:
    """A provider that fails while ``down`` and counts the calls that reach it; ``gate``
    holds a call until set."""

    name, model, dim, asymmetry = "scripted", "m", 2, SYMMETRIC

    def __init__(self) -> None:
        self.down = False
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise ServiceUnavailableError("The embedding provider scripted is unavailable: down.")
        return [[1.0, 0.0] for _ in texts]

    async def aclose(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def breaker(inner: Scripted, clock: Clock, seen: list[str] | None = None) -> CircuitBreakerEmbedder:
    return CircuitBreakerEmbedder(
        inner,
        failures=3,
        cooldown_s=30,
        clock=clock,
        on_change=None if seen is None else (lambda h: seen.append(h.state)),
    )


async def embed(guard: CircuitBreakerEmbedder) -> list[Vector]:
    return await guard.embed(["x"], role=TextRole.DOCUMENT)


async def opened(inner: Scripted, clock: Clock) -> CircuitBreakerEmbedder:
    """A breaker opened by three failed calls of ``inner`` (left down)."""
    guard = breaker(inner, clock)
    inner.down = True
    for _ in range(3):
        with pytest.raises(ServiceUnavailableError):
            await embed(guard)
    return guard


async def test_opens_after_repeated_failures_and_then_fails_at_once() -> None:
    inner, clock, seen = Scripted(), Clock(), []
    guard = breaker(inner, clock, seen)
    inner.down = True
    for expected in (1, 2):
        with pytest.raises(ServiceUnavailableError):
            await embed(guard)
        assert guard.health() == EmbedderHealth("degraded", guard.reason, expected)
    with pytest.raises(ServiceUnavailableError):
        await embed(guard)
    assert inner.calls == 3 and guard.health().state == "down"
    # open: the provider is not called, the error says why and for how long
    clock.now += 10
    with pytest.raises(EmbedderDown) as raised:
        await embed(guard)
    assert inner.calls == 3
    assert str(raised.value) == (
        "The embedding provider scripted is unavailable: down. Embedding calls fail at once "
        "for 20 s more (circuit breaker open after 3 failed calls)."
    )
    assert guard.health().body() == {
        "state": "down",
        "reason": "The embedding provider scripted is unavailable: down.",
        "retryInS": 20.0,
    }
    assert seen == ["degraded", "down"]


async def test_after_the_cool_down_one_probe_goes_through_and_closes_it() -> None:
    inner, clock, seen = Scripted(), Clock(), []
    guard = breaker(inner, clock, seen)
    inner.down = True
    for _ in range(3):
        with pytest.raises(ServiceUnavailableError):
            await embed(guard)
    clock.now += 30
    inner.down = False
    inner.gate = asyncio.Event()
    probe = asyncio.create_task(embed(guard))
    await asyncio.sleep(0)
    assert inner.calls == 4  # the probe reached the provider
    with pytest.raises(EmbedderDown):  # the others still fail at once meanwhile
        await embed(guard)
    assert inner.calls == 4
    inner.gate.set()
    assert await probe == [[1.0, 0.0]]
    assert guard.health() == EmbedderHealth("ok")
    assert await embed(guard) == [[1.0, 0.0]] and inner.calls == 5
    assert seen == ["degraded", "down", "ok"]


async def test_a_failed_probe_opens_it_again_for_a_whole_cool_down() -> None:
    inner, clock = Scripted(), Clock()
    guard = await opened(inner, clock)
    clock.now += 31
    with pytest.raises(ServiceUnavailableError):
        await embed(guard)  # the probe, failing
    assert inner.calls == 4
    clock.now += 29
    with pytest.raises(EmbedderDown):
        await embed(guard)
    assert inner.calls == 4
    clock.now += 1
    inner.down = False
    assert await embed(guard) == [[1.0, 0.0]]


async def test_a_cancelled_probe_lets_the_next_call_probe() -> None:
    inner, clock = Scripted(), Clock()
    guard = await opened(inner, clock)
    clock.now += 30
    inner.down, inner.gate = False, asyncio.Event()
    probe = asyncio.create_task(embed(guard))
    await asyncio.sleep(0)
    probe.cancel()  # the request's deadline
    with pytest.raises(asyncio.CancelledError):
        await probe
    inner.gate.set()
    assert await embed(guard) == [[1.0, 0.0]]


async def test_a_success_between_failures_resets_the_count() -> None:
    inner, clock = Scripted(), Clock()
    guard = breaker(inner, clock)
    for down in (True, True, False, True, True):
        inner.down = down
        if down:
            with pytest.raises(ServiceUnavailableError):
                await embed(guard)
        else:
            await embed(guard)
    assert guard.health().state == "degraded"  # two in a row, not four


def test_the_breaker_is_found_through_wrappers_and_keeps_the_providers_attributes() -> None:
    inner = Scripted()
    inner.base_url = "http://embedder/v1"  # type: ignore[attr-defined]
    guard = CircuitBreakerEmbedder(inner, 3, 30)

    class Recorder:
        def embedding_call(self, *args: object) -> None:
            pass

    wrapped = InstrumentedEmbedder(guard, Recorder())
    assert breaker_of(wrapped) is guard and embedder_health(wrapped).state == "ok"
    assert embedder_health(inner) == EmbedderHealth("ok")  # no breaker: never "down"
    assert guard.base_url == "http://embedder/v1" and guard.dim == 2


async def test_a_call_sent_before_it_opened_that_fails_later_does_not_restart_the_cool_down() -> (
    None
):
    inner, clock = Scripted(), Clock()
    guard = breaker(inner, clock)
    inner.down = True
    held = inner.gate = asyncio.Event()
    late = asyncio.create_task(embed(guard))  # sent while the breaker is closed, held
    await asyncio.sleep(0)
    inner.gate = None
    for _ in range(3):  # these open it
        with pytest.raises(ServiceUnavailableError):
            await embed(guard)
    assert guard.health().retry_in_s == 30.0 and not late.done()
    clock.now += 20
    held.set()
    with pytest.raises(ServiceUnavailableError):
        await late  # fails 20 s after the breaker opened
    assert guard.health().retry_in_s == 10.0
