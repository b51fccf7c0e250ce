"""How an operation must arrive: subscriptions over WebSocket only (graphql-transport-ws at
/graphql), and a document with several operations with the name of the one to run.

A subscription sent as a plain HTTP request would run its stream resolver as if it were a
query and end in an internal error; it is refused up front with a code and the way to do it.
"""

from __future__ import annotations

from collections.abc import Iterator

from graphql import OperationDefinitionNode
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from gql_memory.errors import ValidationError


class SubscriptionsOverWebSocket(SchemaExtension):
    """BAD_USER_INPUT for a subscription operation that did not come over a WebSocket."""

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        over_websocket = getattr(execution.context, "refresh_credentials", None) is not None
        if execution.operation_type is OperationType.SUBSCRIPTION and not over_websocket:
            raise ValidationError(
                "Subscriptions are served over WebSocket (graphql-transport-ws) at /graphql, "
                "not over HTTP requests"
            )
        yield


class OperationNameRequired(SchemaExtension):
    """A document with several operations must name the one to run (GraphQL spec, "Executing
    Requests"); without ``operationName`` it is refused instead of running the first."""

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        document = execution.graphql_document
        # strawberry's operation_name falls back to the first operation's name: ask for the
        # name the request itself provided
        if document is not None and not getattr(execution, "_provided_operation_name", None):
            operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
            if len(operations) > 1:
                raise ValidationError(
                    "The document has several operations: send operationName to choose one"
                )
        yield
