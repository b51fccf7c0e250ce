"""Bounded work per request: the request deadline, cancellation when the client goes away,
and the per-key rate limit.

A request is made to wait on a session lock held by the test, so that it is provably still
running (a statement waiting in PostgreSQL) when the deadline or the disconnect comes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from gql_memory.api.rate_limit import RateLimiter
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import RateLimitedError
from gql_memory.keys import ApiKeyStore
from gql_memory.memory.working.sessions import lock_session
from gql_memory.server.app import create_app
from tests.conftest import start_live_server, truncate_all
from tests.live import GraphQLWS

ADD = 'mutation { addWorkingMemory(input: {content: "late", sessionId: "held"}) { addedId } }'
ITEMS = '{ workingMemory(sessionId: "held") { id } }'
WAITING = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
)


@asynccontextmanager
async def app_on(settings: Settings) -> AsyncIterator[tuple[Any, str]]:
    app = create_app(settings)
    server, task, base_url = await start_live_server(app)
    try:
        yield app, base_url
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def session_held(db: Database) -> AsyncIterator[None]:
    """Hold the write lock of session "held" (namespace default) until the block ends."""
    async with db.write() as conn:
        await lock_session(conn, "default", "held")
        yield


async def wait_until_nothing_waits(db: Database, seconds: float = 30.0) -> None:
    """Returns once no statement waits on the held lock (fails after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        async with db.read() as conn:
            if await conn.scalar(WAITING) == 0:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("a cancelled request's statement is still waiting in PostgreSQL")


async def wait_until_waiting(db: Database) -> None:
    for _ in range(200):
        async with db.read() as conn:
            if await conn.scalar(WAITING):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the request never reached the held lock")


async def test_a_request_past_its_deadline_is_cancelled_with_its_statement(
    settings: Settings, db: Database
) -> None:
    await truncate_all(db)
    timed = settings.with_overrides(request_timeout_s=1.0)
    async with app_on(timed) as (app, base_url), httpx.AsyncClient(base_url=base_url) as client:
        async with session_held(db):
            # the lock is never released while the request waits: only the deadline answers it
            # (the client's timeout, 30 s, is a hang guard)
            answer = (await client.post("/graphql", json={"query": ADD}, timeout=30)).json()
            assert answer["data"] is None
            error = answer["errors"][0]
            assert error["extensions"]["code"] == "TIMEOUT", error
            assert "deadline of 1 s" in error["message"]
            # the statement was cancelled in PostgreSQL while the lock is still held
            await wait_until_nothing_waits(db)
            assert app.state.db.engine.pool.checkedout() == 0
        # nothing of the cancelled add was kept, and the server serves on
        listed = (await client.post("/graphql", json={"query": ITEMS})).json()
        assert listed["data"] == {"workingMemory": []}, listed
        health = await client.get("/healthz")
        assert health.status_code == 200


async def test_a_client_that_goes_away_cancels_its_request(
    settings: Settings, db: Database
) -> None:
    await truncate_all(db)
    async with app_on(settings.with_overrides(request_timeout_s=0)) as (app, base_url):
        async with session_held(db):
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as impatient:
                request = asyncio.create_task(impatient.post("/graphql", json={"query": ADD}))
                await wait_until_waiting(db)
                request.cancel()  # the client gives up and closes its connection
                with pytest.raises(asyncio.CancelledError):
                    await request
            await wait_until_nothing_waits(db)
            for _ in range(100):  # the cancelled request returns its connection
                if app.state.db.engine.pool.checkedout() == 0:
                    break
                await asyncio.sleep(0.05)
            assert app.state.db.engine.pool.checkedout() == 0
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            listed = (await client.post("/graphql", json={"query": ITEMS})).json()
            assert listed["data"] == {"workingMemory": []}, listed


async def test_a_key_over_its_rate_is_told_when_to_retry(settings: Settings, db: Database) -> None:
    await truncate_all(db)
    keys = ApiKeyStore(db)
    busy = (await keys.create("busy", "read")).secret
    calm = (await keys.create("calm", "read")).secret
    limited = settings.with_overrides(auth="required", rate_limit_per_s=0.5, rate_limit_burst=3)
    async with app_on(limited) as (_, base_url), httpx.AsyncClient(base_url=base_url) as client:

        async def ask(key: str) -> httpx.Response:
            return await client.post(
                "/graphql",
                json={"query": "{ stats { workingMemory } }"},
                headers={"Authorization": f"Bearer {key}"},
            )

        for _ in range(3):  # the burst
            assert (await ask(busy)).status_code == 200
        refused = await ask(busy)
        assert refused.status_code == 429
        error = refused.json()["errors"][0]
        assert error["extensions"]["code"] == "RATE_LIMITED"
        assert 1000 <= error["extensions"]["retryAfterMs"] <= 2000
        assert refused.headers["Retry-After"] == "2"
        # another key is not affected
        assert (await ask(calm)).status_code == 200


async def test_operations_over_websocket_count_against_the_rate_too(
    settings: Settings, db: Database
) -> None:
    await truncate_all(db)
    key = (await ApiKeyStore(db).create("busy", "read")).secret
    limited = settings.with_overrides(auth="required", rate_limit_per_s=0.5, rate_limit_burst=2)
    async with (
        app_on(limited) as (_, base_url),
        httpx.AsyncClient(base_url=base_url) as client,
        GraphQLWS.connect(client, base_url, {"apiKey": key}) as ws,
    ):
        for _ in range(2):  # the burst
            await ws.subscribe("{ stats { workingMemory } }")
            assert await ws.next_data() == {"stats": {"workingMemory": 0}}
            assert (await ws.receive())["type"] == "complete"
        await ws.subscribe("{ stats { workingMemory } }")
        refused = await ws.receive()
        assert refused["type"] == "error", refused  # refused before execution
        [error] = refused["payload"]
        assert error["extensions"]["code"] == "RATE_LIMITED", refused
        assert error["extensions"]["retryAfterMs"] > 0


def test_the_rate_limiter_admits_a_burst_then_the_rate() -> None:
    now = [100.0]
    limiter = RateLimiter(rate=10, burst=5, clock=lambda: now[0])
    for _ in range(5):
        limiter.admit("k")
    with pytest.raises(RateLimitedError) as refused:
        limiter.admit("k")
    assert refused.value.retry_after_s == pytest.approx(0.1)
    now[0] += 0.1  # one interval later: exactly one more
    limiter.admit("k")
    with pytest.raises(RateLimitedError):
        limiter.admit("k")
    now[0] += 10  # idle: the whole burst again
    for _ in range(5):
        limiter.admit("k")
    RateLimiter(rate=0, burst=1).admit("k")  # 0: no limit
