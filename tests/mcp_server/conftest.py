"""A real `gql-memory mcp` process per test module, spoken to over stdio by the mcp client."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest_asyncio
from mcp import Client
from mcp.client import Transport
from mcp.client.stdio import StdioServerParameters

from gql_memory.db import Database
from tests.conftest import ROOT, truncate_all


def server_parameters(*args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gql_memory", "mcp", *args],
        env={"GQL_MEMORY_EMBEDDING_PROVIDER": "hash", "GQL_MEMORY_LOG_LEVEL": "WARNING", **env},
        cwd=str(ROOT),
    )


@asynccontextmanager
async def mcp_client(parameters: StdioServerParameters | Transport) -> AsyncIterator[Client]:
    """A connected client, entered and exited in one background task (anyio's task groups
    must be left by the task that entered them; fixtures set up and tear down in others).
    ``parameters`` may be a transport of its own (``stdio_client(..., errlog=...)`` keeps the
    server's log)."""
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with Client(parameters, read_timeout_seconds=60) as client:
                ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(hold())
    try:
        yield await ready
    finally:
        stop.set()
        await task


@pytest_asyncio.fixture(scope="module")
async def mcp_server(database_url: str) -> AsyncIterator[Client]:
    async with mcp_client(server_parameters(DATABASE_URL=database_url)) as client:
        yield client


@pytest_asyncio.fixture
async def mcp(mcp_server: Client, db: Database) -> Client:
    """The MCP client of this module's server, on an emptied database."""
    await truncate_all(db)
    return mcp_server


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """A tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def read(client: Client, uri: str) -> Any:
    """A resource's JSON body."""
    result = await client.read_resource(uri)
    [content] = result.contents
    assert content.mime_type == "application/json"
    return json.loads(content.text)  # type: ignore[union-attr]
