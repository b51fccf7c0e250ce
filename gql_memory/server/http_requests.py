"""What a GraphQL HTTP request may carry: one operation or a batch (a JSON array, at most
``GQL_MEMORY_MAX_BATCH``), each with a ``query`` or a trusted ``documentId``.

Malformed parameters are refused whole with 400 and a code, before anything runs; a
``documentId`` travels on as ``extensions.documentId`` for the persisted-document lookup
(gql_memory.api.persisted), so every transport resolves documents in one place.
"""

from __future__ import annotations

from typing import Any

from cross_web import HTTPException
from strawberry.http import GraphQLRequestData, GraphQLRequestProtocol

DOCUMENT_ID = "documentId"


class RequestRefused(HTTPException):
    """A whole HTTP request refused before any operation runs, with its error code."""

    def __init__(self, status_code: int, reason: str, code: str = "BAD_USER_INPUT") -> None:
        super().__init__(status_code, reason)
        self.code = code


def check_batch(operations: list[Any], max_batch: int, streaming_error: str | None) -> None:
    """A batch is refused whole when it is empty, too long, or sent to a stream transport."""
    if streaming_error is not None:
        raise RequestRefused(400, streaming_error)
    if not operations:
        raise RequestRefused(400, "The batch is empty: send at least one operation")
    if len(operations) > max_batch:
        raise RequestRefused(
            400,
            f"The batch has {len(operations)} operations, more than the limit of {max_batch} "
            "(GQL_MEMORY_MAX_BATCH): split it, nothing was run",
            code="BATCH_TOO_LARGE",
        )


def _optional(params: dict[str, Any], name: str, kind: type, described: str) -> Any:
    value = params.get(name)
    if value is not None and not isinstance(value, kind):
        raise RequestRefused(400, f"The operation's `{name}` must be {described} or null")
    return value


def operation_data(params: object, protocol: GraphQLRequestProtocol) -> GraphQLRequestData:
    """One operation's parameters, type-checked (GraphQL over HTTP, "Request Parameters")."""
    if not isinstance(params, dict):
        raise RequestRefused(400, "Each operation must be a JSON object")
    query = _optional(params, "query", str, "a string")
    variables = _optional(params, "variables", dict, "an object")
    extensions = _optional(params, "extensions", dict, "an object")
    operation_name = _optional(params, "operationName", str, "a string")
    document_id = _optional(params, DOCUMENT_ID, str, "a string")
    if document_id is not None:
        extensions = {**(extensions or {}), DOCUMENT_ID: document_id}
    return GraphQLRequestData(
        query=query,
        variables=variables,
        operation_name=operation_name,
        extensions=extensions,
        protocol=protocol,
    )
