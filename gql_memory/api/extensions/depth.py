"""A query depth limit that costs linear time, whatever the document.

Unlike strawberry's QueryDepthLimiter, each fragment is measured once (see
fragment_measure.py); strawberry's message is kept, so clients see the same errors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from graphql import (
    FieldNode,
    GraphQLError,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)
from strawberry.extensions import AddValidationRules

from gql_memory.api.extensions.fragment_measure import (
    FragmentMeasure,
    fragment_definitions,
    operation_definitions,
)


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
            measure = FragmentMeasure(fragment_definitions(context), field_depth, _deepest)
            for operation in operation_definitions(context):
                if measure.selection_set(operation.selection_set) > max_depth:
                    name = operation.name.value if operation.name else "anonymous"
                    context.report_error(
                        GraphQLError(
                            f"'{name}' exceeds maximum operation depth of {max_depth}", operation
                        )
                    )

    return DepthLimit


class QueryDepthLimit(AddValidationRules):
    """Schema extension: the linear-time depth rule."""

    def __init__(self, max_depth: int) -> None:
        super().__init__([depth_rule(max_depth)])
