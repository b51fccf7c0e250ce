"""The MCP tools over real stdio: listed with described inputs, backed by the service layer,
domain errors returned as tool errors the model can read."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

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
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.description
        properties = tool.input_schema["properties"]
        assert properties, tool.name
        for name, schema in properties.items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"
    context = next(t for t in tools if t.name == "get_context")
    assert context.input_schema["required"] == ["query"]


async def test_an_agent_loop_through_the_tools(mcp: Client) -> None:
    turn = await call(
        mcp, "store_raw_dialogue", session_id="s", speaker="user", content="I moved to Berlin"
    )
    assert turn["session_id"] == "s" and turn["id"]
    added = await call(
        mcp,
        "update_working_memory",
        content="User lives in Berlin",
        importance=0.9,
        session_id="s",
    )
    assert added["current_count"] == 1 and added["evicted_id"] is None
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


async def test_domain_errors_are_tool_errors_with_the_api_message(mcp: Client) -> None:
    result = await mcp.call_tool("update_working_memory", {"content": "x", "importance": 1.5})
    assert result.is_error and "Importance must be <= 1.0" in result.content[0].text  # type: ignore[union-attr]
    result = await mcp.call_tool(
        "store_raw_dialogue", {"session_id": "s", "speaker": "u", "content": " "}
    )
    assert result.is_error and "content must not be empty" in result.content[0].text  # type: ignore[union-attr]
    result = await mcp.call_tool("graph_query_neighbors", {"node_name": "nobody"})
    assert result.is_error and "Node (Entity, nobody) not found" in result.content[0].text  # type: ignore[union-attr]
    result = await mcp.call_tool("get_context", {"query": "q", "max_tokens": 5})
    assert result.is_error and "maxTokens must be between 32" in result.content[0].text  # type: ignore[union-attr]
    result = await mcp.call_tool("hybrid_search", {"query": "q", "layers": ["NOPE"]})
    assert result.is_error and "layers" in result.content[0].text  # type: ignore[union-attr]


async def test_without_database_url_it_serves_the_embedded_database(tmp_path: Path) -> None:
    """PostgreSQL starts inside the session: nothing it prints may reach the protocol."""
    parameters = server_parameters("--data-dir", str(tmp_path / "data"), "--namespace", "agent")
    async with mcp_client(parameters) as client:
        await call(client, "update_working_memory", content="remember me", importance=0.9)
        [item] = await read(client, "memory://working-memory")
        assert item["content"] == "remember me"
    assert (tmp_path / "data" / "pgdata" / "PG_VERSION").is_file()
