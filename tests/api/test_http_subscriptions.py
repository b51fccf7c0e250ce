"""Subscriptions over HTTP streams: graphql-sse (Server-Sent Events, distinct connections) and
Apollo's multipart subscriptions, with the WebSocket's authentication, scopes, revocation and
limits; a client that goes away frees its subscription."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.conftest import LiveServer, serving, truncate_all
from tests.node_clients import start_script

WATCH = (
    "subscription Watch($s: String!) { workingMemoryChanged(sessionId: $s) "
    "{ event { kind itemId } items { content } } }"
)
ADD = (
    "mutation Add($s: String!, $c: String!) { addWorkingMemory(input: {content: $c, "
    "sessionId: $s}) { addedId } }"
)
SSE = {"Accept": "text/event-stream"}
MULTIPART = {"Accept": 'multipart/mixed;boundary="graphql";subscriptionSpec="1.0",application/json'}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """(event, decoded data) of a text/event-stream, comments (heartbeats) skipped."""
    event, data = None, []
    async for line in response.aiter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if event is not None:
                yield event, json.loads("".join(data)) if "".join(data) else None
            event, data = None, []
        elif line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())


async def multipart_payloads(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON parts of a multipart/mixed subscription response, heartbeats ({}) skipped."""
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        *parts, buffer = buffer.split("\r\n--graphql")
        for part in parts:
            _, _, body = part.partition("\r\n\r\n")
            if body.strip() and (decoded := json.loads(body)):
                yield decoded


@asynccontextmanager
async def stream(
    api: LiveServer, document: str, variables: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[httpx.Response]:
    async with api.client.stream(
        "POST", "/graphql", json={"query": document, "variables": variables}, headers=headers
    ) as response:
        yield response


async def add_until(api: LiveServer, key: str, session: str, arrived: asyncio.Task[Any]) -> None:
    """Adds to the session until ``arrived`` is done (the stream may take a moment to listen)."""
    for i in range(100):
        body = await api.with_key(key).data(ADD, {"s": session, "c": f"item {i}"})
        assert body["addWorkingMemory"]["addedId"]
        try:
            await asyncio.wait_for(asyncio.shield(arrived), 0.2)
            return
        except TimeoutError:
            continue
    raise AssertionError("the stream never delivered an event")


async def test_graphql_sse_client_receives_events_and_stops_after_revocation(
    secure_api: LiveServer, key_store: ApiKeyStore, node_clients: Path
) -> None:
    """The real graphql-sse client (Node): an event within 1 s of an HTTP add; after its key
    is revoked, nothing written afterwards arrives and the stream ends."""
    reader = await key_store.create("sse", "read")
    writer = await key_store.create("sse", "write")
    process = await start_script(
        node_clients,
        "sse_subscriber.mjs",
        f"{secure_api.base_url}/graphql",
        reader.secret,
        writer.secret,
        "chat",
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        live = json.loads(await asyncio.wait_for(process.stdout.readline(), 60) or b"{}")
        assert live.get("live"), live
        assert live["latencyMs"] is not None and live["latencyMs"] < 1000, live
        await key_store.revoke(reader.key.id)
        process.stdin.write(b"revoked\n")
        await process.stdin.drain()
        final = json.loads(await asyncio.wait_for(process.stdout.readline(), 60) or b"{}")
        assert final.get("afterRevocation") == [], final
        assert final["completed"] or final["errors"], final
        assert all(event.get("data") is None for event in final["lastEvents"]), final
        codes = [e["extensions"]["code"] for v in final["lastEvents"] for e in v.get("errors", [])]
        assert codes in ([], ["UNAUTHENTICATED"]), final
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_sse_events_are_next_then_complete(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    """graphql-sse distinct connections mode: `event: next` with an execution result, and a
    query over the stream ends with `event: complete`."""
    key = (await key_store.create("sse-raw", "read,write")).secret
    async with stream(secure_api, WATCH, {"s": "raw"}, {**SSE, **bearer(key)}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
        first = asyncio.ensure_future(anext(events))
        await add_until(secure_api, key, "raw", first)
        event, data = first.result()
        assert event == "next"
        change = data["data"]["workingMemoryChanged"]
        assert change["event"]["kind"] == "ADDED" and change["items"]
    async with stream(secure_api, "{ stats { workingMemory } }", {}, {**SSE, **bearer(key)}) as r:
        received = [e async for e in sse_events(r)]
    assert received[0][0] == "next" and received[0][1]["data"]["stats"]["workingMemory"] >= 1
    assert received[-1][0] == "complete"


async def test_multipart_subscription_over_plain_http(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = (await key_store.create("multipart", "read,write")).secret
    async with stream(secure_api, WATCH, {"s": "mp"}, {**MULTIPART, **bearer(key)}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("multipart/mixed")
        assert "subscriptionSpec=1.0" in response.headers["content-type"]
        payloads = multipart_payloads(response)
        first = asyncio.ensure_future(anext(payloads))
        await add_until(secure_api, key, "mp", first)
        change = first.result()["payload"]["data"]["workingMemoryChanged"]
        assert change["event"]["kind"] == "ADDED" and change["items"][0]["content"]


async def test_a_stream_without_a_valid_key_is_refused_with_401(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    for headers in (SSE, MULTIPART, {**SSE, **bearer("gqlm_" + "x" * 40)}):
        async with stream(secure_api, WATCH, {"s": "x"}, headers) as response:
            body = json.loads(await response.aread())
        assert response.status_code == 401, body
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_a_stream_is_held_to_the_keys_scopes(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    write_only = (await key_store.create("sse-scope", "write")).secret
    async with stream(secure_api, WATCH, {"s": "x"}, {**SSE, **bearer(write_only)}) as response:
        received = [e async for e in sse_events(response)]
    assert received[0][0] == "next"
    assert received[0][1]["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert received[-1][0] == "complete"


async def test_a_subscription_as_a_plain_http_request_is_refused(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = (await key_store.create("plain", "read")).secret
    error = await secure_api.with_key(key).error(WATCH, {"s": "x"})
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "text/event-stream" in error["message"]


@pytest_asyncio.fixture
async def one_per_key(secure_settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    await truncate_all(db)
    async with serving(secure_settings.with_overrides(max_subscriptions_per_key=1)) as server:
        yield server


async def first_event(api: LiveServer, key: str, headers: dict[str, str]) -> tuple[str, Any]:
    async with stream(api, WATCH, {"s": "slots"}, {**headers, **bearer(key)}) as response:
        events = sse_events(response)
        first = asyncio.ensure_future(anext(events))
        await add_until(api, key, "slots", first)
        return first.result()


async def test_a_client_that_disconnects_frees_its_subscription(
    one_per_key: LiveServer, key_store: ApiKeyStore
) -> None:
    key = (await key_store.create("slots", "read,write")).secret
    async with stream(one_per_key, WATCH, {"s": "slots"}, {**SSE, **bearer(key)}) as response:
        events = sse_events(response)
        first = asyncio.ensure_future(anext(events))
        await add_until(one_per_key, key, "slots", first)
        assert first.result()[1]["data"]  # the key's one slot is taken...
        event, data = await first_event(one_per_key, key, SSE)
        assert "subscriptions" in data["errors"][0]["message"]  # ...so another is refused
    # the client went away: its slot comes back (the server notices the disconnect)
    for _ in range(100):
        event, data = await first_event(one_per_key, key, SSE)
        if data.get("data"):
            break
        await asyncio.sleep(0.05)
    assert data.get("data"), data
