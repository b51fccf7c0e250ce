"""Notes each GraphQL operation's name and type on the context, for the access log."""

from __future__ import annotations

from collections.abc import Iterator

from strawberry.extensions import SchemaExtension

MAX_NAME_CHARS = 100


class OperationRecorder(SchemaExtension):
    """Appends ``"<type> <name>"`` to ``Context.operations`` (which the view shares with the
    request's state, read by the access log)."""

    def on_operation(self) -> Iterator[None]:
        try:
            yield
        finally:
            execution = self.execution_context
            operations = getattr(execution.context, "operations", None)
            if isinstance(operations, list):
                try:
                    kind = execution.operation_type.value
                except Exception:  # the document did not parse or names no such operation
                    kind = "invalid"
                name = str(execution.operation_name or "anonymous")[:MAX_NAME_CHARS]
                operations.append(f"{kind} {name}")
