"""The reference MCP memory server's file (made by the real @modelcontextprotocol/server-memory
2026.8.31) becomes the graph our reference tools serve: read_graph, open_nodes and
search_nodes answer as the reference server does over that file (its loadGraph is the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gql_memory.errors import ValidationError
from gql_memory.mcp_server.reference_tools import reference_handlers
from gql_memory.memory import Memory
from gql_memory.memory.interchange.mcp_memory import import_mcp_memory, read_mcp_memory
from tests.memory.interchange.conftest import MCP_MEMORY


def reference_graph(path: Path) -> dict[str, list[dict[str, Any]]]:
    """What the reference's read_graph serves: the file's records, in order."""
    graph: dict[str, list[dict[str, Any]]] = {"entities": [], "relations": []}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        kind = record.pop("type")
        graph["entities" if kind == "entity" else "relations"].append(record)
    return graph


class Tools:
    """Our reference tools over ``memory``'s namespace, called as a client would."""

    def __init__(self, memory: Memory) -> None:
        store: Any = type("Store", (), {"memory": memory})()
        self.handlers = reference_handlers(store)

    async def __call__(self, name: str, **arguments: Any) -> Any:
        return (await self.handlers[name](arguments)).structured_content


async def test_the_tools_serve_the_files_graph(target: Memory, memory: Memory) -> None:
    done = await import_mcp_memory(target.knowledge_graph, read_mcp_memory(MCP_MEMORY, "x"))
    assert (done.entities, done.observations, done.relations) == (6, 7, 4)
    expected = reference_graph(MCP_MEMORY)
    tools = Tools(target)
    assert await tools("read_graph") == expected
    alice = [r for r in expected["relations"] if "Alice" in (r["from"], r["to"])]
    opened = await tools("open_nodes", names=["Alice"])
    assert opened == {"entities": [expected["entities"][0]], "relations": alice}
    found = await tools("search_nodes", query="Zoë")
    zoe = next(e for e in expected["entities"] if e["name"] == "Zoë")
    assert found["entities"] == [zoe]
    assert found["relations"] == [r for r in expected["relations"] if "Zoë" in r.values()]
    assert (await Tools(memory)("read_graph")) == {"entities": [], "relations": []}


async def test_importing_again_adds_nothing(target: Memory) -> None:
    parsed = read_mcp_memory(MCP_MEMORY, "x")
    await import_mcp_memory(target.knowledge_graph, parsed)
    again = await import_mcp_memory(target.knowledge_graph, parsed)
    assert (again.entities, again.observations, again.relations) == (0, 0, 0)
    assert await Tools(target)("read_graph") == reference_graph(MCP_MEMORY)


async def test_an_entity_already_there_gains_only_the_observations_it_lacks(
    target: Memory,
) -> None:
    tools = Tools(target)
    alice = {"name": "Alice", "entityType": "person", "observations": ["Works at Acme Corp"]}
    await tools("create_entities", entities=[alice])
    done = await import_mcp_memory(target.knowledge_graph, read_mcp_memory(MCP_MEMORY, "x"))
    assert (done.entities, done.observations) == (5, 6)
    graph = await tools("open_nodes", names=["Alice"])
    assert graph["entities"][0]["observations"] == [
        "Works at Acme Corp",
        "Moved to Berlin in 2023",
    ]


ENTITY = '{"type":"entity","name":"A","entityType":"t","observations":["x"]}'


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        ([ENTITY, '{"type":"entity","name":"B"'], "line 2: not valid JSON"),
        ([ENTITY, '{"type":"node","name":"B"}'], 'line 2: each line must be {"type": "entity"'),
        ([ENTITY, ENTITY], "line 2: entity 'A' repeats line 1"),
        ([ENTITY, '{"type":"entity","name":"","entityType":"t"}'], "line 2: name must not be"),
        ([ENTITY, '{"type":"entity","name":"B","entityType":"t","observations":[""]}'], "line 2"),
        (['{"type":"relation","from":"A","to":"B","relationType":"r"}', ENTITY], "line 1: "),
        ([ENTITY, '{"type":"relation","from":"A","to":"A","relationType":"r"}'], "line 2: a"),
        ([ENTITY, '{"type":"entity","name":"' + "n" * 3000 + '","entityType":"t"}'], "line 2"),
    ],
)
def test_a_bad_line_is_one_error_naming_it(tmp_path: Path, lines: list[str], error: str) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(lines))
    with pytest.raises(ValidationError) as raised:
        read_mcp_memory(path, "x")
    assert str(raised.value).startswith(error), str(raised.value)
