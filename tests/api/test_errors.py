"""Errors carry extensions.code; internals are masked and carry a request id."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text

from gql_memory.db import Database
from tests.conftest import LiveServer


@pytest.mark.parametrize(
    ("importance", "message"),
    [(1.5, "Importance must be <= 1.0"), (-0.5, "Importance must be >= 0.0")],
)
async def test_invalid_importance_is_bad_user_input(
    api: LiveServer, importance: float, message: str
) -> None:
    error = await api.error(
        'mutation($i: Float!) { addWorkingMemory(input: {content: "x", importance: $i}) '
        "{ addedId } }",
        {"i": importance},
    )
    assert error["message"] == message
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["extensions"]["requestId"]


async def test_empty_content_is_bad_user_input(api: LiveServer) -> None:
    error = await api.error('mutation { addWorkingMemory(input: {content: ""}) { addedId } }')
    assert (error["message"], error["extensions"]["code"]) == (
        "Content must not be empty",
        "BAD_USER_INPUT",
    )


async def test_unknown_id_is_null_for_queries(api: LiveServer) -> None:
    assert await api.data('{ workingMemoryItem(id: "424242") { id } }') == {
        "workingMemoryItem": None
    }


@pytest.mark.parametrize(
    "mutation",
    [
        'accessWorkingMemory(id: "424242") { id }',
        'archiveWorkingMemory(id: "424242") { id }',
        'restoreStaleMemory(id: "424242") { addedId }',
    ],
)
async def test_unknown_id_is_not_found_for_mutations(api: LiveServer, mutation: str) -> None:
    error = await api.error(f"mutation {{ {mutation} }}")
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert "424242" in error["message"]


@pytest.mark.parametrize(
    "query",
    [
        '{ workingMemoryItem(id: "abc") { id } }',
        "{ nonsense }",
        "{ workingMemory { id ",
        "{ staleMemory(reason: FORGOTTEN) { edges { cursor } } }",
        "{ staleMemory(first: 5000) { edges { cursor } } }",
    ],
)
async def test_malformed_requests_are_bad_user_input(api: LiveServer, query: str) -> None:
    body = await api.graphql(query)
    assert body["errors"]
    assert {e["extensions"]["code"] for e in body["errors"]} == {"BAD_USER_INPUT"}


async def test_request_id_is_echoed(api: LiveServer) -> None:
    response = await api.client.post(
        "/graphql", json={"query": "{ stats { sessions } }"}, headers={"X-Request-ID": "abc-123"}
    )
    assert response.headers["x-request-id"] == "abc-123"


async def test_oversized_body_is_refused_with_a_reason(api: LiveServer) -> None:
    response = await api.client.post(
        "/graphql",
        content=b'{"query": "' + b"x" * (17 * 1024 * 1024) + b'"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_health_and_readiness(api: LiveServer) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok"}
    ready = await api.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["database"] == "ok"


async def test_internal_errors_are_masked_and_logged_with_request_id(
    api: LiveServer, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async with db.write() as conn:
        await conn.execute(text("ALTER TABLE stale_memory RENAME TO stale_memory_gone"))
    try:
        with caplog.at_level(logging.ERROR, logger="gql_memory.api"):
            error = await api.error("{ staleMemory { edges { cursor } } }")
    finally:
        async with db.write() as conn:
            await conn.execute(text("ALTER TABLE stale_memory_gone RENAME TO stale_memory"))
    assert error["message"] == "Internal server error"
    assert error["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    assert "stale_memory" not in str(error)
    request_id = error["extensions"]["requestId"]
    assert any(request_id in r.getMessage() and r.exc_info for r in caplog.records)


async def test_a_truncated_request_body_is_no_server_error(
    api: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The client announces 100 bytes, sends 10 and hangs up: nothing is logged as an error."""
    import asyncio
    from urllib.parse import urlsplit

    address = urlsplit(api.base_url)
    with caplog.at_level(logging.INFO):
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        writer.write(
            b"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n" + b'{"query": '
        )
        await writer.drain()
        writer.write_eof()
        await reader.read()  # the server closes its side; whatever it answers, no 500
        writer.close()
        await api.data("{ stats { sessions } }")  # the server is fine
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("disconnected before the request body" in r.getMessage() for r in caplog.records)
