"""The domain: one module per memory layer. Owns SQL and transactions; knows no GraphQL."""

from __future__ import annotations

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory.raw import RawDialogueStore
from gql_memory.memory.stale import StaleMemory
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
