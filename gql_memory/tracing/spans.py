"""Spans of memory operations: one per library call, GraphQL operation or MCP tool call,
named ``"<gen_ai.operation.name> <call>"`` (``search_memory search``, ``create_memory
working.add``), with the store (namespace) and record ids; query texts and contents only
with GQL_MEMORY_TRACE_CONTENT."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import propagate
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from gql_memory.tracing.conventions import (
    ERROR_TYPE,
    MEMORY_QUERY_TEXT,
    MEMORY_RECORD_ID,
    MEMORY_RECORDS,
    MEMORY_STORE_ID,
    OPERATION_NAME,
    SEARCH_MEMORY,
)
from gql_memory.tracing.operations import memory_operation

T = TypeVar("T")
Attributes = dict[str, str | bool | int | float]

# What a call the service does not have is named (an MCP tool; GraphQL's unknown root fields
# are "unknown" too, api/extensions/operation_metrics.py): never the name a client sent.
UNKNOWN_CALL = "unknown"
# The longest call name a span carries, whoever names the call.
MAX_CALL_CHARS = 100


def record_id(result: Any) -> int | None:
    """The id of the memory a write returned (a row, or working memory's ``added_id``)."""
    for name in ("id", "added_id"):
        value = getattr(result, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


class Tracing:
    """The tracer of this process and whether spans may carry tenant content."""

    def __init__(self, tracer: Tracer, content: bool) -> None:
        self.tracer = tracer
        self.content = content

    @contextmanager
    def operation(
        self,
        call: str,
        namespace: str,
        *,
        operation: str | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        parent: Context | None = None,
        attributes: Attributes | None = None,
    ) -> Iterator[Span]:
        """The span of one memory operation, current while the block runs. A failure sets
        the status and ``error.type`` to the exception's type only (its message may quote
        the caller's input)."""
        call = call[:MAX_CALL_CHARS]
        operation = operation or memory_operation(call.rsplit(".", 1)[-1])
        with self.tracer.start_as_current_span(
            f"{operation} {call}",
            context=parent,
            kind=kind,
            attributes={
                OPERATION_NAME: operation,
                MEMORY_STORE_ID: namespace,
                **(attributes or {}),
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                failed(span, exc)
                raise

    def extract(self, headers: Mapping[str, str] | None) -> Context | None:
        """The caller's trace context from ``traceparent`` / ``tracestate`` (W3C, or what
        OTEL_PROPAGATORS names); None without headers."""
        if headers is None:
            return None
        return propagate.extract(headers)

    def record_content(self, span: Span, query: Any = None, content: Any = None) -> None:
        """The query text and the memory's content, when GQL_MEMORY_TRACE_CONTENT allows."""
        if not self.content:
            return
        if isinstance(query, str):
            span.set_attribute(MEMORY_QUERY_TEXT, query)
        if isinstance(content, str):
            span.set_attribute(MEMORY_RECORDS, json.dumps([{"content": content}]))

    def wrap(
        self, fn: Callable[..., Awaitable[T]], call: str, namespace: str
    ) -> Callable[..., Awaitable[T]]:
        """``fn`` (a coroutine function of the library) with a span around each call."""
        operation = memory_operation(call.rsplit(".", 1)[-1])
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def traced(*args: Any, **kwargs: Any) -> T:
            with self.operation(call, namespace, operation=operation) as span:
                if self.content:
                    given = signature.bind_partial(*args, **kwargs).arguments
                    self.record_content(span, given.get("query"), given.get("content"))
                result = await fn(*args, **kwargs)
                if operation != SEARCH_MEMORY:
                    found = record_id(result)
                    if found is None and args and isinstance(args[0], int):
                        found = args[0]  # delete(id), invalidate(id), restore(id) ...
                    if found is not None:
                        span.set_attribute(MEMORY_RECORD_ID, str(found))
                return result

        return traced


def failed(span: Span, exc: BaseException) -> None:
    span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
