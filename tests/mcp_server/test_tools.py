"""The MCP tools over real stdio: listed with described and bounded inputs, backed by the
service layer, returning the seeds' shapes, failures returned as tool errors in the seeds'
``{"error", "details", "tool"}`` the model can read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from gql_memory.mcp_server.reference_tools import REFERENCE_TOOL_NAMES
from tests.mcp_server.conftest import call, mcp_client, read, server_parameters

TOOLS = {
    "store_raw_dialogue",
    "update_working_memory",
    "compress_to_l2_insight",
    "store_episode",
    "hybrid_search",
    "graph_add_node",
    "graph_add_edge",
    "graph_query_neighbors",
    "graph_find_path",
    "get_context",
}


async def test_the_ten_tools_are_listed_with_described_inputs(mcp: Client) -> None:
    tools = (await mcp.list_tools()).tools
    # and the nine of the reference memory server (test_reference_tools.py)
    assert {t.name for t in tools} == TOOLS | REFERENCE_TOOL_NAMES
    for tool in (t for t in tools if t.name in TOOLS):
        assert tool.description
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, schema in properties.items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    context = next(t for t in tools if t.name == "get_context")
    assert context.input_schema["required"] == ["query"]
    # closed: a client can tell a misspelt argument before calling (the call refuses it too)
    assert all(t.input_schema["additionalProperties"] is False for t in tools if t.name in TOOLS)


async def test_the_input_schemas_state_the_bounds(mcp: Client) -> None:
    schemas = {t.name: t.input_schema["properties"] for t in (await mcp.list_tools()).tools}
    working = schemas["update_working_memory"]
    assert (working["importance"]["minimum"], working["importance"]["maximum"]) == (0.0, 1.0)
    assert working["content"]["minLength"] == 1 and working["content"]["pattern"] == r"\S"
    assert working["session_id"]["maxLength"] == 255
    raw = schemas["store_raw_dialogue"]
    assert raw["session_id"]["maxLength"] == 255 and raw["speaker"]["maxLength"] == 50
    assert raw["content"]["minLength"] == 1 and "maxLength" not in raw["content"]  # seed 004
    assert (
        schemas["store_episode"]["reward"]["minimum"],
        schemas["store_episode"]["reward"]["maximum"],
    ) == (-1.0, 1.0)
    assert schemas["hybrid_search"]["top_k"]["maximum"] == 100
    assert schemas["graph_query_neighbors"]["depth"]["maximum"] == 5
    assert schemas["get_context"]["max_tokens"]["minimum"] == 32
    assert schemas["compress_to_l2_insight"]["source_ids"]["items"]["minimum"] == 1


async def test_an_agent_loop_through_the_tools(mcp: Client) -> None:
    turn = await call(
        mcp, "store_raw_dialogue", session_id="s", speaker="user", content="I moved to Berlin"
    )
    assert set(turn) == {"id", "timestamp", "session_id", "status"}  # seed 004
    assert turn["session_id"] == "s" and turn["id"] and turn["status"] == "success"
    added = await call(
        mcp,
        "update_working_memory",
        content="User lives in Berlin",
        importance=0.9,
        session_id="s",
    )
    assert added["current_count"] == 1 and added["evicted_id"] is None
    assert added["decayed_ids"] == []
    insight = await call(
        mcp,
        "compress_to_l2_insight",
        content="The user lives in Berlin",
        source_ids=[turn["id"]],
    )
    assert insight["source_ids"] == [turn["id"]]
    episode = await call(
        mcp,
        "store_episode",
        query="recommend a cafe in Berlin",
        reward=0.7,
        reflection="Ask about the neighbourhood first",
    )
    assert episode["reward"] == 0.7
    node = await call(mcp, "graph_add_node", name="Berlin", label="City", insight_id=insight["id"])
    edge = await call(
        mcp,
        "graph_add_edge",
        source_name="Berlin",
        source_label="City",
        target_name="Germany",
        target_label="Country",
        relation="located_in",
    )
    assert edge["source_id"] == node["id"] and edge["relation"] == "located_in"

    found = await call(mcp, "hybrid_search", query="where does the user live", top_k=3)
    assert found["hits"][0]["id"] == insight["id"]
    assert found["hits"][0]["vector_rank"] == 1 and found["hits"][0]["final_score"] > 0

    neighbours = await call(mcp, "graph_query_neighbors", node_name="Berlin", node_label="City")
    [germany] = neighbours["neighbors"]
    assert germany["node"]["name"] == "Germany" and germany["relations"] == ["located_in"]
    path = await call(
        mcp,
        "graph_find_path",
        from_name="Germany",
        from_label="Country",
        to_name="Berlin",
        to_label="City",
    )
    assert path["found"] and path["length"] == 1
    assert [n["name"] for n in path["nodes"]] == ["Germany", "Berlin"]
    nowhere = await call(mcp, "graph_find_path", from_name="Berlin", to_name="Mars")
    assert nowhere == {"found": False, "length": None, "nodes": [], "edges": []}

    context = await call(
        mcp, "get_context", query="recommend a cafe in Berlin", session_id="s", max_tokens=300
    )
    assert context["total_tokens"] <= 300
    assert "User lives in Berlin" in context["text"]
    assert "Ask about the neighbourhood first" in context["text"]
    assert "Berlin (City) —located_in→ Germany (Country)" in context["text"]
    kinds = [s["kind"] for s in context["sections"]]
    assert kinds == ["WORKING", "SEARCH", "EPISODES", "GRAPH"]
    assert all(i["reason"] and i["tokens"] for s in context["sections"] for i in s["items"])


async def test_an_item_archived_by_decay_is_reported_in_decayed_ids(mcp: Client) -> None:
    fading = await call(mcp, "update_working_memory", content="trivia", importance=0.0)
    kept = await call(mcp, "update_working_memory", content="keep", importance=0.9)
    assert kept["decayed_ids"] == [fading["added_id"]]
    assert kept["evicted_id"] is None and kept["current_count"] == 1
    [archived] = await read(mcp, "memory://stale-memory")
    assert archived["original_id"] == fading["added_id"]
    assert archived["reason"] == "DECAY_EVICTION"


async def test_seed_000s_eviction_cases_over_stdio(mcp: Client) -> None:
    """Seed 000's integration test through the tool: 15 adds into a capacity of 10 evict 5,
    each reported with its stale row; a critical item (importance > 0.8) is never the one
    evicted while others can be."""
    critical = await call(mcp, "update_working_memory", content="allergic to nuts", importance=0.95)
    results = [
        await call(mcp, "update_working_memory", content=f"note {i}", importance=0.5)
        for i in range(14)
    ]
    evicted = [r["evicted_id"] for r in results if r["evicted_id"] is not None]
    assert len(evicted) == 5 and critical["added_id"] not in evicted
    assert all(r["archived_id"] is not None for r in results if r["evicted_id"] is not None)
    assert results[-1]["current_count"] == 10
    stale = await read(mcp, "memory://stale-memory")
    assert sorted(s["original_id"] for s in stale) == sorted(evicted)
    assert {s["reason"] for s in stale} == {"LRU_EVICTION"}


async def tool_error(mcp: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A failed call's ``{"error", "details", "tool"}``, as text and as structured content."""
    result = await mcp.call_tool(tool, arguments)
    assert result.is_error
    [content] = result.content
    body = json.loads(content.text)  # type: ignore[union-attr]
    assert set(body) == {"error", "details", "tool"} and body["tool"] == tool
    assert result.structured_content == body
    return body  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("tool", "arguments", "error", "details"),
    [
        (
            "update_working_memory",
            {"content": "x", "importance": 1.5},
            "Invalid parameters",
            "Importance must be <= 1.0",
        ),
        (
            "store_raw_dialogue",
            {"session_id": "s", "speaker": "u", "content": " "},
            "Invalid parameters",
            "content must not be empty",
        ),
        (
            "graph_query_neighbors",
            {"node_name": "nobody"},
            "Not found",
            "Node (Entity, nobody) not found",
        ),
        (
            "get_context",
            {"query": "q", "max_tokens": 5},
            "Invalid parameters",
            "maxTokens must be between 32",
        ),
        (
            "hybrid_search",
            {"query": "q", "layers": ["NOPE"]},
            "Invalid parameters",
            "layers.0: Input should be 'INSIGHT', 'EPISODE' or 'RAW'",
        ),
        ("store_episode", {"query": "q"}, "Invalid parameters", "reward: Field required"),
        ("forget_everything", {}, "Unknown tool", "Unknown tool: forget_everything"),
        # an argument the tool does not take is refused, not dropped (GraphQL's camelCase
        # name, or a search option MCP does not offer)
        (
            "hybrid_search",
            {"query": "q", "minRelevance": 0.99},
            "Invalid parameters",
            "minRelevance: Extra inputs are not permitted",
        ),
        (
            "get_context",
            {"query": "q", "since": "2099-01-01T00:00:00Z"},
            "Invalid parameters",
            "since: Extra inputs are not permitted",
        ),
    ],
)
async def test_failures_are_tool_errors_in_the_seeds_shape(
    mcp: Client, tool: str, arguments: dict[str, Any], error: str, details: str
) -> None:
    body = await tool_error(mcp, tool, **arguments)
    assert body["error"] == error
    assert details in body["details"]


async def test_without_database_url_it_serves_the_embedded_database(tmp_path: Path) -> None:
    """PostgreSQL starts inside the session: nothing it prints may reach the protocol."""
    parameters = server_parameters("--data-dir", str(tmp_path / "data"), "--namespace", "agent")
    async with mcp_client(parameters) as client:
        await call(client, "update_working_memory", content="remember me", importance=0.9)
        [item] = await read(client, "memory://working-memory")
        assert item["content"] == "remember me"
    assert (tmp_path / "data" / "pgdata" / "PG_VERSION").is_file()


async def test_facts_are_superseded_and_read_as_of_over_mcp(mcp: Client) -> None:
    paris = await call(mcp, "compress_to_l2_insight", content="The user lives in Paris today")
    assert paris["valid_to"] is None and paris["supersedes"] == []
    berlin = await call(
        mcp,
        "compress_to_l2_insight",
        content="The user moved to Berlin today",
        supersedes=[paris["id"]],
    )
    assert berlin["supersedes"] == [paris["id"]]
    assert isinstance(berlin["possibly_contradicts"], list)
    now = await call(mcp, "hybrid_search", query="where does the user live today", top_k=5)
    assert paris["id"] not in [h["id"] for h in now["hits"]]
    then = await call(
        mcp,
        "hybrid_search",
        query="where does the user live today",
        top_k=5,
        as_of=paris["valid_from"],
    )
    [hit] = then["hits"]
    assert hit["id"] == paris["id"] and hit["superseded_by"] == berlin["id"]
    again = await mcp.call_tool(
        "compress_to_l2_insight", {"content": "The user moved to Rome", "supersedes": [paris["id"]]}
    )
    assert again.is_error
    assert json.loads(again.content[0].text)["error"] == "Invalid parameters"  # type: ignore[union-attr]


async def test_search_and_context_read_time_in_the_query_over_mcp(mcp: Client) -> None:
    await call(mcp, "store_raw_dialogue", session_id="s", speaker="user", content="I went hiking")
    reference = datetime.now(UTC).isoformat()
    found = await call(
        mcp,
        "hybrid_search",
        query="Where did I go hiking today?",
        layers=["RAW"],
        interpret_time=True,
        reference_time=reference,
    )
    [hit] = found["hits"]
    assert hit["interpreted_period"]["expression"] == "today"
    assert hit["interpreted_period"]["granularity"] == "day"
    assert hit["time_score"] > 0 and hit["rank_without_period"] == 1
    plain = await call(mcp, "hybrid_search", query="Where did I go hiking today?", layers=["RAW"])
    assert plain["hits"][0]["interpreted_period"] is None
    context = await call(
        mcp,
        "get_context",
        query="Where did I go hiking today?",
        include=["SEARCH"],
        interpret_time=True,
        reference_time=reference,
    )
    [section] = context["sections"]
    assert '"today" = ' in section["items"][0]["reason"]
    body = await tool_error(
        mcp, "hybrid_search", query="q", interpret_time=True, reference_time="2023-10-01T09:00:00"
    )
    assert body["error"] == "Invalid parameters"
    assert "referenceTime must carry a timezone" in body["details"]


async def test_relevance_and_its_floor_over_mcp(mcp: Client) -> None:
    await call(mcp, "compress_to_l2_insight", content="The user prefers green tea")
    found = await call(mcp, "hybrid_search", query="green tea", min_relevance=0.0)
    [hit] = found["hits"]
    assert 0.0 < hit["relevance"] <= 1.0 and hit["cosine"] is not None
    assert (await call(mcp, "hybrid_search", query="green tea", min_relevance=1.0))["hits"] == []
    context = await call(mcp, "get_context", query="green tea", min_relevance=1.0)
    assert context["below_relevance"] == 1 and context["min_relevance"] == 1.0
    assert "green tea" not in context["text"]
    body = await tool_error(mcp, "hybrid_search", query="q", min_relevance=1.5)
    assert body["error"] == "Invalid parameters"
