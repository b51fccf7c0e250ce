"""An alias limit that costs linear time, whatever the document.

Unlike strawberry's MaxAliasesLimiter, each fragment is measured once (see
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


@functools.cache  # one class per limit: validation results can be cached by rule set
def alias_rule(max_aliases: int) -> type[ValidationRule]:
    """Rejects documents with more than ``max_aliases`` aliased fields (fragments expanded)."""

    def field_aliases(field: FieldNode, nested: Callable[[SelectionSetNode | None], int]) -> int:
        return (1 if field.alias else 0) + nested(field.selection_set)

    class AliasLimit(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            measure = FragmentMeasure(fragment_definitions(context), field_aliases, sum)
            operations = operation_definitions(context)
            total = sum(measure.selection_set(op.selection_set) for op in operations)
            if total > max_aliases:
                context.report_error(GraphQLError(f"{total} aliases found. Allowed: {max_aliases}"))

    return AliasLimit


class AliasLimit(AddValidationRules):
    """Schema extension: the linear-time alias rule."""

    def __init__(self, max_aliases: int) -> None:
        super().__init__([alias_rule(max_aliases)])
