"""Abuse limits: each rejects an abusive request with a clear error and lets a normal one by."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.api.extensions.fragment_measure import FragmentMeasure
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import ServiceUnavailableError
from gql_memory.server.app import create_app
from tests.conftest import LiveServer, start_live_server, truncate_all
from tests.live import GraphQLWS

TIGHT = {
    "max_query_depth": 2,
    "max_query_tokens": 60,
    "max_aliases": 2,
    "max_body_bytes": 4096,
    "graphiql": False,
    "introspection": False,
}


@pytest_asyncio.fixture(scope="module")
async def tight_live(settings: Settings) -> AsyncIterator[LiveServer]:
    """A server with small limits and GraphiQL and introspection switched off."""
    server, task, base_url = await start_live_server(create_app(settings.with_overrides(**TIGHT)))
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        yield LiveServer(base_url=base_url, client=client)
    server.should_exit = True
    await task


@pytest_asyncio.fixture
async def tight(tight_live: LiveServer, db: Database) -> LiveServer:
    await truncate_all(db)
    return tight_live


async def rows(db: Database) -> int:
    async with db.read() as conn:
        return await conn.scalar(
            text(
                "SELECT (SELECT count(*) FROM working_memory) + (SELECT count(*) FROM raw_dialogue)"
            )
        )


# --- query shape --------------------------------------------------------------------------------


async def test_query_depth(tight: LiveServer) -> None:
    assert await tight.data("{ staleMemory { edges { cursor } pageInfo { hasNextPage } } }")
    error = await tight.error("{ staleMemory { edges { node { id } } } }")
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"] == "'anonymous' exceeds maximum operation depth of 2"
    via_fragment = (
        "query Deep { ...F } fragment F on Query { staleMemory { edges { ...N } } } "
        "fragment N on StaleMemoryItemEdge { node { id } }"
    )
    error = await tight.error(via_fragment)
    assert error["message"] == "'Deep' exceeds maximum operation depth of 2"


async def test_fragment_explosion_is_measured_in_linear_time(
    api: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """strawberry's own limiters walk 2^30 paths here (hours of CPU for a 1 KB document); ours
    measure each selection set once: a few visits per fragment, counted."""
    fragments = " ".join(f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(30))
    query = f"query {{ ...F0 }} {fragments} fragment F30 on Query {{ stats {{ sessions }} }}"
    visits = 0
    measure = FragmentMeasure.selection_set

    def counted(self: FragmentMeasure, selection_set: Any) -> int:
        nonlocal visits
        visits += 1
        return measure(self, selection_set)

    monkeypatch.setattr(FragmentMeasure, "selection_set", counted)
    body = await api.graphql(query)
    assert body["data"] == {"stats": {"sessions": 0}}
    # 31 fragments: each limit (depth, aliases) visits each once, where every path is 2^30
    assert 31 <= visits <= 4 * 31
    aliased = query.replace("stats { sessions }", "a: stats { sessions }")
    error = (await api.graphql(aliased))["errors"][0]
    assert error["message"] == f"{2**30} aliases found. Allowed: 30"


@pytest.mark.parametrize(
    "query", ["{ ...Missing }", "{ ... on Query { ...Missing } }", "{ stats { ...Nope } }"]
)
async def test_unknown_fragments_are_bad_input_not_internal(api: LiveServer, query: str) -> None:
    body = await api.graphql(query)
    assert {e["extensions"]["code"] for e in body["errors"]} == {"BAD_USER_INPUT"}


async def test_validation_cache_never_lets_a_limit_slip(api: LiveServer, tight: LiveServer) -> None:
    """Documents found valid are remembered per rule set: a tighter limit still applies."""
    deep = "{ staleMemory { edges { node { id } } } }"
    for _ in range(3):
        assert await api.data(deep)  # valid under the default limits (and remembered)
        error = await tight.error(deep)
        assert "exceeds maximum operation depth of 2" in error["message"]
    for _ in range(2):  # refusals are recomputed every time, never cached as valid
        assert (await api.error("{ nonsense }"))["extensions"]["code"] == "BAD_USER_INPUT"


async def test_token_count(tight: LiveServer) -> None:
    assert await tight.data("{ stats { sessions workingMemory } }")
    error = await tight.error("{ " + " ".join(["stats { sessions }"] * 20) + " }")
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "more than 60 tokens" in error["message"]


async def test_alias_count(tight: LiveServer) -> None:
    assert await tight.data("{ a: stats { sessions } b: stats { sessions } }")
    error = await tight.error("{ a: stats { sessions } b: stats { sessions } c: __typename }")
    assert (error["message"], error["extensions"]["code"]) == (
        "3 aliases found. Allowed: 2",
        "BAD_USER_INPUT",
    )


async def test_page_size_cap(api: LiveServer) -> None:
    assert await api.data("{ rawDialogue(first: 1000) { edges { cursor } } }")
    error = await api.error("{ rawDialogue(first: 1001) { edges { cursor } } }")
    assert error["message"] == "first must be between 1 and 1000"


# --- HTTP ---------------------------------------------------------------------------------------


async def test_body_size(tight: LiveServer, db: Database) -> None:
    small = 'mutation { addWorkingMemory(input: {content: "ok"}) { addedId } }'
    assert await tight.data(small)
    response = await tight.client.post(
        "/graphql",
        json={"query": small.replace('"ok"', '"' + "x" * 5000 + '"')},
    )
    assert response.status_code == 413
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "4096 bytes" in error["message"]
    assert await rows(db) == 1


async def test_mutations_over_get_are_refused(api: LiveServer, db: Database) -> None:
    mutation = 'mutation { addWorkingMemory(input: {content: "via GET"}) { addedId } }'
    response = await api.client.get("/graphql", params={"query": mutation})
    assert response.status_code in (400, 405)
    assert response.headers["content-type"].startswith("application/json")
    assert "not allowed" in response.json()["errors"][0]["message"]
    assert await rows(db) == 0
    ok = await api.client.get("/graphql", params={"query": "{ stats { sessions } }"})
    assert ok.status_code == 200 and ok.json()["data"]["stats"]["sessions"] == 0


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", '{"query": "mutation { clearWorkingMemory }"}'),
        ("application/x-www-form-urlencoded", "query=mutation%20%7B%20clearWorkingMemory%20%7D"),
        ("multipart/form-data; boundary=x", '--x\r\nContent-Disposition: form-data; name="q"\r\n'),
        ("application/graphql", "mutation { clearWorkingMemory }"),
        ("", '{"query": "mutation { clearWorkingMemory }"}'),
    ],
)
async def test_post_needs_a_json_content_type(
    api: LiveServer, db: Database, content_type: str, body: str
) -> None:
    await api.data('mutation { addWorkingMemory(input: {content: "keep me"}) { addedId } }')
    response = await api.client.post(
        "/graphql", content=body.encode(), headers={"content-type": content_type}
    )
    assert response.status_code == 415
    error = response.json()["errors"][0]
    assert "application/json" in error["message"] and error["extensions"]["code"]
    assert await rows(db) == 1


async def test_json_with_a_charset_is_fine(api: LiveServer) -> None:
    response = await api.client.post(
        "/graphql",
        content=b'{"query": "{ stats { sessions } }"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        b'"just a string"',
        b"42",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"query": "{ stats { sessions } }", "variables": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b"\xff\xfe not utf-8",
        b'{"query": "{ stats { sessions } }", "operationName": 7}',
        b'{"query": 7}',
        b"[" + b",".join([b'{"query": "{ stats { sessions } }"}'] * 11) + b"]",  # > max batch
        b"[]",
        b"{}",
    ],
)
async def test_malformed_bodies_are_client_errors(api: LiveServer, body: bytes) -> None:
    response = await api.client.post(
        "/graphql", content=body, headers={"content-type": "application/json"}
    )
    assert 400 <= response.status_code < 500 or "errors" in response.json()
    assert response.headers["content-type"].startswith("application/json")
    codes = {e["extensions"]["code"] for e in response.json()["errors"]}
    assert "INTERNAL_SERVER_ERROR" not in codes


# --- GraphiQL and introspection -----------------------------------------------------------------


async def test_graphiql_and_introspection_can_be_switched_off(
    tight: LiveServer, api: LiveServer
) -> None:
    html = {"accept": "text/html"}
    assert (await api.client.get("/graphql", headers=html)).status_code == 200
    assert (await tight.client.get("/graphql", headers=html)).status_code == 404
    introspect = "{ __schema { queryType { name } } }"
    assert await api.data(introspect)
    errors = (await tight.graphql(introspect))["errors"]
    assert {e["extensions"]["code"] for e in errors} == {"BAD_USER_INPUT"}
    assert "introspection has been disabled" in errors[0]["message"]
    suggestion = await tight.error("{ workingMemor { id } }")
    assert "Did you mean" not in suggestion["message"]


# --- PostgreSQL statement timeout ---------------------------------------------------------------


async def test_statement_timeout_is_set_on_every_connection(settings: Settings) -> None:
    quick = settings.with_overrides(statement_timeout_ms=300)
    db = Database.from_url(quick.database_url or "", quick)
    try:
        async with db.read() as conn:
            assert await conn.scalar(text("SHOW statement_timeout")) == "300ms"
        with pytest.raises(ServiceUnavailableError) as refused:
            async with db.read() as conn:
                await conn.execute(text("SELECT pg_sleep(5)"))
        # cancelled by the statement timeout (57014 query_canceled), not a lost connection
        assert refused.value.__cause__.orig.sqlstate == "57014"  # type: ignore[union-attr]
        async with db.read() as conn:  # the pool is healthy afterwards
            assert await conn.scalar(text("SELECT 1")) == 1
    finally:
        await db.dispose()


BIG_LITERAL = "x" * 300_000  # over the 256 KiB document limit


async def test_a_huge_document_is_refused_before_it_is_parsed(api: LiveServer) -> None:
    """graphql-core lexes a document in Python on the event loop: large values must come as
    variables (JSON, decoded in C), the document itself stays under the limit."""
    inline = f'mutation {{ addWorkingMemory(input: {{content: "{BIG_LITERAL}"}}) {{ addedId }} }}'
    error = await api.error(inline)
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "send large values as variables" in error["message"]
    assert "GQL_MEMORY_MAX_DOCUMENT_CHARS" in error["message"]
    as_variable = await api.data(
        "mutation($c: String!) { addWorkingMemory(input: {content: $c}) { addedId } }",
        {"c": BIG_LITERAL},
    )
    assert as_variable["addWorkingMemory"]["addedId"]


async def test_a_huge_document_over_websocket_is_refused_too(api: LiveServer) -> None:
    async with GraphQLWS.connect(api.client, api.base_url) as ws:
        huge = f'subscription {{ memoryEvents(sessionId: "{BIG_LITERAL}") {{ kind }} }}'
        await ws.subscribe(huge)
        message = await ws.receive()
        assert message["type"] == "error", message
        assert "send large values as variables" in json.dumps(message["payload"])
