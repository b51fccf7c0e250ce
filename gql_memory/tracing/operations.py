"""Which GenAI memory operation a call is, from its name: the first verb of a library
method (``working.add``), a GraphQL root field (``addWorkingMemory``) or an MCP tool
(``graph_add_node``) decides; a name with no writing verb is a read (``search_memory``)."""

from __future__ import annotations

import re
from functools import cache

from gql_memory.tracing.conventions import (
    CREATE_MEMORY,
    DELETE_MEMORY,
    SEARCH_MEMORY,
    UPDATE_MEMORY,
)

VERBS = {
    CREATE_MEMORY: {
        "add", "store", "create", "compress", "insert", "ingest", "import", "put", "append",
        "observe", "record", "write",
    },
    UPDATE_MEMORY: {
        "update", "invalidate", "supersede", "restore", "touch", "set", "reembed", "decay",
        "merge", "link", "upsert",
    },
    DELETE_MEMORY: {
        "delete", "forget", "clear", "evict", "erase", "remove", "archive", "purge", "pop",
        "prune",
    },
    SEARCH_MEMORY: {
        "search", "context", "get", "list", "read", "open", "find", "query", "neighbors",
        "path", "similar", "stats",
    },
}  # fmt: skip
# Names the first verb gets wrong.
EXCEPTIONS = {"update_working_memory": CREATE_MEMORY}  # the MCP tool adds an item

WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@cache
def memory_operation(name: str) -> str:
    """``gen_ai.operation.name`` of the call ``name``."""
    if name in EXCEPTIONS:
        return EXCEPTIONS[name]
    for word in WORD.findall(name):
        for operation, verbs in VERBS.items():
            if word.lower() in verbs:
                return operation
    return SEARCH_MEMORY
