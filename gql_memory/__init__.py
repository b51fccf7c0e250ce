"""gql_memory: a memory service for AI agents, served as a GraphQL API or used in-process."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gql_memory.errors import NotFoundError, ServiceUnavailableError, ValidationError

if TYPE_CHECKING:
    from gql_memory.loop_thread import StoreClosedError
    from gql_memory.memory.raw import RawDialogue, RawDialogueInput
    from gql_memory.memory.working.archive import ArchiveReason, StaleMemoryItem
    from gql_memory.memory.working.working_memory import (
        RefKind,
        WorkingMemoryItem,
        WorkingMemoryResult,
    )
    from gql_memory.store import AsyncMemoryStore, MemoryStore

# Imported on first use, not with the package: `gql-memory --help` (gql_memory.cli) must not
# load the database layers to print its help.
_LAZY = {
    "StoreClosedError": "gql_memory.loop_thread",
    "RawDialogue": "gql_memory.memory.raw",
    "RawDialogueInput": "gql_memory.memory.raw",
    "ArchiveReason": "gql_memory.memory.working.archive",
    "StaleMemoryItem": "gql_memory.memory.working.archive",
    "RefKind": "gql_memory.memory.working.working_memory",
    "WorkingMemoryItem": "gql_memory.memory.working.working_memory",
    "WorkingMemoryResult": "gql_memory.memory.working.working_memory",
    "AsyncMemoryStore": "gql_memory.store",
    "MemoryStore": "gql_memory.store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gql_memory' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "ArchiveReason",
    "AsyncMemoryStore",
    "MemoryStore",
    "NotFoundError",
    "RawDialogue",
    "RawDialogueInput",
    "RefKind",
    "ServiceUnavailableError",
    "StaleMemoryItem",
    "StoreClosedError",
    "ValidationError",
    "WorkingMemoryItem",
    "WorkingMemoryResult",
    "__version__",
]
