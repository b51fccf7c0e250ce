"""Notes each GraphQL operation's name and type on the request, for the access log."""

from __future__ import annotations

from collections.abc import Iterator

from strawberry.extensions import SchemaExtension

OPERATIONS_STATE_KEY = "graphql_operations"
MAX_NAME_CHARS = 100


class OperationRecorder(SchemaExtension):
    """Appends ``"<type> <name>"`` to ``scope["state"]["graphql_operations"]`` of the request."""

    def on_operation(self) -> Iterator[None]:
        try:
            yield
        finally:
            execution = self.execution_context
            request = getattr(execution.context, "request", None)
            scope = getattr(request, "scope", None)
            if isinstance(scope, dict):
                try:
                    kind = execution.operation_type.value
                except Exception:  # the document did not parse or names no such operation
                    kind = "invalid"
                name = str(execution.operation_name or "anonymous")[:MAX_NAME_CHARS]
                scope.setdefault("state", {}).setdefault(OPERATIONS_STATE_KEY, []).append(
                    f"{kind} {name}"
                )
