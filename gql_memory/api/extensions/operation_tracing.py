"""A schema extension that makes each GraphQL operation an OpenTelemetry span (only added
when tracing is on, gql_memory.tracing).

The span is a server span, child of the caller's ``traceparent`` when the request has one,
named ``"<gen_ai.operation.name> <root field>"`` (``search_memory search``, ``create_memory
addWorkingMemory``): the root field, not the client-chosen operation name, as for the
metrics. Its attributes are the caller's namespace (``gen_ai.memory.store.id``), the
operation type, the id a write returned (``gen_ai.memory.record.id``, when selected) and,
with GQL_MEMORY_TRACE_CONTENT, the ``query`` variable. Embedding calls
and database statements run inside it and become its children.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode
from strawberry.extensions import SchemaExtension

from gql_memory.api.errors import classify
from gql_memory.api.extensions.operation_metrics import operation_labels
from gql_memory.tracing.conventions import (
    ERROR_TYPE,
    GRAPHQL_OPERATION_TYPE,
    MEMORY_RECORD_ID,
    MEMORY_STORE_ID,
    OPERATION_NAME,
    SEARCH_MEMORY,
)
from gql_memory.tracing.operations import memory_operation
from gql_memory.tracing.spans import Tracing

UNKNOWN_NAMESPACE = ""  # an operation refused before authentication names no store


def written_id(execution_context: Any) -> str | None:
    """The ``id`` a mutation's one root field returned, when the client selected it (or
    ``addedId``, working memory's)."""
    data = getattr(execution_context.result, "data", None)
    if not isinstance(data, dict) or len(data) != 1:
        return None
    [value] = data.values()
    if not isinstance(value, dict):
        return None
    found = value.get("id", value.get("addedId"))
    return None if found is None else str(found)


class OperationTracing(SchemaExtension):
    """One span per operation; one instance per operation."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    def on_operation(self) -> Iterator[None]:
        context = self.execution_context.context
        request = getattr(context, "request", None)
        parent = self.tracing.extract(getattr(request, "headers", None))
        with self.tracing.operation(
            "graphql", UNKNOWN_NAMESPACE, kind=SpanKind.SERVER, parent=parent
        ) as span:
            yield
            field, kind = operation_labels(self.execution_context)
            operation = memory_operation(field)
            span.update_name(f"{operation} {field}")
            span.set_attribute(OPERATION_NAME, operation)
            span.set_attribute(GRAPHQL_OPERATION_TYPE, kind)
            principal = getattr(getattr(context, "credentials", None), "principal", None)
            if principal is not None:
                span.set_attribute(MEMORY_STORE_ID, principal.namespace)
            if operation != SEARCH_MEMORY and (written := written_id(self.execution_context)):
                span.set_attribute(MEMORY_RECORD_ID, written)
            variables: Any = self.execution_context.variables or {}
            self.tracing.record_content(span, query=variables.get("query"))
            errors = self.execution_context.pre_execution_errors or getattr(
                self.execution_context.result, "errors", None
            )
            if errors:  # the first error's code, never its message (it may quote input)
                code, _ = classify(errors[0])
                span.set_attribute(ERROR_TYPE, code)
                span.set_status(Status(StatusCode.ERROR, code))
