"""The reference MCP memory server's tools (@modelcontextprotocol/server-memory) served by
`gql-memory mcp`: the same tool list, schemas included, and the same results as the real
package (installed by npm from tests/node/package-lock.json, run over stdio) for one script of
calls, up to ordering.

The reference's search_nodes is a substring match and ours adds hybrid search's hits; the
script's queries are names and words that both find the same way (docs/mcp.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, Tool, ToolExecution

from tests.mcp_server.conftest import call, mcp_client, server_parameters

REFERENCE = "@modelcontextprotocol/server-memory"
FORBIDDEN = ToolExecution(task_support="forbidden").model_dump(by_alias=True)
TOOLS = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]


def person(name: str, *observations: str, kind: str = "person") -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(observations)}


def relation(source: str, relation_type: str, target: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


# (tool, arguments): every write, then reads after creates and after deletes
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),
    (
        "create_entities",
        {
            "entities": [
                person("Alice", "Works at Acme Corp", "Likes green tea"),
                person("Bob", "Plays chess"),
                person("Acme Corp", "Based in Berlin", kind="organization"),
                person("Berlin", kind="city"),
            ]
        },
    ),
    ("create_entities", {"entities": [person("Alice", "Other"), person("Carol", "Speaks French")]}),
    (
        "create_relations",
        {
            "relations": [
                relation("Alice", "works_at", "Acme Corp"),
                relation("Bob", "knows", "Alice"),
                relation("Acme Corp", "located_in", "Berlin"),
                relation("Carol", "knows", "Bob"),
            ]
        },
    ),
    ("create_relations", {"relations": [relation("Alice", "works_at", "Acme Corp")]}),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Alice", "contents": ["Likes green tea", "Met Eve at a conference"]},
                {"entityName": "Bob", "contents": ["Lives in Berlin"]},
            ]
        },
    ),
    ("add_observations", {"observations": [{"entityName": "Zed", "contents": ["x"]}]}),
    # "Eve" was named in an observation (our automatic graph has a node for the name): the
    # entity is new all the same
    ("create_entities", {"entities": [person("Eve", kind="Entity")]}),
    ("create_entities", {"entities": "not a list"}),
    ("read_graph", {}),
    ("search_nodes", {"query": "alice"}),
    ("search_nodes", {"query": "Berlin"}),
    ("search_nodes", {"query": "person"}),
    ("search_nodes", {"query": "chess"}),
    ("search_nodes", {"query": "zebra"}),
    ("open_nodes", {"names": ["Alice", "Berlin", "Nobody"]}),
    ("open_nodes", {"names": []}),
    (
        "delete_observations",
        {
            "deletions": [
                {"entityName": "Alice", "observations": ["Likes green tea"]},
                {"entityName": "Nobody", "observations": ["x"]},
            ]
        },
    ),
    (
        "delete_relations",
        {"relations": [relation("Bob", "knows", "Alice"), relation("Bob", "likes", "Alice")]},
    ),
    ("delete_entities", {"entityNames": ["Carol", "Nobody"]}),
    ("read_graph", {}),
    ("search_nodes", {"query": "tea"}),
    ("search_nodes", {"query": "Berlin"}),
    ("open_nodes", {"names": ["Alice", "Bob", "Carol"]}),
    # a relation deleted can be drawn again, an observation deleted added again
    ("create_relations", {"relations": [relation("Bob", "knows", "Alice")]}),
    (
        "add_observations",
        {"observations": [{"entityName": "Alice", "contents": ["Likes green tea"]}]},
    ),
    ("read_graph", {}),
]


def comparable(result: CallToolResult) -> Any:
    """A result up to ordering: failures by their flag alone (the texts differ: ours are the
    seeds' JSON), lists sorted."""
    if result.is_error:
        return "error"

    def ordered(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ordered(v) for k, v in value.items()}
        if isinstance(value, list):
            return sorted((ordered(v) for v in value), key=repr)
        return value

    [content] = result.content
    return {"text": ordered(parse(content.text)), "structured": ordered(result.structured_content)}  # type: ignore[union-attr]


def parse(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text  # a message ("Entities deleted successfully")


def listed(tool: Tool) -> dict[str, Any]:
    """A listed tool as JSON. ``execution`` exists in protocol 2025-11-25 only (the version
    the reference's SDK speaks); absent, it means the same ``taskSupport: forbidden``."""
    return tool.model_dump(by_alias=True) | {"execution": FORBIDDEN}


async def run(client: Client) -> list[Any]:
    return [comparable(await client.call_tool(tool, args)) for tool, args in SCRIPT]


@pytest.fixture
def reference_server(node_clients: Path, tmp_path: Path) -> StdioServerParameters:
    entry = node_clients / "node_modules" / REFERENCE / "dist" / "index.js"
    return StdioServerParameters(
        command="node", args=[str(entry)], env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    )


async def test_the_tool_list_matches_the_reference(
    mcp: Client, reference_server: StdioServerParameters
) -> None:
    async with mcp_client(reference_server) as reference:
        theirs = {t.name: listed(t) for t in (await reference.list_tools()).tools}
    ours = {t.name: listed(t) for t in (await mcp.list_tools()).tools}
    assert sorted(theirs) == sorted(TOOLS)
    for name in TOOLS:
        assert ours[name] == theirs[name], name


async def test_one_script_gives_the_reference_results(
    mcp: Client, reference_server: StdioServerParameters
) -> None:
    async with mcp_client(reference_server) as reference:
        expected = await run(reference)
    got = await run(mcp)
    for (tool, args), theirs, ours in zip(SCRIPT, expected, got, strict=True):
        assert ours == theirs, (tool, args)
    assert expected[-1]["structured"]["entities"]  # the script did build a graph


async def test_observations_are_insights_that_hybrid_search_finds(mcp: Client) -> None:
    await call(mcp, "create_entities", entities=[person("Alice", "Works at Acme Corp")])
    # the reference's substring finds nothing for "working"; the full-text leg stems it
    found = await call(mcp, "search_nodes", query="working")
    assert [e["name"] for e in found["entities"]] == ["Alice"]
    hits = (await call(mcp, "hybrid_search", query="Acme Corp"))["hits"]
    assert [h["content"] for h in hits] == ["Works at Acme Corp"]


async def test_a_refusal_names_the_missing_entity(mcp: Client) -> None:
    result = await mcp.call_tool(
        "create_relations", {"relations": [relation("Alice", "knows", "Nobody")]}
    )
    assert result.is_error
    assert result.structured_content == {
        "error": "Invalid parameters",
        "details": "Entity with name Alice not found",
        "tool": "create_relations",
    }


async def test_the_graph_survives_a_restart_and_stays_in_its_namespace(
    mcp: Client, database_url: str
) -> None:
    # (the mcp fixture empties the database; three servers of their own do the rest)
    def server(namespace: str) -> StdioServerParameters:
        return server_parameters("--namespace", namespace, DATABASE_URL=database_url)

    async with mcp_client(server("team-a")) as first:
        await call(first, "create_entities", entities=[person("Alice", "Likes tea")])
    async with mcp_client(server("team-a")) as restarted:
        graph = await call(restarted, "read_graph")
    assert graph["entities"] == [person("Alice", "Likes tea")]
    async with mcp_client(server("team-b")) as other:
        assert await call(other, "read_graph") == {"entities": [], "relations": []}
