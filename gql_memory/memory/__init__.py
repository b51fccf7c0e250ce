"""The domain: one module per memory layer. Owns SQL and transactions; knows no GraphQL."""

from __future__ import annotations

from functools import cached_property

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory.erasure import forget_session
from gql_memory.memory.extraction import ExtractionPipeline
from gql_memory.memory.raw import RawDialogueStore
from gql_memory.memory.rules import rules_for
from gql_memory.memory.stale import StaleMemory
from gql_memory.memory.stats import MemoryStats, memory_stats
from gql_memory.memory.working import WorkingMemory

DEFAULT_NAMESPACE = "default"


class Memory:
    """Every layer of one namespace, sharing one database. Cheap to create per request."""

    def __init__(self, db: Database, settings: Settings, namespace: str = DEFAULT_NAMESPACE):
        self.db = db
        self.settings = settings
        self.namespace = namespace
        self.raw = RawDialogueStore(db, settings, namespace)
        self.working = WorkingMemory(db, settings, namespace)
        self.stale = StaleMemory(db, settings, namespace, self.working)

    @cached_property
    def extraction(self) -> ExtractionPipeline:
        """Tool outputs -> working memory; the rules are compiled once per rule set."""
        return ExtractionPipeline(self.working, self.settings, rules_for(self.settings))

    async def stats(self) -> MemoryStats:
        """Counts per layer in this namespace."""
        return await memory_stats(self.db, self.namespace)

    async def forget_session(self, session_id: str) -> int:
        """Erase everything stored for one session; returns the number of rows deleted."""
        return await forget_session(self.db, self.namespace, session_id)
