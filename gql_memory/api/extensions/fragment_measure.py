"""Linear-time measures of a document's selections, shared by the depth and alias limits.

strawberry's QueryDepthLimiter and MaxAliasesLimiter re-walk a fragment at every spread, so
a 1 KB document whose fragments each spread the next one twice costs 2^n steps (30
fragments: hours of CPU, well inside the token limit), and the depth limiter raises KeyError
(an internal error) on a spread of an unknown fragment. These measures take each fragment
once (memoized) and ignore unknown fragments and cycles (graphql-core's own rules report
those).
"""

from __future__ import annotations

from collections.abc import Callable

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
)


class FragmentMeasure:
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


def fragment_definitions(context: ValidationContext) -> dict[str, FragmentDefinitionNode]:
    return {
        d.name.value: d
        for d in context.document.definitions
        if isinstance(d, FragmentDefinitionNode)
    }


def operation_definitions(context: ValidationContext) -> list[OperationDefinitionNode]:
    return [d for d in context.document.definitions if isinstance(d, OperationDefinitionNode)]
