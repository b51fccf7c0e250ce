"""A document with several operations must say which one to run (``operationName``)."""

from __future__ import annotations

from collections.abc import Iterator

from graphql import OperationDefinitionNode
from strawberry.extensions import SchemaExtension

from gql_memory.errors import ValidationError


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
