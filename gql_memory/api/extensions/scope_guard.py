"""Scopes for GraphQL: every operation admitted or refused by its type, over every transport.

Query and subscription need ``read``, mutation needs ``write``, over HTTP and websockets
alike, so a field added by any layer is protected without a line of its own. The namespace
every resolver sees comes from the principal (``Context.memory``), never from the request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from gql_memory.api.info import Credentials
from gql_memory.errors import ForbiddenError
from gql_memory.keys import Principal, Scope

OPERATION_SCOPES = {
    OperationType.QUERY: Scope.READ,
    OperationType.SUBSCRIPTION: Scope.READ,
    OperationType.MUTATION: Scope.WRITE,
}


class ScopeGuard(SchemaExtension):
    """Refuses an operation whose caller is unauthenticated or lacks the operation's scope.

    Over HTTP, authentication is checked before the document is even parsed (an anonymous
    caller learns nothing, not even validation messages); the scope (and, on websockets, the
    re-checked key) once the operation type is known.
    """

    async def on_operation(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        refresh = getattr(context, "refresh_credentials", None)
        if refresh is not None:
            # A websocket: its key may have been revoked since connection_init. Refused in
            # on_execute (strawberry drops errors raised here on websockets without a word).
            context.credentials = await refresh(self._credentials())
        else:
            self._admit(self._credentials().require())  # before parsing: refusals are cheap
        yield

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        principal = self._credentials().require()
        if getattr(execution.context, "refresh_credentials", None) is not None:
            self._admit(principal)
        needed = OPERATION_SCOPES[execution.operation_type]
        if not principal.allows(needed):
            raise ForbiddenError(
                f"This API key lacks the '{needed.value}' scope needed for "
                f"{execution.operation_type.value} operations"
            )
        yield

    def _admit(self, principal: Principal) -> None:
        """The key's request rate (GQL_MEMORY_RATE_LIMIT_PER_S); anonymous local callers
        have no key and no limit."""
        limiter = getattr(self.execution_context.context, "rate_limiter", None)
        if limiter is not None and principal.key_id is not None:
            limiter.admit(principal.key_id)

    def _credentials(self) -> Credentials:
        credentials = getattr(self.execution_context.context, "credentials", None)
        if not isinstance(credentials, Credentials):
            return Credentials(None)  # fail closed: no credentials, no access
        return credentials
