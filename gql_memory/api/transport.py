"""Subscriptions are served over WebSocket only (graphql-transport-ws at /graphql).

A subscription sent as a plain HTTP request would run its stream resolver as if it were a
query and end in an internal error; it is refused up front with a code and the way to do it.
"""

from __future__ import annotations

from collections.abc import Iterator

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
