"""How an operation must arrive: subscriptions over a streaming transport (graphql-transport-ws
over WebSocket, graphql-sse or multipart over HTTP), and a document with several operations
with the name of the one to run.

A subscription sent as a plain HTTP request would run its stream resolver as if it were a
query and end in an internal error; it is refused up front with a code and the way to do it.
"""

from __future__ import annotations

from collections.abc import Iterator

from graphql import OperationDefinitionNode
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from gql_memory.errors import ValidationError


class SubscriptionsOverStreams(SchemaExtension):
    """BAD_USER_INPUT for a subscription operation that did not come over a stream."""

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        # long-lived requests (WebSocket, SSE, multipart) re-check their key: see get_context
        streaming = getattr(execution.context, "refresh_credentials", None) is not None
        if execution.operation_type is OperationType.SUBSCRIPTION and not streaming:
            raise ValidationError(
                "Subscriptions are served over WebSocket (graphql-transport-ws), Server-Sent "
                "Events ('Accept: text/event-stream', graphql-sse) or multipart HTTP ('Accept: "
                "multipart/mixed;subscriptionSpec=1.0'), not as plain HTTP requests"
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
