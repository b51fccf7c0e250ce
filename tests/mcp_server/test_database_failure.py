"""Seed 004's Test 4 over the bridge: a database failure is a tool error in the seeds' shape
(``{"error", "details", "tool"}``), never a crash of the stdio process, and the bridge serves
again once the database is whole. A module of its own: it breaks its own database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from sqlalchemy import text

from gql_memory.db import Database
from tests.mcp_server.conftest import call
from tests.mcp_server.test_tools import tool_error


@asynccontextmanager
async def renamed_tables(db: Database) -> AsyncIterator[None]:
    """The working-memory and raw-dialogue tables gone for the test's duration (as a broken
    migration or an operator's mistake would leave them), restored afterwards."""
    async with db.write() as conn:
        await conn.execute(text("ALTER TABLE working_memory RENAME TO working_memory_away"))
        await conn.execute(text("ALTER TABLE raw_dialogue RENAME TO raw_dialogue_away"))
    try:
        yield
    finally:
        async with db.write() as conn:
            await conn.execute(text("ALTER TABLE working_memory_away RENAME TO working_memory"))
            await conn.execute(text("ALTER TABLE raw_dialogue_away RENAME TO raw_dialogue"))


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("update_working_memory", {"content": "kept?", "importance": 0.5}),
        ("store_raw_dialogue", {"session_id": "s", "speaker": "user", "content": "hello"}),
    ],
)
async def test_a_database_error_is_reported_in_the_seeds_shape_and_the_bridge_recovers(
    mcp: Client, db: Database, tool: str, arguments: dict[str, object]
) -> None:
    async with renamed_tables(db):
        body = await tool_error(mcp, tool, **arguments)
        assert body["error"] == "Database operation failed"
        # the exception's type, never its message (SQL, table names, values)
        assert body["details"].endswith("; see the server log")
        assert "working_memory" not in body["details"] and "hello" not in body["details"]
    assert "error" not in await call(mcp, tool, **arguments)  # served again
