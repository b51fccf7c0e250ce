"""Batching: a JSON array of operations in one POST, each run as if sent alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore
from tests.conftest import LiveServer, serving, truncate_all

ADD = 'mutation { addWorkingMemory(input: {content: "batched", sessionId: "b"}) { addedId } }'
COUNT = "{ stats { workingMemory } }"
NODES = "{ nodes(first: 40) { edges { node { id } } } }"


async def batch(api: LiveServer, operations: list[Any], **headers: str) -> Any:
    response = await api.client.post(
        "/graphql", json=operations, headers={**api.headers, **headers}
    )
    return response.status_code, response.json()


async def test_a_batch_of_three_with_one_invalid_operation(api: LiveServer) -> None:
    status, results = await batch(
        api, [{"query": COUNT}, {"query": "{ noSuchField }"}, {"query": ADD}]
    )
    assert status == 200
    assert len(results) == 3
    assert results[0]["data"] == {"stats": {"workingMemory": 0}}
    assert results[1]["data"] is None
    assert results[1]["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "noSuchField" in results[1]["errors"][0]["message"]
    assert results[2]["data"]["addWorkingMemory"]["addedId"]
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 1


async def test_operations_of_a_batch_run_in_order(api: LiveServer) -> None:
    status, results = await batch(api, [{"query": ADD}, {"query": COUNT}, {"query": ADD}])
    assert status == 200
    assert results[1]["data"] == {"stats": {"workingMemory": 1}}


async def test_under_the_spec_type_an_invalid_operation_has_no_data(api: LiveServer) -> None:
    status, results = await batch(
        api,
        [{"query": COUNT}, {"query": "{"}],
        Accept="application/graphql-response+json",
    )
    assert status == 200
    assert "data" in results[0] and "data" not in results[1]


async def test_a_batch_over_the_limit_is_refused_whole(api: LiveServer) -> None:
    limit = Settings().max_batch
    status, body = await batch(api, [{"query": ADD}] * (limit + 1))
    assert status == 400
    error = body["errors"][0]
    assert error["extensions"]["code"] == "BATCH_TOO_LARGE"
    assert (
        f"{limit + 1} operations" in error["message"] and "GQL_MEMORY_MAX_BATCH" in error["message"]
    )
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 0  # nothing ran
    status, body = await batch(api, [{"query": ADD}] * limit)
    assert status == 200 and all("errors" not in r for r in body)


async def test_an_empty_batch_or_a_malformed_operation_is_refused(api: LiveServer) -> None:
    for operations in ([], [{"query": COUNT}, "not an object"], [{"query": 1}]):
        status, body = await batch(api, operations)
        assert status == 400, operations
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_an_operation_without_a_document_fails_alone(api: LiveServer) -> None:
    status, results = await batch(api, [{"query": COUNT}, {"variables": {}}])
    assert status == 200
    assert results[0]["data"] and results[1]["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


@asynccontextmanager
async def limited_server(settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    await truncate_all(db)
    async with serving(settings) as server:
        yield server


@pytest_asyncio.fixture
async def rate_limited(secure_settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    """Keys required; a burst of 3 operations per key, then one per 100 s."""
    settings = secure_settings.with_overrides(rate_limit_per_s=0.01, rate_limit_burst=3)
    async with limited_server(settings, db) as server:
        yield server


@pytest_asyncio.fixture
async def cost_limited(secure_settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    """Keys required; a cost limit between one and two NODES queries."""
    async with limited_server(secure_settings.with_overrides(max_query_cost=150), db) as server:
        yield server


async def test_each_operation_counts_against_the_rate_limit(
    rate_limited: LiveServer, key_store: ApiKeyStore
) -> None:
    api = rate_limited.with_key((await key_store.create("batch-rate", "read,write")).secret)
    status, results = await batch(api, [{"query": COUNT}] * 5)
    assert status == 200
    codes = [r["errors"][0]["extensions"]["code"] if "errors" in r else "ok" for r in results]
    assert codes == ["ok", "ok", "ok", "RATE_LIMITED", "RATE_LIMITED"]
    assert results[3]["errors"][0]["extensions"]["retryAfterMs"] > 0


async def test_each_operation_is_costed_alone(
    cost_limited: LiveServer, key_store: ApiKeyStore
) -> None:
    """Two operations that each fit the cost limit run, though together they would not;
    one over it is refused alone."""
    api = cost_limited.with_key((await key_store.create("batch-cost", "read")).secret)
    too_costly = NODES.replace("first: 40", "first: 100")
    status, results = await batch(api, [{"query": NODES}, {"query": NODES}, {"query": too_costly}])
    assert status == 200
    assert results[0]["data"] == results[1]["data"] == {"nodes": {"edges": []}}, results
    assert 2 * results[0]["extensions"]["cost"]["requested"] > 150
    error = results[2]["errors"][0]
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and "cost" in error["message"]
