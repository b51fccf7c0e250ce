"""Subscriptions over a real WebSocket (graphql-transport-ws), fed by LISTEN/NOTIFY."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import httpx
import pytest_asyncio

from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.server.app import create_app
from tests.api.test_readonly import snapshot
from tests.conftest import LiveServer, start_live_server, truncate_all
from tests.live import GraphQLWS, wait_for_subscriptions, wait_until_no_subscriptions

QUEUE_SIZE = 8
WORKING_MEMORY_CHANGED = """
subscription Watch($session: String!) {
  workingMemoryChanged(sessionId: $session) {
    event { kind sessionId itemId ids archivedIds reason occurredAt }
    items { id content }
  }
}
"""
MEMORY_EVENTS = "subscription { memoryEvents { kind sessionId itemId ids } }"
ADD = """
mutation($input: WorkingMemoryInput!) {
  addWorkingMemory(input: $input) { addedId evictedId archivedId }
}
"""


@pytest_asyncio.fixture(scope="module")
async def server(settings: Settings) -> AsyncIterator[LiveServer]:
    app = create_app(settings.with_overrides(subscriber_queue_size=QUEUE_SIZE))
    uvicorn_server, task, base_url = await start_live_server(app)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        yield LiveServer(base_url=base_url, client=client)
    uvicorn_server.should_exit = True
    await task


@pytest_asyncio.fixture
async def api(server: LiveServer, db: Database) -> LiveServer:
    await truncate_all(db)
    await wait_until_no_subscriptions(server.client, server.base_url)
    return server


def connect(api: LiveServer) -> AbstractAsyncContextManager[GraphQLWS]:
    """A WebSocket to the server (opened in the test's own task: anyio cancel scopes)."""
    return GraphQLWS.connect(api.client, api.base_url)


async def add(api: LiveServer, content: str, session: str = "default") -> dict[str, str]:
    variables = {"input": {"content": content, "sessionId": session}}
    return (await api.data(ADD, variables))["addWorkingMemory"]


async def test_working_memory_changed_delivers_changes_with_the_current_items(
    api: LiveServer,
) -> None:
    async with connect(api) as ws:
        await ws.subscribe(WORKING_MEMORY_CHANGED, {"session": "chat"})
        await wait_for_subscriptions(api.client, api.base_url, "workingMemoryChanged")
        await add(api, "elsewhere", session="other")  # another session: not delivered
        first = await add(api, "User prefers dark mode", session="chat")
        change = (await ws.next_data())["workingMemoryChanged"]
        assert change["event"]["kind"] == "ADDED"
        assert change["event"]["sessionId"] == "chat"
        assert change["event"]["itemId"] == first["addedId"]
        assert change["items"] == [{"id": first["addedId"], "content": "User prefers dark mode"}]

        await api.data(
            "mutation($id: ID!) { archiveWorkingMemory(id: $id) { id } }", {"id": first["addedId"]}
        )
        archived = (await ws.next_data())["workingMemoryChanged"]
        assert archived["event"]["kind"] == "ARCHIVED"
        assert archived["event"]["reason"] == "MANUAL_ARCHIVE"
        assert archived["event"]["ids"] == [first["addedId"]] and archived["items"] == []


async def test_memory_events_streams_the_namespace_and_filters_by_kind(api: LiveServer) -> None:
    async with connect(api) as ws:
        everything = await ws.subscribe(MEMORY_EVENTS)
        semantic = await ws.subscribe(
            "subscription { memoryEvents(kinds: [INSIGHT_ADDED, EPISODE_STORED]) { kind itemId } }"
        )
        await wait_for_subscriptions(api.client, api.base_url, "memoryEvents", 2)
        await add(api, "a fact")
        insight = await api.data('mutation { addInsight(input: {content: "an insight"}) { id } }')
        episode = await api.data(
            'mutation { storeEpisode(input: {query: "q", reward: 1, reflection: "r"}) { id } }'
        )
        received: dict[str, list[tuple[str, str]]] = {everything: [], semantic: []}
        for _ in range(5):
            message = await ws.receive()
            assert message["type"] == "next", message
            event = message["payload"]["data"]["memoryEvents"]
            received[message["id"]].append((event["kind"], event["itemId"]))
        assert [kind for kind, _ in received[everything]] == [
            "ADDED",
            "INSIGHT_ADDED",
            "EPISODE_STORED",
        ]
        assert received[semantic] == [
            ("INSIGHT_ADDED", insight["addInsight"]["id"]),
            ("EPISODE_STORED", episode["storeEpisode"]["id"]),
        ]


async def test_a_subscriber_never_sees_another_namespace(
    api: LiveServer, db: Database, settings: Settings
) -> None:
    async with connect(api) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(api.client, api.base_url, "memoryEvents")
        tenant_b = Memory(db, settings, "tenant-b")
        await tenant_b.working.add("tenant B's secret")
        await tenant_b.insights.add("tenant B's insight")
        mine = await add(api, "mine")  # committed after B's writes, so delivered after them
        event = (await ws.next_data())["memoryEvents"]
        assert (event["kind"], event["itemId"]) == ("ADDED", mine["addedId"])


async def test_a_rolled_back_write_is_never_delivered(
    api: LiveServer, db: Database, settings: Settings
) -> None:
    async with connect(api) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(api.client, api.base_url, "memoryEvents")
        memory = Memory(db, settings)
        try:
            async with db.write() as conn:
                await memory.working.add_in(conn, content="rolled back")
                raise RuntimeError("abort")
        except RuntimeError:
            pass
        committed = await add(api, "committed")
        event = (await ws.next_data())["memoryEvents"]
        assert event["itemId"] == committed["addedId"]


async def test_a_subscriber_that_falls_behind_is_closed_with_service_unavailable(
    api: LiveServer, db: Database
) -> None:
    async with connect(api) as ws:
        await ws.subscribe(MEMORY_EVENTS)
        await wait_for_subscriptions(api.client, api.base_url, "memoryEvents")
        burst = [MemoryEvent(EventKind.ADDED, "default", "default", (i,)) for i in range(200)]
        async with db.write() as conn:  # 200 notifications arrive at once, far over the queue
            await publish(conn, *burst)
        delivered = 0
        while (message := await ws.receive())["type"] == "next" and "errors" not in message[
            "payload"
        ]:
            delivered += 1
        assert delivered < len(burst)
        [error] = message["payload"]["errors"]
        assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        assert f"fell more than {QUEUE_SIZE} events behind" in error["message"]
        assert "Resubscribe" in error["message"]
        assert (await ws.receive())["type"] == "complete"
        metrics = (await api.client.get("/metrics")).text
        assert 'gql_memory_subscription_overflows_total{stream="memoryEvents"} 1.0' in metrics


async def test_an_invalid_session_is_bad_user_input(api: LiveServer) -> None:
    async with connect(api) as ws:
        await ws.subscribe(WORKING_MEMORY_CHANGED, {"session": " "})
        message = await ws.receive()
        errors = message["payload"] if message["type"] == "error" else message["payload"]["errors"]
        assert errors[0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_subscriptions_never_write(api: LiveServer, db: Database) -> None:
    async with connect(api) as ws:
        added = await add(api, "seed", session="chat")
        await ws.subscribe(WORKING_MEMORY_CHANGED, {"session": "chat"})
        await wait_for_subscriptions(api.client, api.base_url, "workingMemoryChanged")
        before = await snapshot(db)
        async with db.write() as conn:  # an event without a write: only the subscription acts
            await publish(conn, MemoryEvent(EventKind.ACCESSED, "default", "chat", (1,)))
        change = (await ws.next_data())["workingMemoryChanged"]
        assert change["items"] == [{"id": added["addedId"], "content": "seed"}]
        assert await snapshot(db) == before


async def test_with_live_events_off_subscriptions_are_service_unavailable(
    settings: Settings,
) -> None:
    app = create_app(settings.with_overrides(live_events=False))
    uvicorn_server, task, base_url = await start_live_server(app)
    try:
        async with (
            httpx.AsyncClient(base_url=base_url, timeout=30) as client,
            GraphQLWS.connect(client, base_url) as ws,
        ):
            await ws.subscribe(MEMORY_EVENTS)
            message = await ws.receive()
        [error] = message["payload"]["errors"]
        assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE"
        assert "GQL_MEMORY_LIVE_EVENTS" in error["message"]
    finally:
        uvicorn_server.should_exit = True
        await task


def test_subscription_names_are_the_contract() -> None:
    schema = build_schema()._schema
    assert schema.subscription_type is not None
    assert {"workingMemoryChanged", "memoryEvents"} <= set(schema.subscription_type.fields)
    assert {"MemoryEvent", "MemoryEventKind", "WorkingMemoryChange"} <= set(schema.type_map)
    session = schema.subscription_type.fields["workingMemoryChanged"].args["sessionId"]
    assert session.default_value == "default"
