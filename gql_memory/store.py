"""The in-process library over gql_memory.memory (seed 001), synchronous and async.

    with MemoryStore() as store:                    # embedded PostgreSQL
        result = store.working.add("User prefers dark mode", importance=0.9)

    async with AsyncMemoryStore() as store:
        result = await store.working.add("User prefers dark mode", importance=0.9)

``AsyncMemoryStore`` is the implementation; ``MemoryStore`` runs it on a loop thread of its
own (gql_memory.loop_thread), so both have the same sub-objects, signatures, results and
exceptions. The API's resolvers call exactly the same service objects, so library and server
behave alike. With read replicas (GQL_MEMORY_READ_DATABASE_URL) a store reads on them and
still sees its own writes: it remembers its last commit position (gql_memory.db.replicas).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from gql_memory import runtime
from gql_memory.config import CONTEXT_DEFAULT_MAX_TOKENS, Settings
from gql_memory.loop_thread import LoopThread, StoreClosedError, synchronous
from gql_memory.memory import DEFAULT_NAMESPACE, Memory
from gql_memory.memory.consolidation import Consolidation
from gql_memory.memory.context.assembly import ALL_SECTIONS, Context, SectionKind
from gql_memory.memory.episodes import Episodes
from gql_memory.memory.extraction.pipeline import ExtractionPipeline
from gql_memory.memory.extraction.rules import rules_for
from gql_memory.memory.graph.memory_graph import Graph
from gql_memory.memory.insights import Insights
from gql_memory.memory.raw import RawDialogueStore
from gql_memory.memory.search.types import Fusion, MemoryLayer, SearchHit, SearchWeights
from gql_memory.memory.stats import MemoryStats
from gql_memory.memory.validation import require_namespace
from gql_memory.memory.working.stale import StaleMemory
from gql_memory.memory.working.working_memory import WorkingMemory
from gql_memory.runtime import Purpose, Runtime

if TYPE_CHECKING:
    from gql_memory.tracing.spans import Tracing

T = TypeVar("T")


class AsyncMemoryStore:
    """Connects (starting the embedded PostgreSQL when no URL is given), migrates, serves."""

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        settings: Settings | None = None,
        data_dir: str | Path | None = None,
        migrate: bool = True,
    ) -> None:
        base = settings or Settings()
        self.settings = base.with_overrides(
            database_url=url, data_dir=Path(data_dir) if data_dir else None
        )
        self.namespace = require_namespace(namespace)  # before any database is started
        self._migrate = migrate
        self._runtime: AbstractAsyncContextManager[Runtime] | None = None
        self._memory: Memory | None = None
        self.tracing: Tracing | None = None  # OpenTelemetry, when on (gql_memory.tracing)

    async def __aenter__(self) -> AsyncMemoryStore:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Start (or reach) PostgreSQL, migrate and check it; a second call does nothing."""
        if self.connected:
            return
        rules_for(self.settings)  # invalid extraction rules fail here, before any database work
        # the one startup (gql_memory.runtime): reach or start PostgreSQL, migrate, check,
        # connect as the owner with the replicas (reads that see this store's own writes);
        # when a step fails, what the earlier ones started is stopped again
        opening = runtime.open(self.settings, Purpose.LIBRARY, migrate=self._migrate)
        rt = await opening.__aenter__()
        self._runtime = opening
        self.tracing = rt.tracing
        self._memory = self._traced(Memory(rt.db, self.settings, self.namespace, rt.embedder))

    async def close(self) -> None:
        self._memory = None
        opened, self._runtime = self._runtime, None
        if opened is not None:
            await opened.__aexit__(None, None, None)

    @property
    def connected(self) -> bool:
        """True between ``connect()`` and ``close()``."""
        return self._memory is not None

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            raise StoreClosedError(
                "AsyncMemoryStore is not connected: use `async with AsyncMemoryStore()` "
                "or `await store.connect()`"
            )
        return self._memory

    def scoped(self, namespace: str) -> Memory:
        """The services of another namespace on the same connection pool (multi-tenant use)."""
        namespace = require_namespace(namespace)  # refused the same way, connected or not
        return self._traced(Memory(self.memory.db, self.settings, namespace, self.memory.embedder))

    def _traced(self, memory: Memory) -> Memory:
        """With tracing on, ``memory`` with a span per call (gql_memory.tracing.library);
        off, ``memory`` as it is."""
        if self.tracing is None:
            return memory
        from gql_memory.tracing.library import trace_memory

        return trace_memory(memory, self.tracing)

    @property
    def working(self) -> WorkingMemory:
        return self.memory.working

    @property
    def stale(self) -> StaleMemory:
        return self.memory.stale

    @property
    def raw(self) -> RawDialogueStore:
        return self.memory.raw

    @property
    def insights(self) -> Insights:
        return self.memory.insights

    @property
    def episodes(self) -> Episodes:
        return self.memory.episodes

    @property
    def consolidation(self) -> Consolidation:
        """Merge duplicates, supersede changed facts, digest sessions; the journal; undo."""
        return self.memory.consolidation

    @property
    def graph(self) -> Graph:
        return self.memory.graph

    async def search(
        self,
        query: str,
        top_k: int = 10,
        session_id: str | None = "default",
        layers: Sequence[MemoryLayer | str] = (MemoryLayer.INSIGHT,),
        weights: SearchWeights | None = None,
        fusion: Fusion | str | None = None,
        *,
        as_of: datetime | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        reference_time: datetime | None = None,
        interpret_time: bool | None = None,
        min_relevance: float | None = None,
    ) -> list[SearchHit]:
        """Graph-aware hybrid search (gql_memory.memory.search): the facts valid now, or
        at ``as_of``; ``since`` / ``until`` limit it to a period. With ``interpret_time``
        (default: the setting), a period the query names ("last week", "in May 2023"), read
        against ``reference_time`` (default ``as_of``, else now), ranks hits in it higher.
        Every hit has a calibrated ``relevance``; hits below ``min_relevance`` (default:
        GQL_MEMORY_SEARCH_MIN_RELEVANCE, 0) are left out."""
        return await self.memory.search(
            query,
            top_k,
            session_id,
            layers,
            weights,
            fusion,
            as_of=as_of,
            since=since,
            until=until,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )

    async def context(
        self,
        query: str,
        session_id: str = "default",
        max_tokens: int = CONTEXT_DEFAULT_MAX_TOKENS,
        include: Sequence[SectionKind | str] = ALL_SECTIONS,
        *,
        as_of: datetime | None = None,
        reference_time: datetime | None = None,
        interpret_time: bool | None = None,
        min_relevance: float | None = None,
    ) -> Context:
        """Token-budgeted context for an agent's next step (see gql_memory.memory.context.assembly);
        with ``as_of``, as the facts stood at that instant; ``interpret_time`` and
        ``reference_time`` as for ``search``; no search hit or lesson below
        ``min_relevance`` (default: GQL_MEMORY_CONTEXT_MIN_RELEVANCE, else the model's
        calibrated floor) is added (``below_relevance`` says how many were left out)."""
        return await self.memory.context(
            query,
            session_id,
            max_tokens,
            include,
            as_of=as_of,
            reference_time=reference_time,
            interpret_time=interpret_time,
            min_relevance=min_relevance,
        )

    @property
    def extraction(self) -> ExtractionPipeline:
        return self.memory.extraction

    async def stats(self) -> MemoryStats:
        """Counts per layer in this store's namespace."""
        return await self.memory.stats()

    async def forget_session(self, session_id: str) -> int:
        """Erase everything stored for one session; returns the number of rows deleted."""
        return await self.memory.forget_session(session_id)


class MemoryStore:
    """The synchronous library (seed 001): ``AsyncMemoryStore`` run on a loop thread of its own.

    Every attribute of the async store is here with the same name and signature: sub-objects
    (``working``, ``raw``, ``stale``, ``insights``, ``episodes``, ``graph``, ``extraction``,
    ``consolidation``,
    ``scoped(namespace)``) come with blocking methods, and a call returns what the coroutine
    returned or raises what it raised. Safe to share between threads. ``close()`` stops the
    loop thread; using the store after it raises ``StoreClosedError`` (a RuntimeError).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        settings: Settings | None = None,
        data_dir: str | Path | None = None,
        migrate: bool = True,
    ) -> None:
        # created here so that invalid arguments raise here, as with the async store
        self._store = AsyncMemoryStore(
            url, namespace=namespace, settings=settings, data_dir=data_dir, migrate=migrate
        )
        self._loop: LoopThread | None = None
        self._closed = False

    def __enter__(self) -> MemoryStore:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def connect(self) -> None:
        """Start the loop thread and connect on it; a second call does nothing."""
        if self._loop is not None:
            return
        loop = LoopThread(name=f"gql-memory-store-{id(self):x}")
        try:
            loop.run(self._store.connect())
        except BaseException:
            loop.stop()
            raise
        self._loop, self._closed = loop, False

    def close(self) -> None:
        """Disconnect (stopping the embedded PostgreSQL if this store started it) and stop
        the loop thread. Idempotent."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        self._closed = True
        try:
            loop.run(self._store.close())
        finally:
            loop.stop()

    @property
    def connected(self) -> bool:
        """True between ``connect()`` and ``close()``."""
        return self._loop is not None and self._store.connected

    @property
    def settings(self) -> Settings:
        return self._store.settings

    @property
    def namespace(self) -> str:
        return self._store.namespace

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not hasattr(AsyncMemoryStore, name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if self._loop is None:
            state = "closed" if self._closed else "not connected"
            raise StoreClosedError(
                f"MemoryStore is {state}: use `with MemoryStore(...) as store:` "
                "or call store.connect() first"
            )
        return synchronous(getattr(self._store, name), self._loop)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._store)))

    def _loop_thread(self) -> LoopThread:
        if self._loop is None:
            state = "closed" if self._closed else "not connected"
            raise StoreClosedError(f"MemoryStore is {state}")
        return self._loop

    def run(self, call: Callable[[AsyncMemoryStore], Awaitable[T]]) -> T:
        """Run ``call(async_store)`` on this store's loop thread and wait for its result:
        several async calls in one hop (the framework adapters of gql_memory.integrations
        are written once, against AsyncMemoryStore)."""
        return self._loop_thread().run(call(self._store))

    async def run_async(self, call: Callable[[AsyncMemoryStore], Awaitable[T]]) -> T:
        """``run`` for async code: awaits the work on this store's loop thread and leaves the
        caller's event loop free meanwhile."""
        return await self._loop_thread().run_from_loop(call(self._store))
