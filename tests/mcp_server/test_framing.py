"""Malformed frames on the stdio bridge: each gets the JSON-RPC 2.0 error the spec prescribes
(-32700 parse error, -32600 invalid request; id null when it cannot be read) and the bridge
keeps serving. Spoken to byte by byte, since an MCP client never sends a malformed frame."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.mcp_server.conftest import server_parameters

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# Hang guards, not performance bounds: without an answer the old bridge left the client
# waiting forever. Startup covers importing, connecting the store and the handshake.
STARTUP_TIMEOUT_S = 60
ANSWER_TIMEOUT_S = 10

DEEP = 100_000
MALFORMED = {
    "truncated JSON": (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/li', PARSE_ERROR, None),
    "invalid UTF-8": (b"\xff\xfe\x00\x80 garbage \xc3\x28", PARSE_ERROR, None),
    "method not a string": (b'{"jsonrpc": "2.0", "id": 7, "method": 5}', INVALID_REQUEST, 7),
    "method not a string, no id": (b'{"jsonrpc": "2.0", "method": 5}', INVALID_REQUEST, None),
    "missing jsonrpc": (b'{"id": "a-1", "method": "ping"}', INVALID_REQUEST, "a-1"),
    "id of the wrong type": (
        b'{"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}',
        INVALID_REQUEST,
        None,
    ),
    "null id": (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', INVALID_REQUEST, None),
    "fractional id": (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', INVALID_REQUEST, None),
    "a batch": (b'[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]', INVALID_REQUEST, None),
    "an empty batch": (b"[]", INVALID_REQUEST, None),
    "null": (b"null", INVALID_REQUEST, None),
    "deeply nested": (
        b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}}",
        PARSE_ERROR,
        None,
    ),
}


class Bridge:
    """A `gql-memory mcp` process spoken to as raw lines on its stdin and stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = itertools.count(1000)

    async def send(self, *frames: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(frame + b"\n" for frame in frames))
        await self.process.stdin.drain()

    async def answer(self, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        """The next response (a result or an error), past any notification."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
            assert line, "the bridge closed stdout"
            message = json.loads(line)
            if "result" in message or "error" in message:
                return message  # type: ignore[no-any-return]

    async def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = ANSWER_TIMEOUT_S
    ) -> dict[str, Any]:
        """Send a well-formed request; its result (fails on an error or a foreign answer)."""
        request_id = next(self.ids)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        await self.send(json.dumps(frame).encode())
        answer = await self.answer(timeout)
        assert answer.get("id") == request_id and "result" in answer, answer
        return answer["result"]  # type: ignore[no-any-return]

    async def tool_names(self) -> set[str]:
        return {tool["name"] for tool in (await self.request("tools/list"))["tools"]}


@pytest_asyncio.fixture(scope="module")
async def bridge(database_url: str) -> AsyncIterator[Bridge]:
    """An initialized bridge, shared by the module (it must outlive every malformed frame)."""
    parameters = server_parameters(DATABASE_URL=database_url)
    process = await asyncio.create_subprocess_exec(
        parameters.command,
        *parameters.args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **(parameters.env or {})},
        cwd=parameters.cwd,
        limit=2**24,
    )
    bridge = Bridge(process)
    try:
        initialized = await bridge.request(
            "initialize",
            {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "test_framing", "version": "0"},
            },
            timeout=STARTUP_TIMEOUT_S,
        )
        assert initialized["serverInfo"]["name"] == "gql-memory"
        await bridge.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield bridge
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), STARTUP_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()


def assert_error(answer: dict[str, Any], code: int, request_id: int | str | None) -> None:
    assert answer["jsonrpc"] == "2.0"
    assert "id" in answer and answer["id"] == request_id, answer
    assert answer["error"]["code"] == code, answer
    prefix = "Parse error" if code == PARSE_ERROR else "Invalid Request"
    assert answer["error"]["message"].startswith(prefix), answer


@pytest.mark.parametrize(("frame", "code", "request_id"), MALFORMED.values(), ids=MALFORMED)
async def test_a_malformed_frame_gets_its_error_and_the_bridge_keeps_serving(
    bridge: Bridge, frame: bytes, code: int, request_id: int | str | None
) -> None:
    await bridge.send(frame)
    assert_error(await bridge.answer(), code, request_id)
    assert "get_context" in await bridge.tool_names()


async def test_malformed_frames_in_a_row_are_each_answered_and_notifications_are_not(
    bridge: Bridge,
) -> None:
    notification = b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}'
    frames = [frame for frame, _, _ in MALFORMED.values()]
    await bridge.send(frames[0], notification, b"", *frames[1:], notification)
    for _, code, request_id in MALFORMED.values():
        assert_error(await bridge.answer(), code, request_id)
    # the next answer is the request's: neither the notifications nor the blank line got one
    assert "get_context" in await bridge.tool_names()
