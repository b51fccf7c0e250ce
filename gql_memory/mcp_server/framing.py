"""JSON-RPC framing on the stdio bridge: every line is a message, or it gets an error answer.

The SDK's stdio transport hands a line it cannot decode to the read loop as an exception that
is only logged, so a client that sent a truncated or malformed frame would wait forever.
``checked_stdio`` checks each line first: a line that is not JSON (invalid UTF-8, cut short,
nested too deep to parse) is answered with -32700, JSON that is not a JSON-RPC message with
-32600, echoing the id when it can be read, else null (JSON-RPC 2.0, section 5.1). Then it
reads on.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, BinaryIO, cast

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError


def rejection(line: bytes) -> JSONRPCError | None:
    """The error answering ``line``, or None when the SDK decodes it as a JSON-RPC message."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(PARSE_ERROR, f"Parse error: invalid UTF-8 at byte {exc.start}")
    try:
        decoded = jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the SDK does
    except ValidationError:
        decoded = None
    if decoded is not None and not isinstance(decoded, JSONRPCNotification):
        return None
    try:
        message = pydantic_core.from_json(text)
    except ValueError as exc:  # also nesting beyond the parser's recursion limit
        return _error(PARSE_ERROR, f"Parse error: {exc}")
    if decoded is not None and "id" not in message:
        return None
    # A request whose id is not a string or an integer would pass as a notification and
    # never be answered: it is an invalid request.
    return _error(INVALID_REQUEST, f"Invalid Request: {_defect(message)}", _readable_id(message))


def _defect(message: Any) -> str:
    if isinstance(message, list):
        return "batches are not supported; send one JSON object per line"
    if not isinstance(message, dict):
        return "a message must be a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "id" in message and not _is_request_id(message["id"]):
        return "id must be a string or an integer"
    return "not a JSON-RPC 2.0 request, notification or response"


def _readable_id(message: Any) -> RequestId | None:
    """The id to echo; None (null) when there is none, or when the message claims to be a
    response (its id names one of our requests, not one of the client's)."""
    if not isinstance(message, dict) or "result" in message or "error" in message:
        return None
    request_id = message.get("id")
    return request_id if _is_request_id(request_id) else None


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _error(code: int, message: str, request_id: RequestId | None = None) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


class CheckedLines:
    """The lines of stdin the SDK's reader can decode; every other line is answered on
    ``answers`` and skipped. Blank lines are skipped unanswered (they carry no frame)."""

    def __init__(
        self, wire: anyio.AsyncFile[bytes], answers: MemoryObjectSendStream[JSONRPCError]
    ) -> None:
        self._wire = wire
        self._answers = answers

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while line := await self._wire.readline():
            if not line.strip():
                continue
            error = rejection(line)
            if error is None:
                return line.decode("utf-8")
            await self._answers.send(error)
        raise StopAsyncIteration


@contextmanager
def claimed_stdin() -> Iterator[BinaryIO]:
    """The client's stdin, read from a private duplicate of fd 0.

    Meanwhile fd 0 reads the null device, so no child process (the embedded PostgreSQL) can
    consume protocol bytes, as the SDK's transport arranges when it opens stdin itself. The
    duplicate is never closed: a worker thread may still be blocked reading it at exit.
    """
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[
    tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
]:
    """The SDK's stdio transport (it still claims stdout), reading stdin through
    ``CheckedLines``; their error answers go out through the transport's one writer."""
    send_answer, answers = anyio.create_memory_object_stream[JSONRPCError]()
    with claimed_stdin() as stdin:
        lines = CheckedLines(anyio.wrap_file(stdin), send_answer)
        # stdio_server only iterates its stdin, which CheckedLines supports.
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as streams:
            read_stream, write_stream = streams
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_send_answers, answers, write_stream)
                yield read_stream, write_stream
                tasks.cancel_scope.cancel()


async def _send_answers(
    answers: MemoryObjectReceiveStream[JSONRPCError], write_stream: WriteStream[SessionMessage]
) -> None:
    async with answers:
        async for answer in answers:
            await write_stream.send(SessionMessage(answer))
