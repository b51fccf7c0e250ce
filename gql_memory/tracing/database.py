"""Database statements as client spans (children of the operation that runs them), from
SQLAlchemy's cursor events. Not the SQLAlchemy instrumentation package: its 0.66b1 instruments
"sqlalchemy >= 1.0.0, < 2.1.0" only and does nothing on the 2.1 this project runs; these two
listeners need no dependency and parse nothing. The statement's text is parameterized: values
never reach a span."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind
from sqlalchemy import event
from sqlalchemy.engine import Engine

from gql_memory.tracing.conventions import DB_OPERATION_NAME, DB_QUERY_TEXT, DB_SYSTEM_NAME
from gql_memory.tracing.spans import Tracing, failed

SPAN = "_gql_memory_span"


def trace_statements(engine: Engine, tracing: Tracing) -> None:
    """A span per statement ``engine`` (a sync engine: an async engine's ``sync_engine``)
    executes."""
    tracer = tracing.tracer

    def before(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        keyword = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"
        span = tracer.start_span(
            keyword,
            kind=SpanKind.CLIENT,
            attributes={
                DB_SYSTEM_NAME: "postgresql",
                DB_OPERATION_NAME: keyword,
                DB_QUERY_TEXT: statement,
            },
        )
        setattr(context, SPAN, span)

    def after(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        span = getattr(context, SPAN, None)
        if span is not None:
            span.end()

    def error(exception_context: Any) -> None:
        span = getattr(exception_context.execution_context, SPAN, None)
        if span is not None:
            failed(span, exception_context.original_exception)
            span.end()

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    event.listen(engine, "handle_error", error)
