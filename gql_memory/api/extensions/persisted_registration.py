"""Registers an automatic persisted query only once its operation was admitted.

A registration keeps the document in memory for every later request that sends its hash
alone, so it is made last: after the document parsed and validated, after the rate limiter
admitted the caller, after the scope, cost and every other check of ``on_execute``. A
refused request (invalid document, 429, a mutation with a read-only key ...) registers
nothing (gql_memory.api.persisted).
"""

from __future__ import annotations

from collections.abc import Iterator

from strawberry.extensions import SchemaExtension


class PersistedQueryRegistration(SchemaExtension):
    """Registers the APQ document of an admitted operation; must be the last extension, so
    its ``on_execute`` runs after every other one has let the operation through."""

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        context = execution.context
        documents = getattr(context, "documents", None)
        principal = getattr(getattr(context, "credentials", None), "principal", None)
        extensions = execution.operation_extensions
        if documents is not None and principal is not None and extensions and execution.query:
            documents.register(principal.namespace, execution.query, extensions)
        yield
