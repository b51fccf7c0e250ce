"""gql_memory: a memory service for AI agents, served as a GraphQL API or used in-process."""

from gql_memory.errors import NotFoundError, ServiceUnavailableError, ValidationError
from gql_memory.loop_thread import StoreClosedError
from gql_memory.memory.raw import RawDialogue, RawDialogueInput
from gql_memory.memory.stale import ArchiveReason, StaleMemoryItem
from gql_memory.memory.working import RefKind, WorkingMemoryItem, WorkingMemoryResult
from gql_memory.store import AsyncMemoryStore, MemoryStore

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
