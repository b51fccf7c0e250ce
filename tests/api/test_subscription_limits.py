"""Subscriptions are bounded per WebSocket connection and per API key (issue 11): a client
cannot make every write fan out to thousands of its own streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio

from gql_memory.config import Settings
from tests.conftest import LiveServer, serving
from tests.live import GraphQLWS, wait_for_subscriptions, wait_until_no_subscriptions

PER_CONNECTION = 3
PER_KEY = 4
STREAM = "subscription { memoryEvents { kind } }"


@pytest_asyncio.fixture(scope="module")
async def server(settings: Settings) -> AsyncIterator[LiveServer]:
    limited = settings.with_overrides(
        max_subscriptions_per_connection=PER_CONNECTION, max_subscriptions_per_key=PER_KEY
    )
    async with serving(limited) as live:
        yield live


async def test_subscriptions_are_capped_per_connection_and_per_key(server: LiveServer) -> None:
    client, url = server.client, server.base_url
    async with GraphQLWS.connect(client, url) as first, GraphQLWS.connect(client, url) as second:
        ids = [await first.subscribe(STREAM) for _ in range(PER_CONNECTION)]
        await wait_for_subscriptions(client, url, "memoryEvents", PER_CONNECTION)
        await first.subscribe(STREAM)
        error = refusal(await first.receive())
        assert error["extensions"]["code"] == "BAD_USER_INPUT"
        assert "per connection" in error["message"]

        await second.subscribe(STREAM)  # the key's fourth
        await wait_for_subscriptions(client, url, "memoryEvents", PER_KEY)
        await second.subscribe(STREAM)
        error = refusal(await second.receive())
        assert "per API key" in error["message"]

        # completing one frees its slot for the key
        await first.ws.send_json({"id": ids[0], "type": "complete"})
        await wait_until_no_more_than(client, url, PER_KEY - 1)
        await second.subscribe(STREAM)
        await wait_for_subscriptions(client, url, "memoryEvents", PER_KEY)
    await wait_until_no_subscriptions(client, url)


def refusal(message: dict[str, Any]) -> dict[str, Any]:
    """The one error of a refused subscription (a `next` with errors, then `complete`)."""
    assert message["type"] == "next", message
    [error] = message["payload"]["errors"]
    return error


async def wait_until_no_more_than(client: httpx.AsyncClient, url: str, count: int) -> None:
    import asyncio

    from tests.live import active_subscriptions

    async with asyncio.timeout(30):
        while await active_subscriptions(client, url, "memoryEvents") > count:
            await asyncio.sleep(0.01)
