"""The cost of an operation, computed before it runs, and a limit on it.

Depth, alias and token limits bound the *document*; nested lists multiply the *work*: 30
aliases of `nodes(first: 1000) { edges(first: 1000) { ... } }` pass them all and ask for
tens of millions of objects. Cost counts the objects a query can return:

- every field costs 1, times the number of times its parent can occur;
- a list or connection field multiplies what is under it by its bound: its `first` or `topK`
  argument (the value sent, or the argument's default; a connection without `first` is a page
  of GQL_MEMORY_DEFAULT_PAGE_SIZE), and a list without such an argument by the default page
  size too, except the `edges` list inside a connection, which its `first` already counted;
- a field with a token budget (`context(maxTokens)`) costs 1 per 5 tokens of it, up to the
  largest valid budget (a larger one is the field's own error);
- a root field with a `query` (search, context, insightSearch, similarEpisodes) costs 1 more
  per 4 distinct words of it: the text leg's work grows with them (and more words than
  GQL_MEMORY_SEARCH_MAX_QUERY_WORDS are refused by the search itself);
- a field that reads time in its query (search and context with `interpretTime: true`, or
  without it when GQL_MEMORY_SEARCH_INTERPRET_TIME is on) costs TIME_READING_COST more: up
  to GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS of parsing in a time reader;
- fields GraphQL merges (the same response key, through fragments or repeated) count once, at
  their most expensive occurrence; a fragment is measured once, whatever spreads it (linear
  time: fragments that spread each other twice do not make 2^n paths).

Above GQL_MEMORY_MAX_QUERY_COST the operation is refused with BAD_USER_INPUT stating the cost
and the limit; every response reports `extensions.cost` ({requested, limit}).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from graphql import (
    BooleanValueNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    StringValueNode,
    VariableNode,
    get_named_type,
)
from strawberry.extensions import SchemaExtension

from gql_memory.config import CONTEXT_MAX_TOKENS, TIME_READING_COST
from gql_memory.errors import ValidationError
from gql_memory.memory.graph.traversal import MAX_DEPTH
from gql_memory.memory.insights import MAX_SOURCE_IDS

BOUND_ARGUMENTS = ("first", "topK")
# A field with this argument reads time in its query when it is true (null: the setting).
TIME_ARGUMENT = "interpretTime"
# A field with a token budget (context) costs one per TOKENS_PER_UNIT tokens of it: packing
# and counting its text is linear in the budget, whatever the fields selected.
BUDGET_ARGUMENT = "maxTokens"
TOKENS_PER_UNIT = 5
# Lists without a page argument whose length the domain bounds (a path has at most MAX_DEPTH
# edges, an insight at most MAX_SOURCE_IDS sources, a context four sections). Working-memory
# lists are bounded by the capacity setting; any other list counts as a default page.
KNOWN_LIST_BOUNDS: dict[tuple[str, str], int] = {
    ("Neighbor", "path"): MAX_DEPTH + 1,
    ("Neighbor", "edges"): MAX_DEPTH,
    ("GraphPath", "nodes"): MAX_DEPTH + 1,
    ("GraphPath", "edges"): MAX_DEPTH,
    ("Insight", "sources"): MAX_SOURCE_IDS,
    ("Context", "sections"): 4,
}
WORKING_MEMORY_LISTS = frozenset({("Query", "workingMemory"), ("WorkingMemoryChange", "items")})
# A bound larger than this is refused by the resolvers anyway; it must not overflow the count.
MAX_BOUND = 1_000_000


def _is_list(kind: GraphQLOutputType) -> bool:
    if isinstance(kind, GraphQLNonNull):
        kind = kind.of_type
    return isinstance(kind, GraphQLList)


class _CostWalk:
    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: dict[str, FragmentDefinitionNode],
        variables: Mapping[str, Any],
        page_size: int,
        capacity: int,
        interpret_time: bool = False,
    ) -> None:
        self.schema = schema
        self.fragments = fragments
        self.variables = variables
        self.page_size = page_size
        self.capacity = capacity
        self.interpret_time = interpret_time
        self.done: dict[str, dict[str, int]] = {}
        self.in_progress: set[str] = set()

    def selection_set(
        self, parent: GraphQLObjectType | None, selection_set: SelectionSetNode
    ) -> int:
        """The cost of one occurrence of ``parent`` with this selection."""
        return sum(self.fields(parent, selection_set).values())

    def fields(
        self, parent: GraphQLObjectType | None, selection_set: SelectionSetNode
    ) -> dict[str, int]:
        """Cost per response key. Fields with the same key are merged by GraphQL into one
        (resolved once), so a key costs its most expensive occurrence, not their sum."""
        found: dict[str, int] = {}
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                key = selection.alias.value if selection.alias else selection.name.value
                part = {key: self.field(parent, selection)}
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                kind = self.schema.get_type(condition.name.value) if condition else parent
                part = self.fields(
                    kind if isinstance(kind, GraphQLObjectType) else parent,
                    selection.selection_set,
                )
            elif isinstance(selection, FragmentSpreadNode):
                part = self.fragment(selection.name.value)
            else:
                continue
            for key, cost in part.items():
                found[key] = max(found.get(key, 0), cost)
        return found

    def fragment(self, name: str) -> dict[str, int]:
        if name in self.done:
            return self.done[name]
        definition = self.fragments.get(name)
        if definition is None or name in self.in_progress:
            return {}  # unknown fragment or a cycle: graphql-core's validation reports those
        self.in_progress.add(name)
        kind = self.schema.get_type(definition.type_condition.name.value)
        costs = self.fields(
            kind if isinstance(kind, GraphQLObjectType) else None, definition.selection_set
        )
        self.in_progress.discard(name)
        self.done[name] = costs
        return costs

    def field(self, parent: GraphQLObjectType | None, node: FieldNode) -> int:
        name = node.name.value
        if name.startswith("__") or parent is None or name not in parent.fields:
            return 0  # introspection (bounded by the token limit) or unknown (validation)
        definition = parent.fields[name]
        named = get_named_type(definition.type)
        child = named if isinstance(named, GraphQLObjectType) else None
        own = 1
        if BUDGET_ARGUMENT in definition.args:  # a context: its text holds up to this much
            budget = definition.args[BUDGET_ARGUMENT].default_value
            # no text is longer than the largest budget: a larger one is refused by the
            # field itself, with its own error (maxTokens must be between ...)
            tokens = min(self.argument(node, BUDGET_ARGUMENT, budget), CONTEXT_MAX_TOKENS)
            own = max(1, tokens // TOKENS_PER_UNIT)
        if TIME_ARGUMENT in definition.args and self.reads_time(node):
            own += TIME_READING_COST
        if node.selection_set is None or child is None:
            return own
        multiplier = self.bound(parent, node, definition)
        return own + multiplier * self.selection_set(child, node.selection_set)

    def bound(self, parent: GraphQLObjectType, node: FieldNode, definition: Any) -> int:
        """How many objects this field can return per occurrence of its parent."""
        named = get_named_type(definition.type)
        for argument in BOUND_ARGUMENTS:
            if argument in definition.args:
                return self.argument(node, argument, definition.args[argument].default_value)
        if _is_list(definition.type):
            if parent.name.endswith("Connection"):
                return 1  # a connection's edges: counted by its `first`
            if (parent.name, node.name.value) in WORKING_MEMORY_LISTS:
                return self.capacity
            return KNOWN_LIST_BOUNDS.get((parent.name, node.name.value), self.page_size)
        if named.name.endswith("Connection"):
            return self.page_size
        return 1

    def reads_time(self, node: FieldNode) -> bool:
        """``interpretTime`` as sent, or the server's default when absent or null."""
        value: Any = None
        for argument in node.arguments or ():
            if argument.name.value != TIME_ARGUMENT:
                continue
            if isinstance(argument.value, BooleanValueNode):
                value = argument.value.value
            elif isinstance(argument.value, VariableNode):
                value = self.variables.get(argument.value.name.value)
        return self.interpret_time if value is None else value is True

    def argument(self, node: FieldNode, name: str, default: Any) -> int:
        value: Any = default
        for argument in node.arguments or ():
            if argument.name.value != name:
                continue
            if isinstance(argument.value, IntValueNode):
                value = int(argument.value.value)
            elif isinstance(argument.value, VariableNode):
                value = self.variables.get(argument.value.name.value, default)
        if not isinstance(value, int) or isinstance(value, bool) or value is None:
            return self.page_size
        return max(1, min(value, MAX_BOUND))


def operation_cost(
    schema: GraphQLSchema,
    document: Any,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    page_size: int,
    capacity: int = 10,
    interpret_time: bool = False,
) -> int:
    """The cost of the operation the request runs (see the module's docstring);
    ``interpret_time`` is GQL_MEMORY_SEARCH_INTERPRET_TIME."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = [
        o
        for o in operations
        if operation_name is None or (o.name and o.name.value == operation_name)
    ]
    if not chosen:
        return 0
    operation = chosen[0]
    root = schema.get_root_type(operation.operation)
    walk = _CostWalk(schema, fragments, variables or {}, page_size, capacity, interpret_time)
    return walk.selection_set(root, operation.selection_set)


QUERY_ARGUMENT = "query"
WORDS_PER_UNIT = 4
_WORD = re.compile(r"\w+")


def query_words_cost(
    document: Any, operation_name: str | None, variables: Mapping[str, Any] | None
) -> int:
    """One unit per WORDS_PER_UNIT distinct words of each root field's ``query`` argument.
    Counted apart from ``cached_operation_cost``: that cache is keyed by the values of the
    variables its walk reads, and a query's text must never become such a key."""
    variables = variables or {}
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    operations = [
        d
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
        and (operation_name is None or (d.name and d.name.value == operation_name))
    ]
    if not operations:
        return 0
    units, pending, seen = 0, [operations[0].selection_set], set()
    while pending:  # root fields, through fragments spread at the root (each read once)
        for selection in pending.pop().selections:
            if isinstance(selection, InlineFragmentNode):
                pending.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                if name in fragments and name not in seen:
                    seen.add(name)
                    pending.append(fragments[name].selection_set)
            elif isinstance(selection, FieldNode):
                for argument in selection.arguments or ():
                    if argument.name.value != QUERY_ARGUMENT:
                        continue
                    value: Any = argument.value
                    if isinstance(value, VariableNode):
                        value = variables.get(value.name.value)
                    elif isinstance(value, StringValueNode):
                        value = value.value
                    if isinstance(value, str):
                        words = len({w.casefold() for w in _WORD.findall(value)})
                        units += -(-words // WORDS_PER_UNIT)
    return units


class _ReadVariables(dict[str, Any]):
    """The variables, noting which of them the cost walk reads (it reads them with get)."""

    def __init__(self, variables: Mapping[str, Any]) -> None:
        super().__init__(variables)
        self.read: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        self.read.append(key)
        return super().get(key, default)


# (document text, operation name, the walk's settings) -> (the variables its cost reads,
# {their values: cost}). Agents send the same few documents over and over; a cost is computed
# once per document and values of its page-size variables, not walked on every request.
_COSTS: dict[
    tuple[str, str | None, int, int, bool],
    tuple[tuple[str, ...], dict[tuple[Any, ...], int]],
] = {}
_COSTS_MAX = 512


def cached_operation_cost(
    schema: GraphQLSchema,
    query: str,
    document: Any,
    operation_name: str | None,
    variables: Mapping[str, Any] | None,
    page_size: int,
    capacity: int,
    interpret_time: bool = False,
) -> int:
    """operation_cost, remembered per document and values of the variables it depends on."""
    variables = variables or {}
    key = (query, operation_name, page_size, capacity, interpret_time)
    known = _COSTS.get(key)
    if known is not None:
        names, costs = known
        try:
            values = tuple(variables.get(name) for name in names)
            if values in costs:
                return costs[values]
        except TypeError:  # an unhashable value (a list where a number belongs): walk
            values = None
    read = _ReadVariables(variables)
    cost = operation_cost(
        schema, document, operation_name, read, page_size, capacity, interpret_time
    )
    names = tuple(dict.fromkeys(read.read))
    try:
        values = tuple(variables.get(name) for name in names)
        hash(values)
    except TypeError:
        return cost
    if len(_COSTS) >= _COSTS_MAX:
        _COSTS.pop(next(iter(_COSTS)))  # the oldest document
    entry = _COSTS.setdefault(key, (names, {}))
    if entry[0] == names and len(entry[1]) < _COSTS_MAX:
        entry[1][values] = cost
    return cost


class QueryCost(SchemaExtension):
    """Refuses operations over GQL_MEMORY_MAX_QUERY_COST; reports every operation's cost."""

    def __init__(
        self, limit: int, page_size: int, capacity: int, interpret_time: bool = False
    ) -> None:
        self.limit = limit
        self.page_size = page_size
        self.capacity = capacity
        self.interpret_time = interpret_time
        self.cost: int | None = None

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        document = execution.graphql_document
        if document is not None and execution.query is not None:
            self.cost = cached_operation_cost(
                execution.schema._schema,
                execution.query,
                document,
                getattr(execution, "_provided_operation_name", None),
                execution.variables,
                self.page_size,
                self.capacity,
                self.interpret_time,
            ) + query_words_cost(
                document,
                getattr(execution, "_provided_operation_name", None),
                execution.variables,
            )
            if self.cost > self.limit:
                raise ValidationError(
                    f"Query cost {self.cost} exceeds the limit of {self.limit} "
                    "(GQL_MEMORY_MAX_QUERY_COST): ask for smaller pages (first, topK) or fewer "
                    "nested lists"
                )
        yield

    def get_results(self) -> dict[str, Any]:
        if self.cost is None:
            return {}
        return {"cost": {"requested": self.cost, "limit": self.limit}}
