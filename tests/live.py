"""Test helpers for live events: a raw LISTEN tap, a graphql-transport-ws client, readiness."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
from httpx_ws import AsyncWebSocketSession, aconnect_ws

from gql_memory.config import EVENTS_CHANNEL
from gql_memory.live.listener import asyncpg_dsn
from gql_memory.memory.events import MemoryEvent

MARKER = "test-marker"


class EventTap:
    """LISTENs on the events channel like a server would, and hands back what arrived."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.payloads: asyncio.Queue[str] = asyncio.Queue()

    @classmethod
    @asynccontextmanager
    async def open(cls, database_url: str) -> AsyncIterator[EventTap]:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        tap = cls(conn)
        await conn.add_listener(EVENTS_CHANNEL, lambda *args: tap.payloads.put_nowait(args[3]))
        try:
            yield tap
        finally:
            await conn.close()

    async def drain(self, timeout: float = 30.0) -> list[MemoryEvent]:
        """Every event committed before now: NOTIFY a marker, collect until it comes back.

        PostgreSQL delivers notifications in commit order, so the marker arrives last.
        """
        await self.conn.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, MARKER)
        events = []
        async with asyncio.timeout(timeout):
            while (payload := await self.payloads.get()) != MARKER:
                events.append(MemoryEvent.from_payload(payload))
        return events


class GraphQLWS:
    """A minimal graphql-transport-ws client (the protocol of the `graphql-ws` JS library)."""

    def __init__(self, ws: AsyncWebSocketSession) -> None:
        self.ws = ws
        self._next_id = 0

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, client: httpx.AsyncClient, base_url: str, payload: dict[str, Any] | None = None
    ) -> AsyncIterator[GraphQLWS]:
        """Connected and acknowledged; ``payload`` is the connection_init payload."""
        url = base_url.replace("http://", "ws://") + "/graphql"
        async with aconnect_ws(url, client, subprotocols=["graphql-transport-ws"]) as ws:
            await ws.send_json({"type": "connection_init", "payload": payload or {}})
            ack = await ws.receive_json(timeout=30)
            assert ack["type"] == "connection_ack", ack
            yield cls(ws)

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        self._next_id += 1
        operation_id = str(self._next_id)
        await self.ws.send_json(
            {
                "id": operation_id,
                "type": "subscribe",
                "payload": {"query": query, "variables": variables or {}},
            }
        )
        return operation_id

    async def receive(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next protocol message (pings are answered and skipped)."""
        while True:
            message = await self.ws.receive_json(timeout=timeout)
            if message["type"] == "ping":
                await self.ws.send_json({"type": "pong"})
                continue
            return message

    async def next_data(self, timeout: float = 30.0) -> dict[str, Any]:
        """The data of the next `next` message; fails on errors or completion."""
        message = await self.receive(timeout)
        assert message["type"] == "next", message
        assert "errors" not in message["payload"], message["payload"]
        return message["payload"]["data"]


async def active_subscriptions(client: httpx.AsyncClient, base_url: str, stream: str) -> float:
    """gql_memory_subscriptions_active{stream=...} as the server's /metrics reports it."""
    text = (await client.get(f"{base_url}/metrics")).text
    match = re.search(
        rf'^gql_memory_subscriptions_active\{{stream="{stream}"\}} (\S+)$', text, re.M
    )
    return float(match.group(1)) if match else 0.0


async def wait_for_subscriptions(
    client: httpx.AsyncClient, base_url: str, stream: str, count: int = 1, timeout: float = 30.0
) -> None:
    """Until the server has registered ``count`` subscriptions (writes before would be missed)."""
    deadline = time.monotonic() + timeout
    while await active_subscriptions(client, base_url, stream) < count:
        assert time.monotonic() < deadline, f"no {stream} subscription registered in {timeout}s"
        await asyncio.sleep(0.01)


async def wait_until_no_subscriptions(
    client: httpx.AsyncClient, base_url: str, timeout: float = 30.0
) -> None:
    """Until earlier tests' subscriptions have been torn down (they end asynchronously)."""
    deadline = time.monotonic() + timeout
    for stream in ("memoryEvents", "workingMemoryChanged"):
        while await active_subscriptions(client, base_url, stream) > 0:
            assert time.monotonic() < deadline, f"{stream} subscriptions linger"
            await asyncio.sleep(0.01)
