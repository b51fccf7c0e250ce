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
    ``other``) against a server with one slot per namespace."""

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
    # both namespaces active for the whole test (admission_idle_s): neither is alone, whose
    # requests would not be limited
    one_slot = settings.with_overrides(
        auth="required", admission_slots=1, admission_idle_s=3600, **limits
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


async def test_a_namespace_waits_only_for_its_own_requests(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    """default's one slot is held by a request blocked on a lock: its next requests wait in
    its lane, in order; other's run at once, never behind default's."""
    async with one_slot_taken(settings, db, keys) as taken:
        queued = [await taken.tenants.queue("default", f"d{i}") for i in range(3)]
        others = [added_id(await taken.tenants.add("other", f"o{i}")) for i in range(2)]
        assert not taken.holder.done() and not any(task.done() for task in queued)
        await taken.release()  # default's waiting requests now run one at a time, in order
        ids = {task: added_id(await task) for task in [taken.holder, *queued]}
    ran = sorted(ids, key=ids.__getitem__)
    assert ran == [taken.holder, *queued]
    assert max(others) < min(ids[task] for task in queued)


async def test_a_namespace_over_its_queue_is_told_when_to_retry(
    settings: Settings, db: Database, keys: dict[str, str]
) -> None:
    async with one_slot_taken(settings, db, keys, admission_queue=1) as taken:
        waiting = await taken.tenants.queue("default", "d0")
        refused = await taken.tenants.add("default", "d1")
        added_id(await taken.tenants.add("other", "o0"))  # another namespace runs at once
        await taken.release()
        for task in (taken.holder, waiting):
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
    """An admission that a bystander tenant ("z", idle since) keeps shared: no tenant of the
    test is alone on it (a tenant alone is not limited)."""
    admission = FairAdmission(slots=slots, queue=queue, idle_s=3600)
    await admission.enter("z")
    admission.leave("z", 0.0)
    return admission


async def test_a_tenant_alone_is_not_limited_until_another_is_active() -> None:
    now = [0.0]
    admission = FairAdmission(slots=1, queue=10, clock=lambda: now[0], idle_s=1.0)
    for _ in range(5):  # alone: every request runs at once
        await admission.enter("a")
    assert admission.running == 5 and admission.waiting() == 0
    await admission.enter("b")  # b's lane is empty: it runs at once
    late = asyncio.create_task(admission.enter("a"))  # a now shares: one at a time
    await settle()
    assert admission.waiting("a") == 1
    for _ in range(4):
        admission.leave("a", 0.01)
        await settle()
    assert not late.done()  # a still runs one
    admission.leave("a", 0.01)
    await settle()
    assert late.done() and admission.running_of("a") == 1
    admission.leave("a", 0.01)
    admission.leave("b", 0.01)
    now[0] += 1.0  # b idle for admission_idle_s: a is alone again
    for _ in range(3):
        await admission.enter("a")
    assert admission.running == 3 and admission.waiting() == 0


async def test_each_tenant_waits_only_behind_its_own_requests_in_order() -> None:
    admission = await shared(slots=1)
    order: list[str] = []
    await admission.enter("a")  # held
    tasks = queue_up(admission, ["a1", "a2", "a3", "b1", "c1"], order)
    await settle()
    assert order == ["b1", "c1"] and admission.waiting() == 3 and admission.waiting("a") == 3
    for _ in range(3):
        admission.leave("a", 0.01)
        await settle()
    await asyncio.gather(*tasks)
    assert order == ["b1", "c1", "a1", "a2", "a3"]
    assert admission.running_of("a") == 1 and admission.waiting() == 0


async def test_a_lane_of_more_slots_runs_that_many_at_once() -> None:
    admission = await shared(slots=2)
    order: list[str] = []
    tasks = queue_up(admission, ["a1", "a2", "a3", "b1", "b2", "b3"], order)
    await settle()
    assert order == ["a1", "a2", "b1", "b2"] and admission.waiting() == 2
    admission.leave("b", 0.01)
    await settle()
    assert order[-1] == "b3" and admission.waiting("a") == 1
    admission.leave("a", 0.01)
    await asyncio.gather(*tasks)
    assert order[-1] == "a3"


async def test_a_full_queue_refuses_only_its_own_tenant() -> None:
    admission = await shared(slots=1, queue=2)
    await admission.enter("a")
    waiters = [asyncio.create_task(admission.enter("a")) for _ in range(2)]
    await settle()
    with pytest.raises(RateLimitedError) as refused:
        await admission.enter("a")
    assert refused.value.retry_after_s > 0
    await admission.enter("b")  # another lane: at once
    assert admission.waiting("a") == 2 and admission.running_of("b") == 1
    for _ in range(3):
        admission.leave("a", 0.01)
        await settle()
    await asyncio.gather(*waiters)


async def test_a_waiter_at_its_deadline_is_refused_and_leaves_the_queue() -> None:
    admission = await shared(slots=1)
    await admission.enter("a")  # never given back
    with pytest.raises(RateLimitedError, match="deadline"):
        await admission.enter("a", timeout=0.01)
    assert admission.waiting() == 0 and admission.running == 1


async def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    admission = await shared(slots=1)
    order: list[str] = []
    await admission.enter("a")
    gone, stays = queue_up(admission, ["a1", "a2"], order)
    await settle()
    gone.cancel()
    admission.leave("a", 0.01)  # before the cancelled waiter has run its cleanup
    await settle()
    await stays
    assert gone.cancelled() and order == ["a2"]
    assert admission.running == 1 and admission.running_of("a") == 1
    assert admission.waiting() == 0


async def test_no_slots_means_no_limit() -> None:
    admission = await shared(slots=0, queue=1)
    for _ in range(100):
        await admission.enter("a")
    assert admission.waiting() == 0 and admission.running == 100
