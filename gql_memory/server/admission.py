"""Fair admission: how many GraphQL requests of one tenant run at once, and who waits.

A server process answers everyone on one event loop. Without a bound, a tenant with a dozen
clients searching in a loop had a dozen requests interleaved with another tenant's one, and
that tenant's p50 was 9 times its p50 alone (docs/benchmarks-security.md). So each tenant has
a lane: while another tenant is active, it runs at most GQL_MEMORY_ADMISSION_SLOTS requests at
once (default 1), and its others wait in its own queue (at most GQL_MEMORY_ADMISSION_QUEUE), in
order. A tenant never waits behind another tenant's requests: a slow one (a lock, a long
statement) holds up only its own. A tenant alone on the server (no other running, waiting or
seen within GQL_MEMORY_ADMISSION_IDLE_S) is not limited: fairness costs nothing when there is
nobody to be fair to. The tenant is the namespace of the caller's key (anonymous callers share
the default namespace's lane, as they share its data).

The view (``MemoryGraphQL``) takes a slot once the caller is authenticated, and gives it
back once the response is built (serialized JSON included); while the request waits for the
embedder it holds none (``OutsideTheSlot``). Not queued: callers without a principal (the
ScopeGuard refuses them before parsing), streams (graphql-sse, multipart) and WebSockets,
which live for minutes and are bounded by the subscription limits instead.
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
    """Per-tenant lanes: while another tenant is active, a tenant runs at most ``slots``
    requests at once (0: no limit) and its others wait in its own queue, at most ``queue``;
    a tenant alone (no other running, waiting or seen within ``idle_s``) is not limited.
    One tenant's requests never wait for another's: a slow one (a lock, a long statement)
    holds up only its own tenant."""

    def __init__(
        self,
        slots: int,
        queue: int,
        observer: AdmissionObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle_s: float = 1.0,
    ) -> None:
        self.slots = slots
        self.queue = queue
        self.observer = observer
        self.clock = clock
        self.idle_s = idle_s
        self.running = 0
        self._running: Counter[Hashable] = Counter()  # per tenant
        self._turns: dict[Hashable, deque[asyncio.Future[None]]] = {}  # waiters per tenant
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
        )

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
        """Take a slot of ``tenant``'s lane, waiting in its queue for up to ``timeout``
        seconds; raise RateLimitedError when its queue is full (unless not ``bounded``: a
        request coming back from the embedder) or the wait reaches ``timeout``."""
        if tenant not in self._turns and self._may_run(tenant):
            self._take(tenant)
            if self.observer is not None:
                self.observer.admission_waited(0.0)
            return
        turns = self._turns.get(tenant)
        if bounded and turns is not None and len(turns) >= self.queue:
            raise self._refusal(
                tenant,
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
                self._free(tenant)  # the slot came as the wait ended: the next waiter's
            else:
                self._withdraw(tenant, turn)
            if not isinstance(exc, TimeoutError):
                raise
            raise self._refusal(
                tenant,
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

    def _may_run(self, tenant: Hashable) -> bool:
        return not self.slots or self._running[tenant] < self.slots or self._alone(tenant)

    def _alone(self, tenant: Hashable) -> bool:
        """Whether no other tenant is active: running, waiting, or seen within idle_s."""
        now = self.clock()
        for other, seen in list(self._seen.items()):
            if now - seen >= self.idle_s and not self._running[other]:
                del self._seen[other]
        return all(other == tenant for other in (*self._seen, *self._running, *self._turns))

    def _take(self, tenant: Hashable) -> None:
        self._seen[tenant] = self.clock()
        self.running += 1
        self._running[tenant] += 1

    def _free(self, tenant: Hashable) -> None:
        self._seen[tenant] = self.clock()
        self.running -= 1
        self._running[tenant] -= 1
        if not self._running[tenant]:
            del self._running[tenant]
        self._hand_on(tenant)

    def _hand_on(self, tenant: Hashable) -> None:
        """The tenant's next waiters, as far as its lane has room."""
        turns = self._turns.get(tenant)
        while turns and self._may_run(tenant):
            turn = turns.popleft()
            if not turn.done():  # a cancelled waiter may not have withdrawn yet
                turn.set_result(None)
                self._take(tenant)
        if turns is not None and not turns:
            del self._turns[tenant]
        self._report_queue()

    def _withdraw(self, tenant: Hashable, turn: asyncio.Future[None]) -> None:
        turns = self._turns.get(tenant)
        if turns is not None and turn in turns:
            turns.remove(turn)
            if not turns:
                del self._turns[tenant]
        self._report_queue()

    def _next_turn_s(self, tenant: Hashable) -> float:
        """About when a waiting request of ``tenant`` runs: its lane frees a slot every
        hold / slots seconds, and its waiters go in order."""
        ahead = len(self._turns.get(tenant, ())) + 1
        return self._hold_s * ahead / max(1, self.slots)

    def _refusal(self, tenant: Hashable, reason: str, why: str) -> RateLimitedError:
        if self.observer is not None:
            self.observer.admission_refused(reason)
        retry = self._next_turn_s(tenant)
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
