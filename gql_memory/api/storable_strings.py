"""Every string a request carries is storable, checked once before anything executes.

PostgreSQL text cannot hold NUL and UTF-8 cannot hold lone surrogates. The domain checks the
fields it knows, but a string that slipped past one of those checks (a node looked up by
label and name, a key inside a JSON value) reached SQL and came back as an internal error.
So the API checks every string of every operation: inline literals in any argument, nested
input or list, and every variable value, JSON keys included, before a resolver runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphql import (
    ArgumentNode,
    DocumentNode,
    ListValueNode,
    ObjectValueNode,
    StringValueNode,
    ValueNode,
    VariableDefinitionNode,
    Visitor,
    visit,
)
from strawberry.extensions import SchemaExtension

from gql_memory.memory.validation import check_storable


def _literal_strings(node: ValueNode, path: str) -> Iterator[tuple[str, str]]:
    # iterative: a document of nested lists must not exhaust Python's stack
    stack: list[tuple[ValueNode, str]] = [(node, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, StringValueNode):
            yield where, current.value
        elif isinstance(current, ListValueNode):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(current.values))
        elif isinstance(current, ObjectValueNode):
            for field in current.fields:
                yield f"{where}.{field.name.value}", field.name.value
                stack.append((field.value, f"{where}.{field.name.value}"))


class _LiteralCollector(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def enter_argument(self, node: ArgumentNode, *_: Any) -> None:
        self.found.extend(_literal_strings(node.value, node.name.value))

    def enter_variable_definition(self, node: VariableDefinitionNode, *_: Any) -> None:
        if node.default_value is not None:
            name = f"${node.variable.name.value}"
            self.found.extend(_literal_strings(node.default_value, name))


def document_strings(document: DocumentNode) -> list[tuple[str, str]]:
    """(path, value) of every string literal in the document's arguments and defaults."""
    collector = _LiteralCollector()
    visit(document, collector)
    return collector.found


def value_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, value) of every string in a variable's value, JSON object keys included."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            yield where, current
        elif isinstance(current, dict):
            for key, item in current.items():
                yield f"{where}.{key}", str(key)
                stack.append((item, f"{where}.{key}"))
        elif isinstance(current, list | tuple):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(current))


# Documents whose literals passed (agents send the same few documents over and over, and a
# document's literals are its text's): checked once, not on every request.
_CLEAN_DOCUMENTS: dict[str, None] = {}
_CLEAN_DOCUMENTS_MAX = 512


class StorableStrings(SchemaExtension):
    """Refuses (BAD_USER_INPUT, naming the argument) any operation carrying a string with a
    NUL character or a lone surrogate, before execution."""

    def on_execute(self) -> Iterator[None]:
        execution = self.execution_context
        document, query = execution.graphql_document, execution.query
        if document is not None and query not in _CLEAN_DOCUMENTS:
            for path, text in document_strings(document):
                check_storable(text, path)
            if query is not None:
                if len(_CLEAN_DOCUMENTS) >= _CLEAN_DOCUMENTS_MAX:
                    _CLEAN_DOCUMENTS.pop(next(iter(_CLEAN_DOCUMENTS)))  # the oldest
                _CLEAN_DOCUMENTS[query] = None
        for name, value in (execution.variables or {}).items():
            for path, text in value_strings(value, f"${name}"):
                check_storable(text, path)
        yield
