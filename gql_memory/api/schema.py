"""Schema assembly: types, resolvers and the abuse-limit extensions."""

from __future__ import annotations

from collections.abc import Callable

import strawberry
from graphql import GraphQLError
from strawberry.extensions import (
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from gql_memory.api.context_query import ContextQueries
from gql_memory.api.errors import log_errors
from gql_memory.api.extraction import ExtractionMutations
from gql_memory.api.graph import GraphMutations, GraphQueries
from gql_memory.api.mutations import MemoryMutations
from gql_memory.api.queries import MemoryQueries
from gql_memory.api.search import SearchQueries
from gql_memory.api.semantic import SemanticMutations, SemanticQueries
from gql_memory.config import Settings

# Each layer's API module contributes a query and a mutation class; the schema merges them,
# so a new layer adds its own module and one entry here.
QUERY_TYPES: tuple[type, ...] = (
    MemoryQueries,
    SemanticQueries,
    GraphQueries,
    SearchQueries,
    ContextQueries,
)
MUTATION_TYPES: tuple[type, ...] = (
    MemoryMutations,
    SemanticMutations,
    GraphMutations,
    ExtractionMutations,
)

Query = strawberry.type(
    type("Query", QUERY_TYPES, {}),
    description="Read operations. Each query runs in a READ ONLY transaction: it never writes.",
)
Mutation = strawberry.type(
    type("Mutation", MUTATION_TYPES, {}),
    description="Write operations. Each mutation is one transaction: all or nothing.",
)


class MemorySchema(strawberry.Schema):
    """Logs internal errors once, with the request id, instead of strawberry's default."""

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context = execution_context.context if execution_context else None
        log_errors(errors, getattr(context, "request_id", None))


def build_schema(settings: Settings | None = None) -> strawberry.Schema:
    """The GraphQL schema; limits come from settings (the SDL does not depend on them)."""
    settings = settings or Settings()
    extensions: list[type[SchemaExtension] | Callable[[], SchemaExtension]] = [
        lambda: QueryDepthLimiter(max_depth=settings.max_query_depth),
        lambda: MaxTokensLimiter(max_token_count=settings.max_query_tokens),
        lambda: MaxAliasesLimiter(max_alias_count=settings.max_aliases),
    ]
    if not settings.introspection:
        extensions.append(DisableIntrospection)
    return MemorySchema(
        query=Query,
        mutation=Mutation,
        extensions=extensions,
        config=StrawberryConfig(disable_field_suggestions=not settings.introspection),
    )


def export_sdl() -> str:
    """The schema as SDL, exactly as checked in to schema.graphql."""
    return build_schema().as_str() + "\n"
