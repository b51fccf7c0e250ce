"""Make mcp_memory.jsonl with the real reference MCP memory server.

Not run by the tests: run it by hand (needs node/npx and the npm registry) with the project's
venv, whose ``mcp`` client drives the server over stdio:

    python tests/data/interchange/make_mcp_memory.py

The server (@modelcontextprotocol/server-memory 2026.8.31, the version
gql_memory/mcp_server/reference_tools.py follows) writes its memory file itself
(MEMORY_FILE_PATH); the calls below are all it is told.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"
OUT = Path(__file__).with_name("mcp_memory.jsonl")


def entity(name: str, kind: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": list(observations)}


def relation(source: str, relation_type: str, target: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": relation_type}


CALLS: list[tuple[str, dict[str, Any]]] = [
    (
        "create_entities",
        {
            "entities": [
                entity("Alice", "person", "Works at Acme Corp", "Likes green tea"),
                entity("Bob", "person", "Plays chess on Sundays"),
                entity("Acme Corp", "organization", "Based in Berlin", "Makes rockets"),
                entity("Berlin", "city"),
                entity("Zoë", "person", "Speaks French and Japanese — fluently"),
            ]
        },
    ),
    (
        "create_relations",
        {
            "relations": [
                relation("Alice", "works_at", "Acme Corp"),
                relation("Bob", "knows", "Alice"),
                relation("Acme Corp", "located_in", "Berlin"),
                relation("Zoë", "knows", "Alice"),
                relation("Zoë", "works_at", "Acme Corp"),
            ]
        },
    ),
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "Alice", "contents": ["Moved to Berlin in 2023"]},
                {"entityName": "Berlin", "contents": ["Capital of Germany"]},
            ]
        },
    ),
    (
        "delete_observations",
        {"deletions": [{"entityName": "Alice", "observations": ["Likes green tea"]}]},
    ),
    ("delete_relations", {"relations": [relation("Zoë", "works_at", "Acme Corp")]}),
    (
        "create_entities",
        {"entities": [entity("Carol", "person", "Left the team"), entity("Dave", "robot")]},
    ),
    ("create_relations", {"relations": [relation("Carol", "mentors", "Bob")]}),
    ("delete_entities", {"entityNames": ["Carol"]}),
]


async def main() -> None:
    npx = shutil.which("npx")
    assert npx, "needs node's npx"
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory.jsonl"
        server = StdioServerParameters(
            command=npx,
            args=["-y", PACKAGE],
            env={"MEMORY_FILE_PATH": str(memory), "PATH": str(Path(npx).parent)},
        )
        async with Client(server, read_timeout_seconds=120) as client:
            for tool, arguments in CALLS:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, (tool, result)
        OUT.write_bytes(memory.read_bytes())
    print(f"wrote {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
