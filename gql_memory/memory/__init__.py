"""The domain: one package per concern, single modules for the rest. Owns SQL and
transactions; knows no GraphQL or HTTP. ``Memory`` is every layer of one namespace.

- ``search/``: graph-aware hybrid search, one module per step;
- ``working/``: working memory, the stale archive, decay, per-session serialization;
- ``extraction/``: tool outputs into working memory (rules, summarizers, redaction);
- ``context/``: context assembly under a token budget;
- ``graph/``: the memory graph (nodes, edges, traversal, the automatic graph);
- ``raw``, ``insights``, ``episodes``: the stored layers; ``knowledge_graph``: the reference
  MCP memory server's view; ``importer``: transcripts in; ``erasure`` and
  ``session_erasure``: forgetting on request; ``turn_embedding``: what is embedded for a
  raw turn; ``embedding_config``: the embedding signature and re-embedding; ``stats``: counts;
- shared by all: ``events`` (the domain's vocabulary of changes), ``validation``,
  ``validity`` (time-aware facts), ``pagination``, ``vectors``, ``offload``.
"""

from __future__ import annotations

from functools import cached_property

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, make_provider
from gql_memory.memory.consolidation import Consolidation
from gql_memory.memory.context.assembly import ContextAssembler
from gql_memory.memory.episodes import Episodes
from gql_memory.memory.extraction.pipeline import ExtractionPipeline
from gql_memory.memory.extraction.rules import rules_for
from gql_memory.memory.graph.memory_graph import Graph
from gql_memory.memory.insights import Insights
from gql_memory.memory.knowledge_graph import KnowledgeGraph
from gql_memory.memory.raw import RawDialogueStore
from gql_memory.memory.search.pipeline import HybridSearch
from gql_memory.memory.session_erasure import forget_session
from gql_memory.memory.stats import MemoryStats, memory_stats
from gql_memory.memory.validation import require_namespace
from gql_memory.memory.working.stale import StaleMemory
from gql_memory.memory.working.working_memory import WorkingMemory

DEFAULT_NAMESPACE = "default"


class Memory:
    """Every layer of one namespace, sharing one database and embedder.

    Cheap to create: the API builds one per request for the caller's namespace.
    """

    def __init__(
        self,
        db: Database,
        settings: Settings,
        namespace: str = DEFAULT_NAMESPACE,
        embedder: EmbeddingProvider | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.namespace = require_namespace(namespace)
        self.embedder = embedder or make_provider(settings)
        self.raw = RawDialogueStore(db, settings, namespace, self.embedder)
        self.working = WorkingMemory(db, settings, namespace)
        self.stale = StaleMemory(db, settings, namespace, self.working)
        self.insights = Insights(db, settings, namespace, self.embedder)
        self.episodes = Episodes(db, settings, namespace, self.embedder)
        self.graph = Graph(db, settings, namespace)
        self.hybrid = HybridSearch(db, settings, namespace, self.embedder)
        self.search = self.hybrid.search
        self.assembler = ContextAssembler(db, settings, namespace, self.embedder, self.working)
        self.context = self.assembler.assemble

    @cached_property
    def knowledge_graph(self) -> KnowledgeGraph:
        """The reference MCP memory server's entities, relations and observations."""
        return KnowledgeGraph(self.db, self.settings, self.namespace, self.insights, self.hybrid)

    @cached_property
    def consolidation(self) -> Consolidation:
        """Duplicates merged, changed facts superseded, entities and sessions tidied; undo."""
        return Consolidation(self.db, self.settings, self.namespace, self.embedder, self.insights)

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
