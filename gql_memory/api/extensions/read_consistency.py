"""Read-your-writes over GraphQL when queries read on replicas (gql_memory.db.replicas).

A mutation runs on the primary, its reads too, and reports its commit position as
``extensions.lsn``. Sent back with a later request, as the ``X-Read-After-LSN`` header or the
request extension ``readAfterLsn``, the position makes that request's reads wait for a
replica that has replayed it (or go to the primary). In a batch, the operations after a
mutation see it without asking. In the schema only when read replicas are configured.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from gql_memory.db.positions import ReadSession, format_lsn, parse_lsn, read_session
from gql_memory.errors import ValidationError

READ_AFTER_LSN_HEADER = "x-read-after-lsn"
READ_AFTER_LSN_EXTENSION = "readAfterLsn"
LSN_RESULT = "lsn"


class ReadConsistency(SchemaExtension):
    """Routes each operation's reads: a mutation's to the primary, a query's to a replica
    that has replayed the position the client asked for."""

    def __init__(self) -> None:
        self._session: ReadSession | None = None

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is None or (
            context.operation_type is OperationType.SUBSCRIPTION
        ):
            yield
            return
        # an invalid position refuses the operation (BAD_USER_INPUT) before anything runs
        asked = requested_position(context.context, context.operation_extensions)
        # Context.read_after_lsn: the newest commit of this request (a batch's earlier mutations)
        session = ReadSession(
            after_lsn=max(asked, getattr(context.context, "read_after_lsn", 0)),
            prefer_primary=context.operation_type is OperationType.MUTATION,
        )
        with read_session(session):
            yield
        self._session = session
        if session.last_commit_lsn and hasattr(context.context, "read_after_lsn"):
            context.context.read_after_lsn = session.after_lsn

    def get_results(self) -> dict[str, Any]:
        if self._session is None or not self._session.last_commit_lsn:
            return {}
        return {LSN_RESULT: format_lsn(self._session.last_commit_lsn)}


def requested_position(context: Any, operation_extensions: dict[str, Any] | None) -> int:
    """The position a client sent back (header or request extension; the later of both)."""
    request = getattr(context, "request", None)
    values = [
        request.headers.get(READ_AFTER_LSN_HEADER) if request is not None else None,
        (operation_extensions or {}).get(READ_AFTER_LSN_EXTENSION),
    ]
    position = 0
    for value in values:
        if value is None:
            continue
        try:
            position = max(position, parse_lsn(value if isinstance(value, str) else ""))
        except ValueError:
            raise ValidationError(
                f"{READ_AFTER_LSN_HEADER} / extensions.{READ_AFTER_LSN_EXTENSION} must be a "
                f"commit position as a mutation returned it in extensions.{LSN_RESULT} "
                "(such as 0/3000060)"
            ) from None
    return position
