"""The LISTEN connection: survives a killed backend and junk payloads, tells subscribers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import EVENTS_CHANNEL, LISTENER_APPLICATION_NAME, Settings
from gql_memory.db import Database
from gql_memory.live.hub import EventHub
from gql_memory.live.listener import EventListener
from gql_memory.memory.events import EventKind
from gql_memory.server.app import create_app
from tests.conftest import LiveServer, start_live_server, truncate_all
from tests.live import GraphQLWS, wait_for_subscriptions

MEMORY_EVENTS = "subscription { memoryEvents { kind itemId } }"
ADD = 'mutation { addWorkingMemory(input: {content: "after"}) { addedId } }'


@pytest_asyncio.fixture(scope="module")
async def server(settings: Settings) -> AsyncIterator[LiveServer]:
    fast = settings.with_overrides(listener_reconnect_min_s=0.05, listener_health_check_s=0.5)
    uvicorn_server, task, base_url = await start_live_server(create_app(fast))
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield LiveServer(base_url=base_url, client=client)
    uvicorn_server.should_exit = True
    await task


async def kill_listener_backends(db: Database) -> int:
    """Terminate the server's LISTEN connection from the database side (like a failover)."""
    async with db.write() as conn:
        killed = await conn.scalar(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = :name AND datname = current_database()"
            ),
            {"name": LISTENER_APPLICATION_NAME},
        )
    return int(killed or 0)


async def metric(server: LiveServer, name: str) -> float:
    for line in (await server.client.get("/metrics")).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_the_listener_reconnects_and_tells_subscribers_to_resync(
    server: LiveServer, db: Database
) -> None:
    await truncate_all(db)
    async with GraphQLWS.connect(server.client, server.base_url) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(server.client, server.base_url, "memoryEvents")
        assert await kill_listener_backends(db) == 1
        resync = (await ws.next_data())["memoryEvents"]
        assert resync == {"kind": "RESYNC", "itemId": None}
        added = (await server.data(ADD))["addWorkingMemory"]
        event = (await ws.next_data())["memoryEvents"]
        assert event == {"kind": "ADDED", "itemId": added["addedId"]}
    assert await metric(server, "gql_memory_event_listener_reconnects_total") == 1
    assert await metric(server, "gql_memory_event_listener_connected") == 1


async def test_junk_on_the_channel_is_ignored(server: LiveServer, db: Database) -> None:
    await truncate_all(db)
    async with GraphQLWS.connect(server.client, server.base_url) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(server.client, server.base_url, "memoryEvents")
        async with db.write() as conn:
            for junk in ("not json", '{"v": 1}', '{"v": 1, "k": "ADDED", "ns": "default"}'):
                await conn.execute(
                    text("SELECT pg_notify(:c, :p)"), {"c": EVENTS_CHANNEL, "p": junk}
                )
        added = (await server.data(ADD))["addWorkingMemory"]
        event = (await asyncio.wait_for(ws.next_data(), 30))["memoryEvents"]
        assert event == {"kind": "ADDED", "itemId": added["addedId"]}


class DeadLink:
    """A connection whose socket looks open but lets nothing through (no FIN, no RST)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def execute(self, *_: object) -> None:
        raise ConnectionResetError("no route to host")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


async def test_a_link_that_fails_its_probe_is_replaced(
    database_url: str, settings: Settings
) -> None:
    fast = settings.with_overrides(listener_reconnect_min_s=0.01, listener_health_check_s=0.05)
    hub = EventHub(queue_size=10)
    listener = EventListener(database_url, hub, fast)
    await listener.start()
    try:
        with hub.subscribe("default") as subscriber:
            old = listener._conn
            listener._conn = DeadLink(old)
            event = await asyncio.wait_for(anext(subscriber), 30)
            assert event.kind is EventKind.RESYNC
            assert listener._conn is not old and old.is_closed()
    finally:
        await listener.stop()
