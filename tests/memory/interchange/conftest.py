"""The fixture files of other systems (tests/data/interchange, each with the script that made
it) and a namespace's memory to import them into."""

from __future__ import annotations

from pathlib import Path

import pytest

from gql_memory.db import Database
from gql_memory.memory import Memory

DATA = Path(__file__).resolve().parents[2] / "data" / "interchange"
MEM0 = DATA / "mem0_get_all.json"
MCP_MEMORY = DATA / "mcp_memory.jsonl"
LETTA = DATA / "letta_lettabot_builder.af"


@pytest.fixture
def target(memory: Memory, db: Database) -> Memory:
    """The namespace imports go to (the database emptied by ``memory``)."""
    return Memory(db, memory.settings, "imported", memory.embedder)
