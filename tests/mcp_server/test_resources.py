"""The memory:// resources of seed 003 over real stdio: parameters (form-decoded, under the
seed's names), ordering, filters, `[]` for no match, the seed's error shape with one code for
invalid parameters and another for unknown resources, and read-only."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gql_memory.db import Database
from tests.api.test_readonly import snapshot
from tests.mcp_server.conftest import call, read

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002


async def seed(mcp: Client) -> None:
    for i, importance in enumerate([0.9, 0.2, 0.5]):
        await call(
            mcp,
            "update_working_memory",
            content=f"item {i}",
            importance=importance,
            session_id="s",
        )
    await call(mcp, "store_raw_dialogue", session_id="s", speaker="user", content="hello there")
    await call(mcp, "store_raw_dialogue", session_id="t", speaker="assistant", content="hi")
    await call(mcp, "compress_to_l2_insight", content="The user drinks green tea")
    await call(mcp, "compress_to_l2_insight", content="The user works as a nurse")
    await call(mcp, "store_episode", query="suggest a drink", reward=0.5, reflection="tea")


async def test_the_resources_are_listed(mcp: Client) -> None:
    static = {str(r.uri) for r in (await mcp.list_resources()).resources}
    assert static == {"memory://working-memory", "memory://stale-memory", "memory://l0-raw"}
    templates = {t.uri_template for t in (await mcp.list_resource_templates()).resource_templates}
    assert templates == {
        "memory://l2-insights{?query,top_k}",
        "memory://working-memory{?session_id,limit}",
        "memory://episode-memory{?query,min_similarity,top_k}",
        "memory://l0-raw{?session_id,date_range,speaker,limit}",
        "memory://stale-memory{?importance_min,session_id,reason,limit}",
    }


async def test_l2_insights_are_the_top_k_for_the_query(mcp: Client) -> None:
    await seed(mcp)
    hits = await read(mcp, "memory://l2-insights?query=green%20tea&top_k=1")
    assert [h["content"] for h in hits] == ["The user drinks green tea"]
    assert set(hits[0]) == {"id", "content", "score", "source_ids"}
    assert len(await read(mcp, "memory://l2-insights?query=tea")) == 2  # default top_k 5


async def test_a_plus_in_the_query_string_is_a_space(mcp: Client) -> None:
    await seed(mcp)
    plus = await read(mcp, "memory://l2-insights?query=green+tea&top_k=1")
    assert plus == await read(mcp, "memory://l2-insights?query=green%20tea&top_k=1")
    assert [h["content"] for h in plus] == ["The user drinks green tea"]
    [turn] = await read(mcp, "memory://l0-raw?speaker=assistant&session_id=t")
    assert turn["content"] == "hi"
    await call(mcp, "store_raw_dialogue", session_id="a b", speaker="user", content="spaced")
    [spaced] = await read(mcp, "memory://l0-raw?session_id=a+b")
    assert spaced["session_id"] == "a b" and spaced["content"] == "spaced"
    assert await read(mcp, "memory://l0-raw?session_id=a%2Bb") == []  # %2B is a literal +


async def test_working_memory_is_newest_access_first(mcp: Client) -> None:
    await seed(mcp)
    items = await read(mcp, "memory://working-memory?session_id=s")
    assert [i["content"] for i in items] == ["item 2", "item 1", "item 0"]
    assert {"id", "content", "importance", "last_accessed", "created_at"} <= set(items[0])
    assert await read(mcp, "memory://working-memory?session_id=default") == []
    assert len(await read(mcp, "memory://working-memory?session_id=s&limit=2")) == 2


async def test_working_memory_without_a_session_is_every_session_newest_access_first(
    mcp: Client,
) -> None:
    await seed(mcp)  # items 0..2 in session "s"
    await call(mcp, "update_working_memory", content="other", session_id="u")
    await call(mcp, "update_working_memory", content="default item")
    items = await read(mcp, "memory://working-memory")
    assert [(i["session_id"], i["content"]) for i in items] == [
        ("default", "default item"),
        ("u", "other"),
        ("s", "item 2"),
        ("s", "item 1"),
        ("s", "item 0"),
    ]
    stamps = [i["last_accessed"] for i in items]
    assert stamps == sorted(stamps, reverse=True)
    assert [i["content"] for i in await read(mcp, "memory://working-memory?limit=2")] == [
        "default item",
        "other",
    ]


async def test_episode_memory_filters_by_similarity(mcp: Client) -> None:
    await seed(mcp)
    [episode] = await read(mcp, "memory://episode-memory?query=suggest%20a%20drink")
    assert set(episode) == {"id", "query", "reward", "reflection", "similarity"}
    assert episode["similarity"] >= 0.7
    unrelated = "memory://episode-memory?query=quantum%20physics&min_similarity=0.95"
    assert await read(mcp, unrelated) == []


async def test_l0_raw_filters_by_session_and_date_range(mcp: Client) -> None:
    await seed(mcp)
    [turn] = await read(mcp, "memory://l0-raw?session_id=s")
    assert turn["content"] == "hello there"
    assert set(turn) == {"id", "session_id", "timestamp", "speaker", "content", "metadata"}
    assert len(await read(mcp, "memory://l0-raw")) == 2
    assert await read(mcp, "memory://l0-raw?date_range=2000-01-01:2000-01-31") == []


async def test_l0_raw_reads_a_date_range_of_up_to_a_year(mcp: Client) -> None:
    await seed(mcp)
    [today] = {date.fromisoformat(t["timestamp"][:10]) for t in await read(mcp, "memory://l0-raw")}
    year = f"{today - timedelta(days=365)}:{today}"  # 366 days: the longest range allowed
    assert len(await read(mcp, f"memory://l0-raw?date_range={year}")) == 2
    longer = f"{today - timedelta(days=366)}:{today}"
    assert (await read_error(mcp, f"memory://l0-raw?date_range={longer}"))["code"] == INVALID_PARAMS


async def test_stale_memory_filters_by_importance(mcp: Client) -> None:
    await seed(mcp)
    assert await read(mcp, "memory://stale-memory") == []
    for i in range(9):  # 12 items, capacity 10: the two oldest non-critical ones leave
        await call(mcp, "update_working_memory", content=f"more {i}", session_id="s")
    archived = await read(mcp, "memory://stale-memory")
    assert {a["original_content"] for a in archived} == {"item 1", "item 2"}
    assert archived[0]["reason"] == "LRU_EVICTION"
    assert [
        a["importance"] for a in await read(mcp, "memory://stale-memory?importance_min=0.4")
    ] == [0.5]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("memory://l2-insights", "query is required"),
        ("memory://l2-insights?query=", "query is required"),
        ("memory://l2-insights?query=tea&top_k=abc", "top_k must be an integer"),
        ("memory://l2-insights?query=tea&top_k=0", "top_k must be between 1 and 100"),
        ("memory://episode-memory?query=x&top_k=101", "top_k must be between 1 and 100"),
        ("memory://episode-memory?query=x&min_similarity=high", "min_similarity must be a number"),
        ("memory://episode-memory?query=x&min_similarity=2", "min_similarity must be between"),
        ("memory://l0-raw?date_range=2024-01-01", "Invalid date_range format"),
        ("memory://l0-raw?date_range=2024-01-01:2025-01-01", "more than 366 days (one year)"),
        ("memory://l0-raw?date_range=2000-01-01:2999-12-31", "more than 366 days (one year)"),
        ("memory://l0-raw?limit=5000", "limit must be between 1 and 1000"),
        ("memory://l0-raw?limit=-1", "limit must be between 1 and 1000"),
        ("memory://l0-raw?session_id=", "session_id must not be empty"),
        ("memory://working-memory?limit=0", "limit must be between 1 and 1000"),
        ("memory://working-memory?session_id=+", "session_id must not be empty"),
        ("memory://stale-memory?importance_min=2", "importance_min must be <= 1.0"),
        ("memory://stale-memory?importance_min=-0.5", "importance_min must be >= 0.0"),
        ("memory://stale-memory?reason=LOST", "reason must be one of"),
        ("memory://l0-raw?sesion_id=s", "unknown parameter 'sesion_id'"),
        ("memory://l0-raw?session_id=a&session_id=b", "given more than once"),
    ],
)
async def test_invalid_parameters_are_invalid_params_errors_in_the_seeds_shape(
    mcp: Client, uri: str, message: str
) -> None:
    error = await read_error(mcp, uri)
    assert error["code"] == INVALID_PARAMS
    assert message in error["message"]
    assert error["data"] == {
        "error": "Invalid parameters",
        "details": error["message"],
        "resource": uri,
    }


async def read_error(mcp: Client, uri: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as caught:
        await mcp.read_resource(uri)
    return caught.value.error.model_dump()


@pytest.mark.parametrize(
    "uri",
    [
        "memory://invalid-resource",
        "memory://working-memory/extra",
        "memory://l2-insights-v2?query=x",
        "file:///etc/passwd",
    ],
)
async def test_an_unknown_resource_has_its_own_error_code(mcp: Client, uri: str) -> None:
    error = await read_error(mcp, uri)
    assert error["code"] == RESOURCE_NOT_FOUND != INVALID_PARAMS
    assert error["message"] == f"Unknown resource: {uri}"
    assert error["data"] == {
        "error": "Unknown resource",
        "details": error["message"],
        "resource": uri,
    }


async def test_reading_resources_never_writes(mcp: Client, db: Database) -> None:
    await seed(mcp)
    before = await snapshot(db)
    for uri in [
        "memory://working-memory?session_id=s",
        "memory://stale-memory?importance_min=0.1",
        "memory://l0-raw?session_id=s",
        "memory://l2-insights?query=tea&top_k=5",
        "memory://episode-memory?query=drink&min_similarity=0.1",
    ]:
        await read(mcp, uri)
    assert await snapshot(db) == before
