"""Fair admission: tenants take turns on a server process.

A server process answers everyone on one event loop. Without a bound, a tenant with a dozen
clients searching in a loop had a dozen requests interleaved with another tenant's one, and
that tenant's p50 was 9 times its p50 alone (docs/benchmarks-security.md). So while more than
one tenant is active, at most GQL_MEMORY_ADMISSION_SLOTS requests (default 1) run within their
turn (GQL_MEMORY_ADMISSION_TURN_MS, 50 ms); the others wait in their tenant's queue (at most
GQL_MEMORY_ADMISSION_QUEUE), and a turn that frees goes to the waiting tenant with the fewest
requests running, among equals to the one served longest ago: tenants that keep waiting take
turns, so a tenant with twelve clients gets no more of the process than a tenant with one. A
request that outlasts its turn (a lock, a long statement) stops counting: nobody waits behind
a slow request for longer than a turn. A tenant alone on the server (no other running,
waiting or seen within GQL_MEMORY_ADMISSION_IDLE_S) is not limited: fairness costs nothing
when there is nobody to be fair to. The tenant is the namespace of the caller's key
(anonymous callers share the default namespace's turn, as they share its data).

The view (``MemoryGraphQL``) takes a turn once the caller is authenticated, and gives it
back once the response is built (serialized JSON included); while the request waits for the
embedder it holds none (``OutsideTheSlot``). Not queued: callers without a principal (the
ScopeGuard refuses them before parsing), streams (graphql-sse, multipart) and WebSockets,
which live for minutes and are bounded by the subscription limits instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass
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


@dataclass(eq=False)
class Slot:
    """One running request: its tenant, when it started, and whether it is still within its
    turn (``FairAdmission.turn_s``)."""

    tenant: Hashable
    started: float
    fresh: bool = True
    timer: asyncio.TimerHandle | None = None


class FairAdmission:
    """Turns between tenants. While more than one tenant is active, at most ``slots``
    requests run within their first ``turn_s`` seconds (their turn); a request that outlasts
    its turn (a lock, a long statement) no longer counts, so nobody waits behind it for
    longer than that. The others wait in their tenant's queue (at most ``queue`` each), and
    a turn that frees goes to the waiting tenant with the fewest requests running, among
    equals to the one served longest ago: tenants that keep waiting take turns, and a tenant
    with twelve clients gets no more turns than a tenant with one. A tenant alone (no other
    running, waiting or seen within ``idle_s``) is not limited. ``slots`` 0: no limit."""

    def __init__(
        self,
        slots: int,
        queue: int,
        observer: AdmissionObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle_s: float = 1.0,
        turn_s: float = 0.05,
    ) -> None:
        self.slots = slots
        self.queue = queue
        self.observer = observer
        self.clock = clock
        self.idle_s = idle_s
        self.turn_s = turn_s
        self.running = 0
        self.fresh = 0  # running requests within their turn
        self._running: dict[Hashable, deque[Slot]] = {}
        self._turns: dict[Hashable, deque[asyncio.Future[Slot]]] = {}  # waiters per tenant
        # When each active tenant last got a turn, in turns handed out; a tenant that had
        # gone idle comes back as never served.
        self._served: dict[Hashable, int] = {}
        self._handed = 0
        # when each tenant last entered or left, while that is less than idle_s ago
        self._seen: dict[Hashable, float] = {}
        self._hold_s = FIRST_HOLD_S

    @classmethod
    def for_settings(
        cls, settings: Settings, observer: AdmissionObserver | None = None
    ) -> FairAdmission:
        return cls(
            settings.admission_slots,
            settings.admission_queue,
            observer,
            idle_s=settings.admission_idle_s,
            turn_s=settings.admission_turn_ms / 1000,
        )

    def waiting(self, tenant: Hashable | None = None) -> int:
        """Requests waiting for a turn: of one tenant, or of all."""
        if tenant is not None:
            return len(self._turns.get(tenant, ()))
        return sum(len(turns) for turns in self._turns.values())

    def running_of(self, tenant: Hashable) -> int:
        """Requests of ``tenant`` running."""
        return len(self._running.get(tenant, ()))

    async def enter(
        self, tenant: Hashable, timeout: float | None = None, *, bounded: bool = True
    ) -> Slot:
        """Start a request of ``tenant``, waiting in its queue for up to ``timeout`` seconds;
        raise RateLimitedError when its queue is full (unless not ``bounded``: a request
        coming back from the embedder) or the wait reaches ``timeout``."""
        if not self._turns and self._may_start(tenant):
            if self.observer is not None:
                self.observer.admission_waited(0.0)
            return self._take(tenant)
        turns = self._turns.get(tenant)
        if bounded and turns is not None and len(turns) >= self.queue:
            raise self._refusal(
                "queue_full",
                f"This namespace already has {len(turns)} requests waiting for this server "
                "(GQL_MEMORY_ADMISSION_QUEUE)",
            )
        turn: asyncio.Future[Slot] = asyncio.get_running_loop().create_future()
        self._turns.setdefault(tenant, deque()).append(turn)
        self._report_queue()
        started = self.clock()
        try:
            async with asyncio.timeout(timeout):
                slot = await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self.leave(turn.result(), 0.0)  # the turn came as the wait ended: the next's
            else:
                self._withdraw(tenant, turn)
            if not isinstance(exc, TimeoutError):
                raise
            raise self._refusal(
                "deadline",
                f"This request waited {timeout:g} s (its deadline, GQL_MEMORY_REQUEST_TIMEOUT_S) "
                "for its turn behind other namespaces' requests and did not run",
            ) from None
        if self.observer is not None:
            self.observer.admission_waited(self.clock() - started)
        return slot

    def leave(self, slot: Slot | Hashable, held_s: float) -> None:
        """The request of ``slot`` (or the oldest of a tenant) is done after ``held_s``."""
        if not isinstance(slot, Slot):
            slot = self._running[slot][0]
        self._hold_s += HOLD_WEIGHT * (held_s - self._hold_s)
        self._age(slot)
        self.running -= 1
        mine = self._running[slot.tenant]
        mine.remove(slot)
        if not mine:
            del self._running[slot.tenant]
        self._seen[slot.tenant] = self.clock()
        self._hand_on()
        self._forget_if_idle(slot.tenant)

    def _may_start(self, tenant: Hashable) -> bool:
        return not self.slots or self.fresh < self.slots or self._alone(tenant)

    def _alone(self, tenant: Hashable) -> bool:
        """Whether no other tenant is active: running, waiting, or seen within idle_s."""
        now = self.clock()
        for other, seen in list(self._seen.items()):
            if now - seen >= self.idle_s and other not in self._running:
                del self._seen[other]
        return all(other == tenant for other in (*self._seen, *self._running, *self._turns))

    def _take(self, tenant: Hashable) -> Slot:
        now = self.clock()
        slot = Slot(tenant, now)
        if self.turn_s:
            loop = asyncio.get_running_loop()
            slot.timer = loop.call_later(self.turn_s, self._outlasted, slot)
        self.running += 1
        self.fresh += 1
        self._running.setdefault(tenant, deque()).append(slot)
        self._handed += 1
        self._served[tenant] = self._handed
        self._seen[tenant] = now
        return slot

    def _age(self, slot: Slot) -> None:
        if slot.fresh:
            slot.fresh = False
            self.fresh -= 1
            if slot.timer is not None:
                slot.timer.cancel()

    def _outlasted(self, slot: Slot) -> None:
        """``slot``'s request outlasted its turn: the next waiter goes."""
        if slot.fresh:
            self._age(slot)
            self._hand_on()

    def _hand_on(self) -> None:
        """Free turns to the waiting tenants with the fewest running, among those to the one
        served longest ago."""
        while self._turns:
            tenant = min(self._turns, key=lambda t: (self.running_of(t), self._served.get(t, 0)))
            if not self._may_start(tenant):
                break
            turns = self._turns[tenant]
            turn = turns.popleft()
            if not turns:
                del self._turns[tenant]
            if not turn.done():  # a cancelled waiter may not have withdrawn yet
                turn.set_result(self._take(tenant))
        self._report_queue()

    def _withdraw(self, tenant: Hashable, turn: asyncio.Future[Slot]) -> None:
        turns = self._turns.get(tenant)
        if turns is not None and turn in turns:
            turns.remove(turn)
            if not turns:
                del self._turns[tenant]
        self._forget_if_idle(tenant)
        self._report_queue()

    def _forget_if_idle(self, tenant: Hashable) -> None:
        """Nothing running, nothing waiting: the tenant's next request is a newcomer's."""
        if tenant not in self._running and tenant not in self._turns:
            self._served.pop(tenant, None)

    def _next_turn_s(self) -> float:
        """About when a waiting tenant's next request runs: a turn frees every hold / slots
        seconds (at most turn_s), and every tenant that waits takes its turn before."""
        hold = min(self._hold_s, self.turn_s) if self.turn_s else self._hold_s
        return hold * max(1, len(self._turns)) / max(1, self.slots)

    def _refusal(self, reason: str, why: str) -> RateLimitedError:
        if self.observer is not None:
            self.observer.admission_refused(reason)
        retry = self._next_turn_s()
        return RateLimitedError(retry, f"{why}; retry in {retry:.2f} s (extensions.retryAfterMs)")

    def _report_queue(self) -> None:
        if self.observer is not None:
            self.observer.admission_queue_changed(self.waiting())


class AdmissionTicket:
    """One request's turn: taken at most once (a batch runs all its operations in it), given
    back when the request is done, whether it was answered, refused or cancelled."""

    def __init__(self, admission: FairAdmission) -> None:
        self.admission = admission
        self._held: Slot | None = None
        self._away: Hashable | None = None  # the tenant, while stepped out (``step_out``)
        self._outside = 0  # embedder calls of this request under way

    async def enter(self, tenant: Hashable, timeout: float | None) -> None:
        if self._held is None and self._away is None:
            self._held = await self.admission.enter(tenant, timeout)

    def step_out(self) -> None:
        """The request waits for the embedder: its turn goes to another request meanwhile
        (a provider that hangs would otherwise hold the turns, and a remote one's round
        trips would bound the server's throughput)."""
        self._outside += 1
        if self._outside == 1 and self._held is not None:
            slot, self._held = self._held, None
            self._away = slot.tenant
            self.admission.leave(slot, self.admission.clock() - slot.started)

    async def step_in(self) -> None:
        """Back from the embedder: wait for a turn again (never refused for a full queue;
        the request's deadline still bounds the wait)."""
        self._outside -= 1
        if self._outside == 0 and self._away is not None:
            tenant, self._away = self._away, None
            self._held = await self.admission.enter(tenant, None, bounded=False)

    def abandon(self) -> None:
        """Cancelled while outside: the request ends without its turn back."""
        self._outside -= 1
        if self._outside == 0:
            self._away = None

    def leave(self) -> None:
        if self._held is not None:
            slot, self._held = self._held, None
            self.admission.leave(slot, self.admission.clock() - slot.started)


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
