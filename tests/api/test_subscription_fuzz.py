"""Random subscription documents and variables over both transports: the WebSocket
(graphql-transport-ws) and plain HTTP requests (GET and POST, which refuse subscriptions).
Never an internal error, never an uncoded error, and no subscription left open afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gql_memory.config import Settings
from tests.conftest import LiveServer, serving
from tests.graphql_fuzz import response_problems
from tests.live import GraphQLWS, wait_until_no_subscriptions

KINDS = [
    "ADDED", "EVICTED", "ARCHIVED", "DECAYED", "RESTORED", "ACCESSED", "CLEARED",
    "SESSION_FORGOTTEN", "DIALOGUE_STORED", "INSIGHT_ADDED", "NODE_ADDED", "RESYNC",
]  # fmt: skip
EVENT_FIELDS = ["kind", "sessionId", "ids", "itemId", "archivedIds", "reason", "occurredAt"]
NASTY = ["\x00", "\ud800", "\u202e", "'", '"', "\\", "{", "}", "$", "é", "🦜", " "]

nasty_text = st.one_of(
    st.text(max_size=20),
    st.lists(st.sampled_from(NASTY), min_size=1, max_size=6).map("".join),
    st.sampled_from(["", "default", "x" * 300]),
)
event_selection = st.lists(st.sampled_from([*EVENT_FIELDS, "nope"]), min_size=1, unique=True)


@st.composite
def subscription_documents(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A subscription (mostly well formed, sometimes not) and its variables."""
    shape = draw(st.sampled_from(["working", "events", "unknown field", "garbage", "two"]))
    fields = " ".join(draw(event_selection))
    if shape == "working":
        document = (
            "subscription W($s: String!) { workingMemoryChanged(sessionId: $s) "
            f"{{ event {{ {fields} }} items {{ id content }} }} }}"
        )
        variables: dict[str, Any] = {"s": draw(st.one_of(nasty_text, st.integers(), st.none()))}
    elif shape == "events":
        document = (
            f"subscription E($k: [MemoryEventKind!]) {{ memoryEvents(kinds: $k) {{ {fields} }} }}"
        )
        kinds = st.lists(st.one_of(st.sampled_from(KINDS), nasty_text), max_size=4)
        variables = {"k": draw(st.one_of(kinds, st.none(), nasty_text))}
    elif shape == "unknown field":
        document = f"subscription {{ {draw(st.from_regex(r'[a-z]{1,12}', fullmatch=True))} }}"
        variables = {}
    elif shape == "two":  # two operations and no operationName: an error, not the first one
        document = (
            "subscription A { memoryEvents { kind } } subscription B { memoryEvents { ids } }"
        )
        variables = {}
    else:
        document = draw(st.text(max_size=60))
        variables = draw(st.dictionaries(st.text(max_size=5), nasty_text, max_size=2))
    return document, variables


@pytest_asyncio.fixture(scope="module")
async def server(settings: Settings) -> AsyncIterator[LiveServer]:
    async with serving(settings) as live:
        yield live


def websocket_problems(message: dict[str, Any]) -> list[str]:
    kind = message.get("type")
    if kind == "error":
        problems = []
        for error in message.get("payload") or []:
            problems += response_problems(200, _json({"errors": [error]}))
        return problems
    if kind == "next":
        return response_problems(200, _json(message.get("payload")))
    if kind == "complete":
        return []
    return [f"unexpected message {message}"]


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=subscription_documents())
async def test_random_subscriptions_never_fail_internally(
    server: LiveServer, case: tuple[str, dict[str, Any]]
) -> None:
    document, variables = case
    problems: list[str] = []
    async with GraphQLWS.connect(server.client, server.base_url) as ws:
        operation = await ws.subscribe(document, variables)
        await ws.ws.send_json({"id": operation, "type": "complete"})
        # Messages are handled in order: once the pong is back, the server has answered the
        # subscribe (an error, or nothing while it waits for events) and the complete.
        await ws.ws.send_json({"type": "ping"})
        while (message := await ws.receive(timeout=10))["type"] != "pong":
            problems += websocket_problems(message)
    for method in ("POST", "GET"):
        if method == "POST":
            response = await server.client.post(
                "/graphql", json={"query": document, "variables": variables}
            )
        else:
            response = await server.client.get(
                "/graphql", params={"query": document, "variables": _json(variables)}
            )
        problems += [
            f"{method}: {p}" for p in response_problems(response.status_code, response.text)
        ]
    assert not problems, (document, variables, problems)


async def test_no_subscription_outlives_its_socket(server: LiveServer) -> None:
    """Runs after the random ones: every stream they opened has been torn down."""
    await wait_until_no_subscriptions(server.client, server.base_url, timeout=10)
