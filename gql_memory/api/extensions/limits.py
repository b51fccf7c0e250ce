"""Query depth and alias limits that cost linear time, whatever the document.

strawberry's QueryDepthLimiter and MaxAliasesLimiter re-walk a fragment at every spread, so
a 1 KB document whose fragments each spread the next one twice costs 2^n steps (30
fragments: hours of CPU, well inside the token limit), and the depth limiter raises KeyError
(an internal error) on a spread of an unknown fragment. These rules measure each fragment
once (memoized), ignore unknown fragments and cycles (graphql-core's own rules report
those) and keep strawberry's messages, so clients see the same errors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)
from strawberry.extensions import AddValidationRules

from gql_memory.errors import ValidationError


class _FragmentMeasure:
    """Measures selection sets, computing every fragment's measure at most once."""

    def __init__(
        self,
        fragments: dict[str, FragmentDefinitionNode],
        measure_field: Callable[[FieldNode, Callable[[SelectionSetNode | None], int]], int],
        combine: Callable[[list[int]], int],
    ) -> None:
        self.fragments = fragments
        self.measure_field = measure_field
        self.combine = combine
        self.done: dict[str, int] = {}
        self.in_progress: set[str] = set()

    def selection_set(self, selection_set: SelectionSetNode | None) -> int:
        if selection_set is None:
            return 0
        parts = []
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                parts.append(self.measure_field(selection, self.selection_set))
            elif isinstance(selection, InlineFragmentNode):
                parts.append(self.selection_set(selection.selection_set))
            elif isinstance(selection, FragmentSpreadNode):
                parts.append(self.fragment(selection.name.value))
        return self.combine(parts)

    def fragment(self, name: str) -> int:
        if name in self.done:
            return self.done[name]
        definition = self.fragments.get(name)
        if definition is None or name in self.in_progress:
            return 0  # unknown fragment or a cycle: reported by graphql-core's own rules
        self.in_progress.add(name)
        value = self.selection_set(definition.selection_set)
        self.in_progress.discard(name)
        self.done[name] = value
        return value


def _fragments(context: ValidationContext) -> dict[str, FragmentDefinitionNode]:
    return {
        d.name.value: d
        for d in context.document.definitions
        if isinstance(d, FragmentDefinitionNode)
    }


def _operations(context: ValidationContext) -> list[OperationDefinitionNode]:
    return [d for d in context.document.definitions if isinstance(d, OperationDefinitionNode)]


def _deepest(parts: list[int]) -> int:
    return max(parts, default=0)


@functools.cache  # one class per limit: validation results can be cached by rule set
def depth_rule(max_depth: int) -> type[ValidationRule]:
    """Rejects operations nested deeper than ``max_depth`` fields (introspection excluded)."""

    def field_depth(field: FieldNode, nested: Callable[[SelectionSetNode | None], int]) -> int:
        if field.name.value.startswith("__") or field.selection_set is None:
            return 0  # leaves and introspection (bounded by the token limit) add no depth
        return 1 + nested(field.selection_set)

    class DepthLimit(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            measure = _FragmentMeasure(_fragments(context), field_depth, _deepest)
            for operation in _operations(context):
                if measure.selection_set(operation.selection_set) > max_depth:
                    name = operation.name.value if operation.name else "anonymous"
                    context.report_error(
                        GraphQLError(
                            f"'{name}' exceeds maximum operation depth of {max_depth}", operation
                        )
                    )

    return DepthLimit


@functools.cache
def alias_rule(max_aliases: int) -> type[ValidationRule]:
    """Rejects documents with more than ``max_aliases`` aliased fields (fragments expanded)."""

    def field_aliases(field: FieldNode, nested: Callable[[SelectionSetNode | None], int]) -> int:
        return (1 if field.alias else 0) + nested(field.selection_set)

    class AliasLimit(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            measure = _FragmentMeasure(_fragments(context), field_aliases, sum)
            total = sum(measure.selection_set(op.selection_set) for op in _operations(context))
            if total > max_aliases:
                context.report_error(GraphQLError(f"{total} aliases found. Allowed: {max_aliases}"))

    return AliasLimit


class QueryDepthLimit(AddValidationRules):
    """Schema extension: the linear-time depth rule."""

    def __init__(self, max_depth: int) -> None:
        super().__init__([depth_rule(max_depth)])


class AliasLimit(AddValidationRules):
    """Schema extension: the linear-time alias rule."""

    def __init__(self, max_aliases: int) -> None:
        super().__init__([alias_rule(max_aliases)])


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
