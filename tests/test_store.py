"""The library (SPEC §5): seed 001's acceptance cases, written as the seed writes them, run
against the synchronous ``MemoryStore`` and against ``AsyncMemoryStore``; then what the
synchronous facade itself promises (lifecycle, errors, threads, running event loops)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pytest

from gql_memory import (
    ArchiveReason,
    AsyncMemoryStore,
    MemoryStore,
    NotFoundError,
    StoreClosedError,
    ValidationError,
    WorkingMemoryItem,
    WorkingMemoryResult,
)
from gql_memory.config import Settings
from gql_memory.errors import ConfigurationError

# the store's sub-objects whose methods are coroutines in AsyncMemoryStore
LAYERS = {"working", "stale", "raw", "insights", "episodes", "graph", "extraction"}


class Awaited:
    """AsyncMemoryStore under the synchronous cases: every coroutine it returns is awaited on
    this test's own event loop (no thread), so one text of each case serves both classes."""

    def __init__(self, target: Any, runner: asyncio.Runner) -> None:
        self._target = target
        self._runner = runner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name in LAYERS:
            return Awaited(value, self._runner)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            return self._runner.run(result) if inspect.iscoroutine(result) else result

        return call


def store_settings(settings: Settings) -> Settings:
    return settings.with_overrides(db_pool_size=4, db_max_overflow=4)


@pytest.fixture
def namespace() -> str:
    """A namespace of this test's own: the cases start empty without truncating anything."""
    return f"seed001-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["MemoryStore", "AsyncMemoryStore"])
def store(request: pytest.FixtureRequest, settings: Settings, namespace: str) -> Iterator[Any]:
    """A connected store of either class, as the seed's Given says ("instanziiert und
    verbunden")."""
    config = store_settings(settings)
    if request.param == "MemoryStore":
        with MemoryStore(settings=config, namespace=namespace, migrate=False) as sync_store:
            yield sync_store
        return
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        async_store = AsyncMemoryStore(settings=config, namespace=namespace, migrate=False)
        runner.run(async_store.connect())
        try:
            yield Awaited(async_store, runner)
        finally:
            runner.run(async_store.close())


# --- AC-5.5.1: add -----------------------------------------------------------------------


def test_add_returns_a_working_memory_result(store: Any) -> None:
    result = store.working.add("User prefers dark mode", importance=0.5)
    assert isinstance(result, WorkingMemoryResult)
    assert isinstance(result.added_id, int)
    assert (result.evicted_id, result.archived_id, result.current_count) == (None, None, 1)


def test_add_defaults_importance_to_one_half(store: Any) -> None:
    result = store.working.add("no importance given")
    item = store.working.get(result.added_id)
    assert item is not None and item.importance == 0.5


def test_more_than_ten_items_evict_the_least_recently_used(store: Any) -> None:
    ids = [store.working.add(f"item {i}", importance=0.5).added_id for i in range(10)]
    result = store.working.add("item 10", importance=0.5)
    assert result.evicted_id == ids[0]
    assert result.current_count == 10
    assert len(store.working.list()) == 10
    # The project archives every evicted item, not only critical ones (SPEC §3.2: nothing is
    # ever lost); the seed asks it for importance > 0.8.
    archived = store.stale.get(result.archived_id)
    assert archived is not None and archived.original_id == ids[0]
    assert archived.reason is ArchiveReason.LRU_EVICTION


def test_an_evicted_critical_item_is_archived_to_stale_memory(store: Any) -> None:
    ids = [store.working.add(f"critical {i}", importance=0.9).added_id for i in range(10)]
    result = store.working.add("one more", importance=0.9)  # all critical: the oldest goes
    assert result.evicted_id == ids[0]
    archived = store.stale.get(result.archived_id)
    assert archived is not None
    assert (archived.original_id, archived.original_content, archived.importance) == (
        ids[0],
        "critical 0",
        0.9,
    )


# --- AC-5.5.2: list ----------------------------------------------------------------------


def test_list_of_an_empty_working_memory_is_empty(store: Any) -> None:
    assert store.working.list() == []


def test_list_returns_items_newest_access_first(store: Any) -> None:
    first = store.working.add("first", importance=0.5)
    second = store.working.add("second", importance=0.7)
    items = store.working.list()
    assert all(isinstance(i, WorkingMemoryItem) for i in items)
    assert [i.id for i in items] == [second.added_id, first.added_id]
    newest = items[0]
    assert (newest.content, newest.importance) == ("second", 0.7)
    assert isinstance(newest.last_accessed, datetime) and isinstance(newest.created_at, datetime)
    store.working.access(first.added_id)  # an LRU touch moves it to the front
    assert [i.id for i in store.working.list()] == [first.added_id, second.added_id]


# --- AC-5.5.3: clear ---------------------------------------------------------------------


def test_clear_of_an_empty_working_memory_returns_zero(store: Any) -> None:
    assert store.working.clear() == 0


def test_clear_deletes_everything_and_archives_critical_items_first(store: Any) -> None:
    store.working.add("ordinary", importance=0.5)
    critical = store.working.add("critical", importance=0.9)
    assert store.working.clear() == 2
    assert store.working.list() == []
    [archived] = store.stale.list(importance_min=0.8).items
    assert archived.original_id == critical.added_id
    assert archived.reason is ArchiveReason.MANUAL_ARCHIVE


# --- AC-5.5.4: get -----------------------------------------------------------------------


def test_get_returns_the_item_or_none(store: Any) -> None:
    added = store.working.add("find me", importance=0.6)
    item = store.working.get(added.added_id)
    assert isinstance(item, WorkingMemoryItem)
    assert (item.id, item.content, item.importance) == (added.added_id, "find me", 0.6)
    assert store.working.get(added.added_id + 10_000) is None


def test_the_lru_touch_is_access_not_get(store: Any) -> None:
    # The seed's get() touches last_accessed; the project keeps reads read-only (SPEC §3.2,
    # seed 003) and touches with access(id).
    added = store.working.add("touch me", importance=0.6)
    before = store.working.get(added.added_id).last_accessed
    assert store.working.get(added.added_id).last_accessed == before
    touched = store.working.access(added.added_id)
    assert touched.last_accessed > before and touched.mention_count == 1


# --- AC-5.5.5: importance validation ------------------------------------------------------


@pytest.mark.parametrize(
    ("importance", "message"),
    [(-0.1, "Importance must be >= 0.0"), (1.1, "Importance must be <= 1.0")],
)
def test_importance_outside_0_1_raises_validation_error(
    store: Any, importance: float, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        store.working.add("x", importance=importance)
    assert store.working.list() == []


# --- AC-5.5.6: one implementation --------------------------------------------------------


def test_layers_share_the_stores_connection_pool(store: Any) -> None:
    added = store.working.add("shared", importance=0.95)
    store.working.archive(added.added_id)
    [archived] = store.stale.list().items
    restored = store.stale.restore(archived.id)  # stale memory adds through working memory
    assert store.working.get(restored.added_id).content == "shared"
    assert store.stats().working_memory == 1


# --- decay tells what it did (issue 13) ----------------------------------------------------


def test_an_importance_zero_item_decays_on_the_next_add_and_is_reported(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    zero = store.working.add("noise", importance=0.0)
    with caplog.at_level(logging.INFO, logger="gql_memory"):
        result = store.working.add("signal", importance=0.5)
    assert result.decayed_ids == (zero.added_id,) and result.evicted_id is None
    [archived] = store.stale.list(reason=ArchiveReason.DECAY_EVICTION).items
    assert archived.original_id == zero.added_id
    # (the first add may be captured too, when an earlier test left the level at INFO)
    [record] = [
        r
        for r in caplog.records
        if getattr(r, "event", None) == "working_memory_add"
        and getattr(r, "added_id", None) == result.added_id
    ]
    assert record.levelno == logging.INFO
    assert (record.added_id, record.decayed_ids) == (result.added_id, [zero.added_id])


# --- the synchronous facade ----------------------------------------------------------------


def store_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("gql-memory-store-")]


@pytest.fixture
def sync_store(settings: Settings, namespace: str) -> Iterator[MemoryStore]:
    with MemoryStore(settings=store_settings(settings), namespace=namespace) as store:
        yield store


def test_connect_and_close_without_a_with_block(settings: Settings, namespace: str) -> None:
    threads = len(store_threads())
    store = MemoryStore(settings=store_settings(settings), namespace=namespace, migrate=False)
    store.connect()
    assert store.connected and len(store_threads()) == threads + 1
    assert store.working.add("hello").current_count == 1
    store.close()
    assert not store.connected and len(store_threads()) == threads  # the loop thread ended
    store.close()  # idempotent


def test_a_closed_store_says_so(settings: Settings, namespace: str) -> None:
    store = MemoryStore(settings=store_settings(settings), namespace=namespace, migrate=False)
    with pytest.raises(StoreClosedError, match="not connected"):
        store.working.list()
    with store:
        working = store.working
    with pytest.raises(StoreClosedError, match="closed"):
        store.working.list()
    with pytest.raises(StoreClosedError, match="closed"):
        working.list()  # a layer kept from before the close
    assert isinstance(StoreClosedError("x"), RuntimeError)


def test_errors_keep_their_types(sync_store: MemoryStore) -> None:
    with pytest.raises(NotFoundError, match="not found"):
        sync_store.working.access(999_999)
    with pytest.raises(ValidationError, match="must not be empty"):
        sync_store.working.add("   ")
    with pytest.raises(AttributeError):
        sync_store.no_such_thing  # noqa: B018


def test_a_failed_connect_raises_and_leaves_no_thread(settings: Settings) -> None:
    threads = len(store_threads())
    broken = settings.with_overrides(
        extraction_rules=[{"id": "broken", "toolPattern": "^Read", "attention": 2}]
    )
    store = MemoryStore(settings=broken)
    with pytest.raises(ConfigurationError, match="broken"):
        store.connect()
    assert not store.connected and len(store_threads()) == threads


def test_sub_objects_and_signatures_are_the_async_ones(sync_store: MemoryStore) -> None:
    assert inspect.signature(sync_store.working.add) == inspect.signature(
        sync_store._store.working.add
    )
    tenant = sync_store.scoped("tenant-b")
    assert tenant.working.add("elsewhere").current_count == 1
    assert sync_store.working.list() == []
    assert sync_store.search("elsewhere", session_id=None) == []
    assert "working" in dir(sync_store)


def test_threads_can_share_one_store(sync_store: MemoryStore) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: sync_store.working.add(f"t{i}"), range(24)))
    assert max(r.current_count for r in results) <= 10
    assert len(sync_store.working.list()) == 10
    assert sync_store.stats().stale_memory == 14  # every eviction archived


def test_works_when_the_caller_runs_an_event_loop(sync_store: MemoryStore) -> None:
    # Jupyter and async frameworks call from inside a running loop: the facade blocks it for
    # the call (its own loop runs on its own thread) instead of refusing.
    async def inside() -> int:
        return sync_store.working.add("from a coroutine").current_count

    assert asyncio.run(inside()) == 1
