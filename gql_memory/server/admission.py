"""Fair admission: how many GraphQL requests run at once, and whose runs next.

A server process answers everyone on one event loop. Without a bound, a tenant with a dozen
clients searching in a loop had a dozen requests interleaved with another tenant's one, and
that tenant's p50 was 9 times its p50 alone (docs/benchmarks-security.md). So at most
GQL_MEMORY_ADMISSION_SLOTS requests run at once; the others wait in their own tenant's queue
(at most GQL_MEMORY_ADMISSION_QUEUE each), and a slot that frees goes to the waiting tenant
with the fewest requests running, among equals to the one served longest ago: tenants that
keep waiting take turns (round-robin), so a tenant with twelve clients gets no more slots
than a tenant with one, and a tenant that was idle goes first (it has had no share lately).
The tenant is the namespace of the caller's key (anonymous callers share the default
namespace's turn, as they share its data).

The view (``MemoryGraphQL``) takes a slot once the caller is authenticated, and gives it
back once the response is built (serialized JSON included). Not queued: callers without a
principal (the ScopeGuard refuses them before parsing), streams (graphql-sse, multipart) and
WebSockets, which live for minutes and are bounded by the subscription limits instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from typing import Protocol

from gql_memory.config import Settings
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.errors import RateLimitedError

# How much one slot's hold counts in the running mean that retryAfterMs is estimated from.
HOLD_WEIGHT = 0.1
FIRST_HOLD_S = 0.05  # the estimate before any request has finished


class AdmissionObserver(Protocol):
    """What admission reports (server/metrics.Metrics implements it)."""

    def admission_queue_changed(self, waiting: int) -> None: ...

    def admission_waited(self, seconds: float) -> None: ...

    def admission_refused(self, reason: str) -> None: ...


class FairAdmission:
    """``slots`` requests run at once (0: no limit); the others wait per tenant, at most
    ``queue`` each. A freed slot goes to the waiting tenant with the fewest requests running,
    among equals to the one served longest ago: tenants that keep waiting take turns
    (round-robin), and one that just became active goes first."""

    def __init__(
        self,
        slots: int,
        queue: int,
        observer: AdmissionObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = slots
        self.queue = queue
        self.observer = observer
        self.clock = clock
        self.running = 0
        self._running: Counter[Hashable] = Counter()  # per tenant
        # When each active tenant (running or waiting) last got a slot, in slots handed out;
        # a tenant that had gone idle comes back as never served.
        self._served: dict[Hashable, int] = {}
        self._handed = 0
        # Tenants with waiters. Requests only wait while every slot is taken: a freed slot
        # is handed straight on.
        self._turns: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self._hold_s = FIRST_HOLD_S

    @classmethod
    def for_settings(
        cls, settings: Settings, observer: AdmissionObserver | None = None
    ) -> FairAdmission:
        return cls(settings.admission_slots, settings.admission_queue, observer)

    def waiting(self, tenant: Hashable | None = None) -> int:
        """Requests waiting for a slot: of one tenant, or of all."""
        if tenant is not None:
            return len(self._turns.get(tenant, ()))
        return sum(len(turns) for turns in self._turns.values())

    def running_of(self, tenant: Hashable) -> int:
        """Requests of ``tenant`` holding a slot."""
        return self._running[tenant]

    async def enter(
        self, tenant: Hashable, timeout: float | None = None, *, bounded: bool = True
    ) -> None:
        """Take a slot, waiting in ``tenant``'s queue for up to ``timeout`` seconds; raise
        RateLimitedError when its queue is full (unless not ``bounded``: a request coming
        back from the embedder) or the wait reaches ``timeout``."""
        if not self.slots or (self.running < self.slots and not self._turns):
            self._take(tenant)
            if self.observer is not None:
                self.observer.admission_waited(0.0)
            return
        turns = self._turns.get(tenant)
        if bounded and turns is not None and len(turns) >= self.queue:
            raise self._refusal(
                "queue_full",
                f"This namespace already has {len(turns)} requests waiting for this server "
                "(GQL_MEMORY_ADMISSION_QUEUE)",
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._turns.setdefault(tenant, deque()).append(turn)
        self._report_queue()
        started = self.clock()
        try:
            async with asyncio.timeout(timeout):
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._free(tenant)  # the slot came as the wait ended: the next tenant's
            else:
                self._withdraw(tenant, turn)
            if not isinstance(exc, TimeoutError):
                raise
            raise self._refusal(
                "deadline",
                f"This request waited {timeout:g} s (its deadline, GQL_MEMORY_REQUEST_TIMEOUT_S) "
                "for its turn behind this namespace's other requests and did not run",
            ) from None
        if self.observer is not None:
            self.observer.admission_waited(self.clock() - started)

    def leave(self, tenant: Hashable, held_s: float) -> None:
        """Give back ``tenant``'s slot, held for ``held_s`` seconds."""
        self._hold_s += HOLD_WEIGHT * (held_s - self._hold_s)
        self._free(tenant)

    def _take(self, tenant: Hashable) -> None:
        self.running += 1
        self._running[tenant] += 1
        self._handed += 1
        self._served[tenant] = self._handed

    def _free(self, tenant: Hashable) -> None:
        self.running -= 1
        self._running[tenant] -= 1
        if not self._running[tenant]:
            del self._running[tenant]
        if self.slots:
            self._hand_on()
        self._forget_if_idle(tenant)

    def _hand_on(self) -> None:
        """The freed slot to the waiting tenant that has the fewest running, and among those
        the one served longest ago."""
        while self._turns:
            tenant = min(self._turns, key=lambda t: (self._running[t], self._served.get(t, 0)))
            turns = self._turns[tenant]
            turn = turns.popleft()
            if not turns:
                del self._turns[tenant]
            if not turn.done():  # a cancelled waiter may not have withdrawn yet
                turn.set_result(None)
                self._take(tenant)
                break
        self._report_queue()

    def _withdraw(self, tenant: Hashable, turn: asyncio.Future[None]) -> None:
        turns = self._turns.get(tenant)
        if turns is not None and turn in turns:
            turns.remove(turn)
            if not turns:
                del self._turns[tenant]
        self._forget_if_idle(tenant)
        self._report_queue()

    def _forget_if_idle(self, tenant: Hashable) -> None:
        """Nothing running, nothing waiting: the tenant's next request is a newcomer's (and
        the tables stay as small as the set of active tenants)."""
        if tenant not in self._running and tenant not in self._turns:
            self._served.pop(tenant, None)

    def _next_turn_s(self) -> float:
        """About when a waiting tenant's next request runs: a slot frees every hold / slots
        seconds, and every tenant that waits takes its turn before this one's comes back."""
        return self._hold_s * max(1, len(self._turns)) / max(1, self.slots)

    def _refusal(self, reason: str, why: str) -> RateLimitedError:
        if self.observer is not None:
            self.observer.admission_refused(reason)
        retry = self._next_turn_s()
        return RateLimitedError(retry, f"{why}; retry in {retry:.2f} s (extensions.retryAfterMs)")

    def _report_queue(self) -> None:
        if self.observer is not None:
            self.observer.admission_queue_changed(self.waiting())


class AdmissionTicket:
    """One request's slot: taken at most once (a batch runs all its operations in it), given
    back when the request is done, whether it was answered, refused or cancelled."""

    def __init__(self, admission: FairAdmission) -> None:
        self.admission = admission
        self._held: tuple[Hashable, float] | None = None  # (tenant, since)
        self._away: Hashable | None = None  # the tenant, while stepped out (``step_out``)
        self._outside = 0  # embedder calls of this request under way

    async def enter(self, tenant: Hashable, timeout: float | None) -> None:
        if self._held is None and self._away is None:
            await self.admission.enter(tenant, timeout)
            self._held = (tenant, self.admission.clock())

    def step_out(self) -> None:
        """The request waits for the embedder: its slot runs another request meanwhile (a
        provider that hangs would otherwise hold every slot, and a remote one's round trips
        would bound the server's throughput)."""
        self._outside += 1
        if self._outside == 1 and self._held is not None:
            tenant, since = self._held
            self._held, self._away = None, tenant
            self.admission.leave(tenant, self.admission.clock() - since)

    async def step_in(self) -> None:
        """Back from the embedder: wait for a slot again (in the tenant's turn, never
        refused for a full queue; the request's deadline still bounds the wait)."""
        self._outside -= 1
        if self._outside == 0 and self._away is not None:
            tenant, self._away = self._away, None
            await self.admission.enter(tenant, None, bounded=False)
            self._held = (tenant, self.admission.clock())

    def abandon(self) -> None:
        """Cancelled while outside: the request ends without its slot back."""
        self._outside -= 1
        if self._outside == 0:
            self._away = None

    def leave(self) -> None:
        if self._held is not None:
            tenant, since = self._held
            self._held = None
            self.admission.leave(tenant, self.admission.clock() - since)


# The ticket of the request this task serves (set once it has its slot), for
# ``OutsideTheSlot``; None outside a request (the background worker, the library).
current_ticket: ContextVar[AdmissionTicket | None] = ContextVar("admission_ticket", default=None)


class OutsideTheSlot:
    """Wraps the server's embedder: a request gives its slot back while it waits for an
    embedding and takes one again afterwards (``AdmissionTicket.step_out``)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dim = inner.dim
        self.asymmetry = inner.asymmetry

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        ticket = current_ticket.get()
        if ticket is None:
            return await self.inner.embed(texts, role=role)
        ticket.step_out()
        try:
            vectors = await self.inner.embed(texts, role=role)
        except asyncio.CancelledError:
            ticket.abandon()
            raise
        except BaseException:
            await ticket.step_in()  # the request goes on without the vectors
            raise
        await ticket.step_in()
        return vectors

    async def aclose(self) -> None:
        await self.inner.aclose()
