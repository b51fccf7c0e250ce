"""Subscriptions only over a streaming transport: graphql-transport-ws over WebSocket,
graphql-sse or multipart over HTTP.

A subscription sent as a plain HTTP request would run its stream resolver as if it were a
query and end in an internal error; it is refused up front with a code and the way to do it.
"""

from __future__ import annotations

from collections.abc import Iterator

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
