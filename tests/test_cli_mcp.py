"""`gql-memory mcp` keeps stdout for the protocol and logs on stderr as the server does: one
JSON object per line (or the classic text lines with GQL_MEMORY_LOG_FORMAT=text)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.conftest import ROOT

TIMEOUT_S = 60  # a hang guard: importing, connecting the store and the handshake


async def talk(database_url: str, stderr: Path, **env: str) -> list[dict[str, Any]]:
    """Initialize a `gql-memory mcp` process, store a turn through it, close its stdin; the
    messages it wrote on stdout. Its stderr goes to ``stderr``."""
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "test_cli_mcp", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "store_raw_dialogue",
                "arguments": {"session_id": "logs", "speaker": "user", "content": "hello"},
            },
        },
    ]
    with stderr.open("wb") as errors:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gql_memory",
            "mcp",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
            env={**os.environ, "DATABASE_URL": database_url, **env},
            cwd=ROOT,
        )
        assert process.stdin is not None and process.stdout is not None
        messages = []
        for frame in frames:
            process.stdin.write(json.dumps(frame).encode() + b"\n")
            await process.stdin.drain()
            if "id" in frame:  # a request: wait for its answer before the next frame
                line = await asyncio.wait_for(process.stdout.readline(), TIMEOUT_S)
                messages.append(json.loads(line))
        process.stdin.close()
        messages += [json.loads(line) async for line in process.stdout]
        assert await asyncio.wait_for(process.wait(), TIMEOUT_S) == 0
    return messages


async def test_mcp_logs_json_lines_on_stderr(database_url: str, tmp_path: Path) -> None:
    stderr = tmp_path / "stderr"
    messages = await talk(
        database_url, stderr, GQL_MEMORY_LOG_LEVEL="INFO", GQL_MEMORY_LOG_FORMAT="json"
    )
    assert [m.get("id") for m in messages] == [1, 2], messages
    assert all(m["jsonrpc"] == "2.0" for m in messages)  # stdout: the protocol alone
    lines = stderr.read_text().splitlines()
    assert lines, "no log line at INFO"
    records = [json.loads(line) for line in lines]  # fails on any line that is not JSON
    assert all({"ts", "level", "logger", "msg"} <= record.keys() for record in records)
    assert any(record["logger"].startswith("gql_memory") for record in records), records


async def test_mcp_logs_text_lines_when_asked(database_url: str, tmp_path: Path) -> None:
    stderr = tmp_path / "stderr"
    await talk(database_url, stderr, GQL_MEMORY_LOG_LEVEL="INFO", GQL_MEMORY_LOG_FORMAT="text")
    lines = stderr.read_text().splitlines()
    assert lines and not any(line.startswith("{") for line in lines), lines
    assert any(" INFO gql_memory" in line for line in lines), lines
