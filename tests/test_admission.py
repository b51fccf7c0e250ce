"""Fair admission (gql_memory/server/admission.py): a bounded number of GraphQL requests run
at once, the others wait in their namespace's queue, and free slots go round-robin across
the namespaces that wait.

Over HTTP the one slot is held by a request waiting on a session lock the test holds, so the
queue is provably full of waiting requests when the lock is let go; the order they then ran
in is the order of the ids they were given (one sequence for every namespace).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import RateLimitedError
from gql_memory.keys import ApiKeyStore
from gql_memory.memory.working.sessions import lock_session
from gql_memory.server.admission import FairAdmission
from gql_memory.server.app import create_app
from tests.conftest import start_live_server, truncate_all
from tests.processes import wait_until

ADD = "mutation($s: String!) { addWorkingMemory(input: {content: $s, sessionId: $s}) { addedId } }"
WAITING = re.compile(r"^gql_memory_admission_waiting (\S+)$", re.M)
LOCK_WAITERS = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    server, task, base_url = await start_live_server(create_app(settings))
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        await task


class Tenants:
    """Requests of two namespaces (``default``, whose session "held" the test locks, and
    ``other``) against a server with one slot."""

    def __init__(self, client: httpx.AsyncClient, keys: dict[str, str]) -> None:
        self.client = client
        self.keys = keys

    async def add(self, namespace: str, session: str) -> httpx.Response:
        return await self.client.post(
            "/graphql",
            json={"query": ADD, "variables": {"s": session}},
            headers={"Authorization": f"Bearer {self.keys[namespace]}"},
        )

    def send(self, namespace: str, session: str) -> asyncio.Task[httpx.Response]:
        return asyncio.create_task(self.add(namespace, session))

    async def waiting(self) -> float:
        """Requests waiting for a slot, as /metrics shows them."""
        metrics = (await self.client.get("/metrics")).text
        found = WAITING.search(metrics)
        return float(found.group(1)) if found else 0.0

    async def queue(self, namespace: str, session: str) -> asyncio.Task[httpx.Response]:
        """Send a request and return once it waits for the slot."""
        before = await self.waiting()
        task = self.send(namespace, session)

        async def queued() -> bool:
            return await self.waiting() == before + 1

        await wait_until(queued, message=f"{namespace}/{session} never queued")
        return task


@pytest.fixture
async def keys(db: Database) -> dict[str, str]:
    await truncate_all(db)
    store = ApiKeyStore(db)
    return {ns: (await store.create(ns, "read,write")).secret for ns in ("default", "other")}


@dataclass
class SlotTaken:
    """A server with one slot, taken by ``holder``: a request of ``default`` waiting on the
    session lock that the test holds until ``release``."""

    tenants: Tenants
    holder: asyncio.Task[httpx.Response]
    release: Callable[[], Awaitable[None]]


@asynccontextmanager
async def one_slot_taken(
    settings: Settings, db: Database, keys: dict[str, str], **limits: Any
) -> AsyncIterator[SlotTaken]:
    # both namespaces active for the whole test (a namespace alone is not limited), and a
    # request keeps its turn until it ends (admission_turn_ms 0): the held one blocks
    one_slot = settings.with_overrides(
        auth="required",
        admission_slots=1,
        admission_idle_s=3600,
        **{"admission_turn_ms": 0, "admission_queue": 100, **limits},
    )
    async with serving(one_slot) as client, AsyncExitStack() as lock:
        tenants = Tenants(client, keys)
        added_id(await tenants.add("other", "first"))
        conn = await lock.enter_async_context(db.write())
        await lock_session(conn, "default", "held")
        holder = tenants.send("default", "held")

        async def holding() -> bool:
            async with db.read() as reader:
                return bool(await reader.scalar(LOCK_WAITERS))

        await wait_until(holding, message="the first request never reached the lock")
        yield SlotTaken(tenants, holder, lock.aclose)


def added_id(response: httpx.Response) -> int:
    body = response.json()
    assert "errors" not in body, body
    return int(body["data"]["addWorkingMemory"]["addedId"])


async def test_a_freed_slot_goes_to_the_next_namespace_in_turn(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    async with one_slot_taken(settings, db, keys) as taken:
        # three of default's requests wait, then two of other's, sent after all of them
        queued = [await taken.tenants.queue("default", f"d{i}") for i in range(3)]
        queued += [await taken.tenants.queue("other", f"o{i}") for i in range(2)]
        await taken.release()  # the waiting requests now run one at a time, in turn
        ids = {task: added_id(await task) for task in [taken.holder, *queued]}
    ran = sorted(ids, key=ids.__getitem__)
    d0, d1, d2, o0, o1 = queued
    # other had had no turn: it goes first, then the two namespaces take turns
    assert ran == [taken.holder, o0, d0, o1, d1, d2]


async def test_a_namespace_over_its_queue_is_told_when_to_retry(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    async with one_slot_taken(settings, db, keys, admission_queue=1) as taken:
        waiting = await taken.tenants.queue("default", "d0")
        refused = await taken.tenants.add("default", "d1")
        # another namespace still has room in its own queue
        other = await taken.tenants.queue("other", "o0")
        await taken.release()
        for task in (taken.holder, waiting, other):
            added_id(await task)
    assert refused.status_code == 429
    [error] = refused.json()["errors"]
    assert error["extensions"]["code"] == "RATE_LIMITED", error
    assert "GQL_MEMORY_ADMISSION_QUEUE" in error["message"]
    assert error["extensions"]["retryAfterMs"] > 0
    assert int(refused.headers["Retry-After"]) >= 1


async def test_health_metrics_and_graphiql_are_never_queued(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    async with one_slot_taken(settings, db, keys, admission_queue=1) as taken:
        waiting = await taken.tenants.queue("default", "d0")  # the slot taken, the queue full
        client = taken.tenants.client
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
        ide = await client.get("/graphql", headers={"Accept": "text/html"})
        assert ide.status_code == 200
        assert "graphiql" in ide.text.lower()
        assert (await client.get("/graphiql/page.js")).status_code == 200
        assert await taken.tenants.waiting() == 1
        await taken.release()
        for task in (taken.holder, waiting):
            added_id(await task)


async def test_a_batch_runs_all_its_operations_in_one_slot(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    one_slot = settings.with_overrides(auth="required", admission_slots=1)
    async with serving(one_slot) as client:
        batch = [{"query": ADD, "variables": {"s": f"b{i}"}} for i in range(3)]
        response = await client.post(
            "/graphql", json=batch, headers={"Authorization": f"Bearer {keys['other']}"}
        )
    assert [body.get("errors") for body in response.json()] == [None] * 3


async def test_a_request_that_outlasts_its_turn_holds_nobody_up(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    """The default turn (50 ms): default's request blocked on a lock outlasts it, and
    other's requests run meanwhile instead of waiting for the lock (a convoy)."""
    async with one_slot_taken(settings, db, keys, admission_turn_ms=50) as taken:
        for i in range(3):
            added_id(await taken.tenants.add("other", f"o{i}"))
        assert not taken.holder.done()
        await taken.release()
        added_id(await taken.holder)


# --- the scheduler itself ------------------------------------------------------------------------


async def admitted(admission: FairAdmission, tenant: str, order: list[str], name: str) -> None:
    await admission.enter(tenant)
    order.append(name)


async def settle() -> None:
    """Let every ready task run (no task here waits on anything but the scheduler)."""
    for _ in range(10):
        await asyncio.sleep(0)


def queue_up(
    admission: FairAdmission, arrivals: list[str], order: list[str]
) -> list[asyncio.Task[None]]:
    """One waiting request per arrival, named ``<tenant><n>``."""
    return [asyncio.create_task(admitted(admission, name[0], order, name)) for name in arrivals]


async def shared(slots: int, queue: int = 10) -> FairAdmission:
    """An admission that a bystander tenant ("z", idle since) keeps shared (a tenant alone is
    not limited), whose requests keep their turn until they end (no timer fires here)."""
    admission = FairAdmission(slots=slots, queue=queue, idle_s=3600, turn_s=3600)
    admission.leave(await admission.enter("z"), 0.0)
    return admission


async def test_a_tenant_alone_is_not_limited_until_another_is_active() -> None:
    now = [0.0]
    admission = FairAdmission(slots=1, queue=10, clock=lambda: now[0], idle_s=1.0, turn_s=3600)
    for _ in range(5):  # alone: every request runs at once
        await admission.enter("a")
    assert admission.running == 5 and admission.waiting() == 0
    other = asyncio.create_task(admission.enter("b"))  # b arrives: turns are shared
    await settle()
    late = asyncio.create_task(admission.enter("a"))
    await settle()
    assert admission.waiting() == 2
    for _ in range(4):
        admission.leave("a", 0.01)
        await settle()
    assert not other.done()  # a still runs one within its turn
    admission.leave("a", 0.01)
    await settle()
    assert other.done() and not late.done()  # b had had no turn: it goes first
    admission.leave("b", 0.01)
    await settle()
    assert late.done() and admission.running == 1
    admission.leave("a", 0.01)
    now[0] += 1.0  # b idle for idle_s: a is alone again
    for _ in range(3):
        await admission.enter("a")
    assert admission.running == 3 and admission.waiting() == 0


async def test_a_request_that_outlasts_its_turn_lets_the_next_go() -> None:
    admission = await shared(slots=1)
    slow = await admission.enter("a")
    waiting = asyncio.create_task(admission.enter("b"))
    await settle()
    assert not waiting.done()
    admission._outlasted(slow)  # its timer, fired (GQL_MEMORY_ADMISSION_TURN_MS)
    await settle()
    assert waiting.done() and admission.running == 2 and admission.fresh == 1
    admission.leave(slow, 1.0)
    assert admission.fresh == 1 and admission.running == 1


async def test_waiting_tenants_take_turns_however_many_requests_each_sends() -> None:
    admission = await shared(slots=1)
    order: list[str] = []
    await admission.enter("a")
    tasks = queue_up(admission, ["a1", "a2", "a3", "a4", "b1", "b2", "c1"], order)
    await settle()
    assert order == [] and admission.waiting() == 7 and admission.waiting("a") == 4
    tenant = "a"
    for _ in tasks:
        admission.leave(tenant, 0.01)
        await settle()
        tenant = order[-1][0]  # the one just admitted is the next to leave
    await asyncio.gather(*tasks)
    # b and c had had no slot: they go before a, whose slot was just freed; then turns
    assert order == ["b1", "c1", "a1", "b2", "a2", "a3", "a4"]
    assert admission.running == 1 and admission.waiting() == 0


async def test_a_freed_slot_goes_to_the_tenant_with_the_fewest_running() -> None:
    admission = await shared(slots=3)
    order: list[str] = []
    for tenant in "aab":  # a runs two, b one
        await admission.enter(tenant)
    tasks = queue_up(admission, ["a1", "b1", "c1"], order)
    await settle()
    admission.leave("a", 0.01)  # a still runs one, b one, c none
    await settle()
    admission.leave("a", 0.01)  # a runs none, b one, c one
    await settle()
    admission.leave("c", 0.01)  # a one, b one: b was served longer ago
    await settle()
    assert order == ["c1", "a1", "b1"]
    await asyncio.gather(*tasks)


async def test_a_full_queue_refuses_only_its_own_tenant() -> None:
    admission = await shared(slots=1, queue=2)
    await admission.enter("a")
    waiters = [asyncio.create_task(admission.enter("a")) for _ in range(2)]
    await settle()
    with pytest.raises(RateLimitedError) as refused:
        await admission.enter("a")
    assert refused.value.retry_after_s > 0
    other = asyncio.create_task(admission.enter("b"))
    await settle()
    assert admission.waiting("a") == 2 and admission.waiting("b") == 1
    for tenant in "aba":
        admission.leave(tenant, 0.01)
        await settle()
    await asyncio.gather(*waiters, other)


async def test_a_waiter_at_its_deadline_is_refused_and_leaves_the_queue() -> None:
    admission = await shared(slots=1)
    await admission.enter("a")  # never given back
    with pytest.raises(RateLimitedError, match="deadline"):
        await admission.enter("b", timeout=0.01)
    assert admission.waiting() == 0 and admission.running == 1


async def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    admission = await shared(slots=1)
    order: list[str] = []
    await admission.enter("a")
    gone, stays = queue_up(admission, ["b1", "c1"], order)
    await settle()
    gone.cancel()
    admission.leave("a", 0.01)  # before the cancelled waiter has run its cleanup
    await settle()
    await stays
    assert gone.cancelled() and order == ["c1"]
    assert admission.running == 1 and admission.running_of("c") == 1
    assert admission.waiting() == 0


async def test_no_slots_means_no_limit() -> None:
    admission = await shared(slots=0, queue=1)
    for _ in range(100):
        await admission.enter("a")
    assert admission.waiting() == 0 and admission.running == 100
