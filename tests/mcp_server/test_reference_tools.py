"""The reference MCP memory server's tools (@modelcontextprotocol/server-memory) served by
`gql-memory mcp`: the same tool list, schemas included, and the same results as the real
package (installed by npm from tests/node/package-lock.json, run over stdio) for one script of
calls, up to ordering.

The reference's search_nodes is a substring match and ours adds hybrid search's hits; the
script's queries are names and words that both find the same way (docs/mcp.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
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


NUL = "Al\x00ice"
# (tool, arguments with a NUL in one string, the argument the refusal names): every string
# argument of every tool that takes one; Alice and Bob exist, so only the NUL is wrong
WITH_NUL: list[tuple[str, dict[str, Any], str]] = [
    ("create_entities", {"entities": [person(NUL)]}, "name"),
    ("create_entities", {"entities": [person("Carol", kind=NUL)]}, "entityType"),
    ("create_entities", {"entities": [person("Carol", NUL)]}, "observations"),
    ("create_relations", {"relations": [relation(NUL, "knows", "Bob")]}, "from"),
    ("create_relations", {"relations": [relation("Alice", "knows", NUL)]}, "to"),
    ("create_relations", {"relations": [relation("Alice", NUL, "Bob")]}, "relationType"),
    ("add_observations", {"observations": [{"entityName": NUL, "contents": []}]}, "entityName"),
    (
        "add_observations",
        {"observations": [{"entityName": "Alice", "contents": [NUL]}]},
        "contents",
    ),
    ("delete_entities", {"entityNames": [NUL]}, "entityNames"),
    (
        "delete_observations",
        {"deletions": [{"entityName": NUL, "observations": []}]},
        "entityName",
    ),
    (
        "delete_observations",
        {"deletions": [{"entityName": "Alice", "observations": [NUL]}]},
        "observations",
    ),
    ("delete_relations", {"relations": [relation(NUL, "knows", "Bob")]}, "from"),
    ("delete_relations", {"relations": [relation("Alice", "knows", NUL)]}, "to"),
    ("delete_relations", {"relations": [relation("Alice", NUL, "Bob")]}, "relationType"),
    ("search_nodes", {"query": NUL}, "query"),
    ("open_nodes", {"names": [NUL]}, "names"),
]


async def test_a_nul_character_in_any_argument_is_refused_and_logs_no_error(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "stderr"
    parameters = server_parameters(
        "--namespace", "nul", DATABASE_URL=database_url, GQL_MEMORY_LOG_FORMAT="json"
    )
    with log.open("w") as errlog:
        async with mcp_client(stdio_client(parameters, errlog=errlog)) as client:
            await call(client, "create_entities", entities=[person("Alice"), person("Bob")])
            answers = [(t, await client.call_tool(t, a), f) for t, a, f in WITH_NUL]
            graph = await call(client, "read_graph")
    wrong = [
        (tool, answer.structured_content)
        for tool, answer, field in answers
        if answer.structured_content
        != {
            "error": "Invalid parameters",
            "details": f"{field} must not contain NUL characters",
            "tool": tool,
        }
    ]
    assert wrong == [], "\n".join(f"{tool}: {body}" for tool, body in wrong)
    assert graph == {"entities": [person("Alice"), person("Bob")], "relations": []}
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert [r for r in records if r["level"] in ("ERROR", "CRITICAL")] == []
