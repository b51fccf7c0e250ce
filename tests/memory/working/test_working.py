"""Working memory: the ten cases of seed 000 and the library cases of seed 001."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text

from gql_memory import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.working.archive import ArchiveReason


async def add_many(
    memory: Memory, count: int, importance: float, prefix: str = "item"
) -> list[int]:
    ids = []
    for i in range(count):
        result = await memory.working.add(f"{prefix} {i}", importance=importance)
        ids.append(result.added_id)
    return ids


async def contents(memory: Memory, session_id: str = "default") -> set[str]:
    return {item.content for item in await memory.working.list(session_id)}


# --- seed 000 ------------------------------------------------------------------------------


async def test_valid_item_is_inserted(memory: Memory) -> None:
    result = await memory.working.add("test content", importance=0.6)
    assert result.evicted_id is None and result.archived_id is None
    assert result.current_count == 1
    item = await memory.working.get(result.added_id)
    assert item is not None
    assert (item.content, item.importance, item.session_id) == ("test content", 0.6, "default")


async def test_capacity_enforcement_evicts_five_of_fifteen(memory: Memory) -> None:
    await add_many(memory, 15, 0.5)
    assert len(await memory.working.list()) == 10
    stale = await memory.stale.list()
    assert len(stale.items) == 5


async def test_ten_critical_items_are_all_kept(memory: Memory) -> None:
    await add_many(memory, 10, 0.9)
    assert len(await memory.working.list()) == 10
    assert (await memory.stale.list()).items == []


async def test_mixed_importance_evicts_only_normal_items(memory: Memory) -> None:
    await add_many(memory, 5, 0.9, "critical")
    await add_many(memory, 10, 0.5, "normal")
    kept = await contents(memory)
    assert {f"critical {i}" for i in range(5)} <= kept
    assert kept - {f"critical {i}" for i in range(5)} == {f"normal {i}" for i in range(5, 10)}


async def test_evicted_items_are_archived_with_lru_reason(memory: Memory) -> None:
    await add_many(memory, 10, 0.5)
    result = await memory.working.add("one more", importance=0.5)
    assert result.evicted_id is not None and result.archived_id is not None
    archived = await memory.stale.get(result.archived_id)
    assert archived is not None
    assert archived.reason is ArchiveReason.LRU_EVICTION
    assert archived.original_id == result.evicted_id
    assert (archived.original_content, archived.importance) == ("item 0", 0.5)
    assert await memory.working.get(result.evicted_id) is None


async def test_eleventh_item_evicts_the_first_inserted(memory: Memory) -> None:
    ids = await add_many(memory, 10, 0.5)
    result = await memory.working.add("T10", importance=0.5)
    assert result.evicted_id == ids[0]
    assert result.current_count == 10


@pytest.mark.parametrize(
    ("importance", "message"),
    [(1.5, "Importance must be <= 1.0"), (-0.1, "Importance must be >= 0.0")],
)
async def test_invalid_importance_is_rejected(
    memory: Memory, importance: float, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.working.add("x", importance=importance)
    assert await memory.working.list() == []


@pytest.mark.parametrize("content", ["", "   "])
async def test_empty_content_is_rejected(memory: Memory, content: str) -> None:
    with pytest.raises(ValidationError, match="Content must not be empty"):
        await memory.working.add(content)
    assert await memory.working.list() == []


async def test_manual_archive_records_manual_reason(memory: Memory) -> None:
    added = await memory.working.add("keep for later", importance=0.4)
    archived = await memory.working.archive(added.added_id)
    assert archived.reason is ArchiveReason.MANUAL_ARCHIVE
    assert archived.original_id == added.added_id
    assert await memory.working.get(added.added_id) is None


async def test_all_critical_items_force_evicts_the_oldest(memory: Memory) -> None:
    ids = await add_many(memory, 10, 0.9)
    result = await memory.working.add("critical 10", importance=0.95)
    assert result.evicted_id == ids[0]
    assert result.current_count == 10
    archived = await memory.stale.get(result.archived_id)
    assert archived is not None and archived.importance == 0.9


# --- seed 001 (library API) ----------------------------------------------------------------


async def test_list_is_most_recently_accessed_first(memory: Memory) -> None:
    ids = await add_many(memory, 3, 0.5)
    assert [i.id for i in await memory.working.list()] == list(reversed(ids))
    await memory.working.access(ids[0])
    assert [i.id for i in await memory.working.list()] == [ids[0], ids[2], ids[1]]


async def test_list_of_empty_working_memory_is_empty(memory: Memory) -> None:
    assert await memory.working.list() == []


async def test_get_unknown_id_returns_none(memory: Memory) -> None:
    assert await memory.working.get(999_999) is None


async def test_get_does_not_touch_last_accessed(memory: Memory) -> None:
    added = await memory.working.add("x")
    before = await memory.working.get(added.added_id)
    after = await memory.working.get(added.added_id)
    assert before == after


async def test_access_touches_last_accessed_and_counts_mentions(memory: Memory) -> None:
    added = await memory.working.add("x")
    before = await memory.working.get(added.added_id)
    touched = await memory.working.access(added.added_id)
    assert before is not None
    assert touched.last_accessed > before.last_accessed
    assert touched.mention_count == before.mention_count + 1


async def test_access_changes_which_item_is_evicted(memory: Memory) -> None:
    ids = await add_many(memory, 10, 0.5)
    await memory.working.access(ids[0])
    result = await memory.working.add("new")
    assert result.evicted_id == ids[1]


async def test_clear_archives_critical_items_and_returns_count(memory: Memory) -> None:
    await add_many(memory, 3, 0.9, "critical")
    await add_many(memory, 4, 0.5, "normal")
    assert await memory.working.clear() == 7
    assert await memory.working.list() == []
    archived = (await memory.stale.list()).items
    assert sorted(a.original_content for a in archived) == [f"critical {i}" for i in range(3)]
    assert {a.reason for a in archived} == {ArchiveReason.MANUAL_ARCHIVE}


async def test_clear_of_empty_working_memory_returns_zero(memory: Memory) -> None:
    assert await memory.working.clear() == 0


# --- sessions, restore, capacity setting ---------------------------------------------------


async def test_capacity_applies_per_session(memory: Memory) -> None:
    for i in range(10):
        await memory.working.add(f"a{i}", session_id="a")
    result = await memory.working.add("b0", session_id="b")
    assert result.evicted_id is None and result.current_count == 1
    assert len(await memory.working.list("a")) == 10


async def test_restore_moves_an_item_back_and_may_evict(memory: Memory) -> None:
    added = await memory.working.add("precious", importance=0.7)
    archived = await memory.working.archive(added.added_id)
    await add_many(memory, 10, 0.5)
    result = await memory.stale.restore(archived.id)
    assert result.evicted_id is not None and result.current_count == 10
    assert await memory.stale.get(archived.id) is None
    restored = await memory.working.get(result.added_id)
    assert restored is not None and (restored.content, restored.importance) == ("precious", 0.7)


async def test_configured_capacity_and_threshold_are_used(memory: Memory) -> None:
    small = Memory(
        memory.db,
        memory.settings.with_overrides(working_memory_capacity=2, critical_importance=0.5),
    )
    await small.working.add("critical", importance=0.6)
    await small.working.add("normal 1", importance=0.5)
    result = await small.working.add("normal 2", importance=0.5)
    assert result.current_count == 2
    assert await contents(small) == {"critical", "normal 2"}


async def test_failed_add_leaves_nothing_behind(memory: Memory) -> None:
    await add_many(memory, 10, 0.5)
    with pytest.raises(ValidationError):
        await memory.working.add("x", ref_kind="INSIGHT")
    async with memory.db.read() as conn:
        total = await conn.scalar(text("SELECT count(*) FROM working_memory"))
        archived = await conn.scalar(text("SELECT count(*) FROM stale_memory"))
    assert (total, archived) == (10, 0)


async def test_every_insert_eviction_and_archive_is_logged_at_info(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed 000: inserts, evictions and archivals are logged with their ids and reason."""
    with caplog.at_level(logging.INFO, logger="gql_memory"):
        ids = await add_many(memory, 10, 0.5)
        evicting = await memory.working.add("one more", importance=0.9)
        await memory.working.archive(evicting.added_id)
        await memory.working.clear()
    by_event: dict[str, list[logging.LogRecord]] = {}
    for record in caplog.records:
        assert record.levelno == logging.INFO
        by_event.setdefault(getattr(record, "event", ""), []).append(record)
    adds = by_event["working_memory_add"]
    assert [r.added_id for r in adds] == [*ids, evicting.added_id]
    assert (adds[-1].evicted_ids, adds[-1].archived_ids) == ([ids[0]], [evicting.archived_id])
    [archive] = by_event["working_memory_archive"]
    assert (archive.original_ids, archive.reason) == ([evicting.added_id], "MANUAL_ARCHIVE")
    [clear] = by_event["working_memory_clear"]
    assert sorted(clear.deleted_ids) == ids[1:]
