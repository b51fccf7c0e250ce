"""A schema extension that counts and times GraphQL operations and counts their errors.

The ``operation`` label is the root field (``addWorkingMemory``, ``search`` ...): the
operation names of the API contract, a bounded set. Client-chosen operation names
(``query MyDashboard``) would let any client create unbounded label values, so they are not
used; a document with several root fields is ``multiple``, one that names no known root
field ``unknown``. Subscriptions are counted when they start and their stream's errors
as they happen; their latency (the subscription's lifetime) is not a request latency.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Protocol

from graphql import FieldNode, GraphQLError, get_operation_ast
from strawberry.extensions import SchemaExtension
from strawberry.types import ExecutionContext

from gql_memory.api.errors import classify

SUBSCRIPTION = "subscription"


class Count(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class Observation(Protocol):
    def observe(self, amount: float) -> None: ...


class CounterFamily(Protocol):
    def labels(self, *labelvalues: str) -> Count: ...


class HistogramFamily(Protocol):
    def labels(self, *labelvalues: str) -> Observation: ...


class GraphQLMetrics(Protocol):
    """The metrics this extension feeds (prometheus_client's, in server/metrics.Metrics)."""

    @property
    def requests(self) -> CounterFamily: ...  # by operation and type

    @property
    def request_seconds(self) -> HistogramFamily: ...  # by operation and type

    @property
    def errors(self) -> CounterFamily: ...  # by operation and error code


def operation_labels(execution_context: ExecutionContext) -> tuple[str, str]:
    """(operation, type) of an execution: the root field name and query/mutation/subscription."""
    document = execution_context.graphql_document
    if document is None:
        return "invalid", "unknown"
    operation = get_operation_ast(document, execution_context.operation_name)
    if operation is None:
        return "invalid", "unknown"
    kind = operation.operation.value
    schema = execution_context.schema._schema
    root = {
        "query": schema.query_type,
        "mutation": schema.mutation_type,
        "subscription": schema.subscription_type,
    }.get(kind)
    selections = operation.selection_set.selections
    if len(selections) > 1:
        return "multiple", kind
    field = selections[0] if selections else None
    if isinstance(field, FieldNode) and root is not None and field.name.value in root.fields:
        return field.name.value, kind
    return "unknown", kind


class OperationMetrics(SchemaExtension):
    """Feeds gql_memory_graphql_* metrics; one instance per operation."""

    def __init__(self, metrics: GraphQLMetrics) -> None:
        self.metrics = metrics
        self._started = False

    def on_operation(self) -> Iterator[None]:
        begun = time.perf_counter()
        yield
        operation, kind = operation_labels(self.execution_context)
        if kind == SUBSCRIPTION:
            if not self._started:  # rejected before it started (e.g. validation failed)
                self.metrics.requests.labels(operation, kind).inc()
            return
        self.metrics.requests.labels(operation, kind).inc()
        self.metrics.request_seconds.labels(operation, kind).observe(time.perf_counter() - begun)
        self._count_errors(operation, self._errors())

    def on_execute(self) -> Iterator[None]:
        yield
        operation, kind = operation_labels(self.execution_context)
        if kind == SUBSCRIPTION:
            self._started = True
            self.metrics.requests.labels(operation, kind).inc()

    def on_stream_result(self, result: Any) -> Iterator[None]:
        operation, kind = operation_labels(self.execution_context)
        if kind == SUBSCRIPTION:
            self._count_errors(operation, getattr(result, "errors", None) or [])
        yield

    def _errors(self) -> list[GraphQLError]:
        context = self.execution_context
        if context.pre_execution_errors:
            return list(context.pre_execution_errors)
        result = context.result
        return list(getattr(result, "errors", None) or [])

    def _count_errors(self, operation: str, errors: list[GraphQLError]) -> None:
        for error in errors:
            code, _ = classify(error)
            self.metrics.errors.labels(operation, code).inc()
