"""Remembers documents that passed validation, so repeated queries skip graphql-core's rules.

Validation runs some 30 rules over the document and costs about as much as executing a small
query; clients send the same few documents again and again. Only *valid* documents are
remembered (a refusal is always recomputed and never shared between requests), keyed by
schema, query text and the exact rule set (limits included); bounded in entries and text size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from strawberry.extensions import SchemaExtension

MAX_ENTRIES = 1024
MAX_QUERY_CHARS = 20_000

_valid: OrderedDict[tuple[object, ...], None] = OrderedDict()


class ValidDocumentCache(SchemaExtension):
    """Marks a remembered document as validated; remembers it when validation finds no error."""

    def on_validate(self) -> Iterator[None]:
        execution = self.execution_context
        query = execution.query
        key = (execution.schema, query, *execution.validation_rules) if query else None
        if key is not None and key in _valid:
            _valid.move_to_end(key)
            execution.pre_execution_errors = []  # strawberry skips validation when this is set
            yield
            return
        yield
        valid = execution.pre_execution_errors == []
        if key is not None and valid and len(query or "") <= MAX_QUERY_CHARS:
            _valid[key] = None
            while len(_valid) > MAX_ENTRIES:
                _valid.popitem(last=False)
