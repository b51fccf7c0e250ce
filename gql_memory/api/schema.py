"""Schema assembly: types, resolvers and the abuse-limit extensions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    DisableIntrospection,
    MaxTokensLimiter,
    ParserCache,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StreamResult
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.execution import PreExecutionError

from gql_memory.api.consolidation import ConsolidationMutations, ConsolidationQueries
from gql_memory.api.context import ContextQueries
from gql_memory.api.erasure import ErasureMutations
from gql_memory.api.errors import annotate, log_errors
from gql_memory.api.extensions.aliases import AliasLimit
from gql_memory.api.extensions.cost import QueryCost
from gql_memory.api.extensions.depth import QueryDepthLimit
from gql_memory.api.extensions.operation_log import OperationRecorder
from gql_memory.api.extensions.operation_name_required import OperationNameRequired
from gql_memory.api.extensions.persisted_registration import PersistedQueryRegistration
from gql_memory.api.extensions.scope_guard import ScopeGuard
from gql_memory.api.extensions.subscriptions_over_streams import SubscriptionsOverStreams
from gql_memory.api.extensions.validation_cache import ValidDocumentCache
from gql_memory.api.extraction import ExtractionMutations
from gql_memory.api.graph import GraphMutations, GraphQueries
from gql_memory.api.raw import RawMutations, RawQueries
from gql_memory.api.search import SearchQueries
from gql_memory.api.semantic import SemanticMutations, SemanticQueries
from gql_memory.api.stale import StaleQueries
from gql_memory.api.stats import StatsQueries
from gql_memory.api.storable_strings import StorableStrings
from gql_memory.api.subscriptions import MemorySubscriptions
from gql_memory.api.working import WorkingMutations, WorkingQueries
from gql_memory.config import Settings
from gql_memory.errors import GqlMemoryError, RequestTimeoutError, ValidationError

log = logging.getLogger(__name__)

# Each layer's API module contributes a query and a mutation class; the schema merges them,
# so a new layer adds its own module and one entry here. The order is the order of the
# fields in the SDL.
QUERY_TYPES: tuple[type, ...] = (
    WorkingQueries,
    StaleQueries,
    RawQueries,
    StatsQueries,
    SemanticQueries,
    GraphQueries,
    SearchQueries,
    ContextQueries,
    ConsolidationQueries,
)
MUTATION_TYPES: tuple[type, ...] = (
    RawMutations,
    WorkingMutations,  # archiving to stale memory and restoring from it too
    ErasureMutations,
    SemanticMutations,
    GraphMutations,
    ExtractionMutations,
    ConsolidationMutations,
)
SUBSCRIPTION_TYPES: tuple[type, ...] = (MemorySubscriptions,)

Query = strawberry.type(
    type("Query", QUERY_TYPES, {}),
    description="Read operations. Each query runs in a READ ONLY transaction: it never writes.",
)
Mutation = strawberry.type(
    type("Mutation", MUTATION_TYPES, {}),
    description="Write operations. Each mutation is one transaction: all or nothing.",
)
Subscription = strawberry.type(
    type("Subscription", SUBSCRIPTION_TYPES, {}),
    description="Live streams over graphql-transport-ws (WebSocket at /graphql), graphql-sse "
    "(POST /graphql with 'Accept: text/event-stream') or Apollo's multipart HTTP "
    "subscriptions. Subscriptions only read; events come from committed writes on any server "
    "of the deployment.",
)


class MemorySchema(strawberry.Schema):
    """Logs internal errors once, with the request id, then masks and codes every error;
    holds every query and mutation to the request deadline."""

    request_timeout_s: float = 0.0
    max_document_chars: int = 256 * 1024

    async def execute(self, query: str | None, *args: Any, **kwargs: Any) -> ExecutionResult:
        """HTTP operations. A document over the size limit is refused before it is parsed.
        Past the deadline the operation is cancelled: its resolvers stop, asyncpg cancels
        the running statement on the server, the transaction rolls back and the pooled
        connection goes back. The caller gets TIMEOUT."""
        context = kwargs.get("context_value")
        query, refusal = self._document(query, kwargs)
        if refusal is not None:
            return ExecutionResult(data=None, errors=[refusal])
        if not self.request_timeout_s:
            return await super().execute(query, *args, **kwargs)
        try:
            async with asyncio.timeout(self.request_timeout_s) as deadline:
                return await super().execute(query, *args, **kwargs)
        except TimeoutError:
            if not deadline.expired():
                raise  # a timeout of the work itself, not the deadline
        message = (
            f"The request ran past its deadline of {self.request_timeout_s:g} s and was "
            "cancelled (a transaction still open was rolled back)"
        )
        log.warning("request %s cancelled at its deadline", getattr(context, "request_id", None))
        error = self._coded(RequestTimeoutError(message), context)
        return ExecutionResult(data=None, errors=[error])

    async def stream(self, query: str | None, *args: Any, **kwargs: Any) -> StreamResult:
        """WebSocket and HTTP stream operations: a document over the size limit is refused
        before parsing."""
        query, refusal = self._document(query, kwargs)
        if refusal is not None:
            error = refusal

            async def refused() -> AsyncGenerator[ExecutionResult, None]:
                yield PreExecutionError(data=None, errors=[error])

            return refused()
        return await super().stream(query, *args, **kwargs)

    def _document(self, query: str | None, kwargs: dict[str, Any]) -> tuple[str | None, Any]:
        """(the document to run, or the coded refusal): a document over the size limit is
        refused before it is parsed; a persisted document id (trusted document, APQ hash) is
        resolved for the caller's namespace (gql_memory.api.persisted). An unauthenticated
        caller's document passes unresolved: the ScopeGuard refuses it."""
        context = kwargs.get("context_value")
        if refusal := document_too_large(query, self.max_document_chars):
            return query, self._coded(refusal, context)
        documents = getattr(context, "documents", None)
        credentials = getattr(context, "credentials", None)
        principal = getattr(credentials, "principal", None)
        if documents is None or principal is None:
            return query, None
        try:
            extensions = kwargs.get("operation_extensions") or {}
            return documents.resolve(principal.namespace, query, extensions), None
        except GqlMemoryError as exc:
            return query, self._coded(exc, context)

    @staticmethod
    def _coded(error: Exception, context: Any) -> GraphQLError:
        coded = GraphQLError(str(error), original_error=error)
        annotate(coded, getattr(context, "request_id", None))
        return coded

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context = execution_context.context if execution_context else None
        request_id = getattr(context, "request_id", None)
        log_errors(errors, request_id)
        # every transport (HTTP JSON, websocket messages) then shows the same coded error
        for error in errors:
            annotate(error, request_id)


def document_too_large(query: str | None, max_chars: int) -> ValidationError | None:
    """The refusal of a GraphQL document longer than ``max_chars``, checked before parsing.

    graphql-core's lexer reads a document character by character in Python on the event loop
    (a 1 MB string literal: ~0.5 s; the 16 MB body limit: ~8 s). Large values belong in
    variables, which are JSON-decoded in C; the document itself stays small."""
    if query is None or len(query) <= max_chars:
        return None
    return ValidationError(
        f"The GraphQL document has {len(query)} characters, more than the limit of "
        f"{max_chars} (GQL_MEMORY_MAX_DOCUMENT_CHARS): send large values as variables"
    )


def build_schema(
    settings: Settings | None = None,
    extra_extensions: Sequence[Callable[[], SchemaExtension]] = (),
) -> strawberry.Schema:
    """The GraphQL schema; limits come from settings (the SDL does not depend on them).

    ``extra_extensions`` are added by the app (e.g. operation metrics).
    """
    settings = settings or Settings()
    extensions: list[type[SchemaExtension] | Callable[[], SchemaExtension]] = [
        OperationRecorder,  # names each operation in the access log, even refused ones
        # Before anything else runs: every operation of every layer is authenticated and
        # scope-checked here, so new fields inherit the protection by construction.
        ScopeGuard,
        # agents send the same few documents over and over: parse each once
        lambda: ParserCache(maxsize=256),
        lambda: QueryDepthLimit(settings.max_query_depth),
        lambda: MaxTokensLimiter(max_token_count=settings.max_query_tokens),
        lambda: AliasLimit(settings.max_aliases),
        lambda: QueryCost(
            settings.max_query_cost,
            settings.default_page_size,
            settings.working_memory_capacity,
            settings.search_interpret_time,
        ),
        # every string of the operation and its variables, before any resolver reaches SQL
        StorableStrings,
        SubscriptionsOverStreams,
        OperationNameRequired,
    ]
    if not settings.introspection:
        extensions.append(DisableIntrospection)
    extensions.extend(extra_extensions)
    extensions.append(ValidDocumentCache)  # last: it sees the complete rule set
    # after every check of on_execute: only an admitted operation registers its APQ document
    extensions.append(PersistedQueryRegistration)
    schema = MemorySchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        extensions=extensions,
        config=StrawberryConfig(disable_field_suggestions=not settings.introspection),
    )
    schema.request_timeout_s = settings.request_timeout_s
    schema.max_document_chars = settings.max_document_chars
    return schema


def export_sdl() -> str:
    """The schema as SDL, exactly as checked in to schema.graphql."""
    return build_schema().as_str() + "\n"
