"""Event-based decay (seed 002 ADR-003): attention by events, never by wall-clock time."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gql_memory import RawDialogueInput
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.working.archive import ArchiveReason
from gql_memory.memory.working.decay import attention
from tests.conftest import truncate_all


async def events(memory: Memory, count: int, session_id: str = "default") -> None:
    """``count`` write events in the session (stored dialogue turns)."""
    if count == 0:
        return
    await memory.raw.store_many(
        [RawDialogueInput(session_id, "user", f"turn {i}") for i in range(count)]
    )


async def attention_of(memory: Memory, item_id: int) -> float:
    item = await memory.working.get(item_id)
    assert item is not None
    return item.attention


@pytest.mark.parametrize("elapsed", [0, 1, 3, 10])
async def test_attention_follows_the_adr_formula(memory: Memory, elapsed: int) -> None:
    added = await memory.working.add("fact", importance=0.6)
    await events(memory, elapsed)
    expected = max(0.05, 0.6 * 0.85**elapsed)
    assert await attention_of(memory, added.added_id) == pytest.approx(expected)
    assert attention(0.6, elapsed, 0, memory.settings)[1] == pytest.approx(expected)


async def test_mentions_add_to_attention_and_restart_decay(memory: Memory) -> None:
    added = await memory.working.add("fact", importance=0.5)
    await events(memory, 4)
    await memory.working.access(added.added_id)
    assert await attention_of(memory, added.added_id) == pytest.approx(0.5 + 0.05)
    await events(memory, 2)
    assert await attention_of(memory, added.added_id) == pytest.approx(0.5 * 0.85**2 + 0.05)


async def test_pause_does_not_decay_anything(memory: Memory) -> None:
    added = await memory.working.add("fact", importance=0.7)
    await events(memory, 3)
    before = await attention_of(memory, added.added_id)
    await asyncio.sleep(1.0)  # a "pause": time passes, no events happen
    for _ in range(3):
        await memory.working.list()  # reading is not an event
    assert await attention_of(memory, added.added_id) == before


async def test_items_below_threshold_are_decay_evicted_and_archived(memory: Memory) -> None:
    added = await memory.working.add("fleeting", importance=0.5)
    await events(memory, 24)  # raw 0.5 * 0.85**24 = 0.0101 >= 0.01: survives at the floor
    assert await attention_of(memory, added.added_id) == pytest.approx(0.05)
    await events(memory, 1)  # raw 0.0086 < 0.01: evicted
    assert await memory.working.get(added.added_id) is None
    [archived] = (await memory.stale.list(reason=ArchiveReason.DECAY_EVICTION)).items
    assert (archived.original_id, archived.original_content) == (added.added_id, "fleeting")


async def test_decay_by_stored_turns_is_logged_with_ids_and_reason(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    added = await memory.working.add("fleeting secret", importance=0.5)
    await events(memory, 24)
    with caplog.at_level(logging.INFO, logger="gql_memory"):
        await events(memory, 1)  # this turn's sweep archives the item
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "working_memory_decay"]
    assert record.levelno == logging.INFO
    assert (record.reason, record.original_ids) == ("DECAY_EVICTION", [added.added_id])
    assert "secret" not in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gql_memory"):
        await events(memory, 1)  # nothing left to decay: no decay line
    assert not [r for r in caplog.records if getattr(r, "event", None) == "working_memory_decay"]


async def test_critical_items_never_decay_away(memory: Memory) -> None:
    added = await memory.working.add("critical", importance=0.9)
    await events(memory, 200)
    assert await attention_of(memory, added.added_id) == pytest.approx(0.05)
    assert (await memory.stale.list()).items == []


async def test_add_reports_decay_evictions(memory: Memory) -> None:
    old = await memory.working.add("old", importance=0.01)
    result = await memory.working.add("new", importance=0.5)
    assert result.decayed_ids == (old.added_id,)


async def test_an_importance_zero_item_is_decay_evicted_by_the_next_add(memory: Memory) -> None:
    zero = await memory.working.add("noise", importance=0.0)
    result = await memory.working.add("signal", importance=0.5)
    assert result.decayed_ids == (zero.added_id,) and result.evicted_id is None
    [archived] = (await memory.stale.list(reason=ArchiveReason.DECAY_EVICTION)).items
    assert archived.original_id == zero.added_id


async def test_decay_switched_off_neither_decays_nor_evicts(
    db: Database, settings: Settings
) -> None:
    """ADR-003's rollback switch (GQL_MEMORY_DECAY=false): attention stays at its base and
    only capacity evicts."""
    await truncate_all(db)
    memory = Memory(db, settings.with_overrides(decay=False))
    zero = await memory.working.add("noise", importance=0.0)
    kept = await memory.working.add("fact", importance=0.6)
    await events(memory, 40)
    result = await memory.working.add("signal", importance=0.5)
    assert result.decayed_ids == ()
    assert await attention_of(memory, kept.added_id) == pytest.approx(0.6)
    assert await memory.working.get(zero.added_id) is not None
    assert attention(0.6, 40, 0, memory.settings)[1] == pytest.approx(0.6)
    assert (await memory.stale.list()).items == []


async def test_events_of_other_sessions_do_not_decay_this_one(memory: Memory) -> None:
    added = await memory.working.add("mine", importance=0.5, session_id="a")
    await events(memory, 30, session_id="b")
    assert await attention_of(memory, added.added_id) == pytest.approx(0.5)


async def test_a_batch_of_turns_counts_events_per_session_in_few_statements(
    memory: Memory, statements: list[str]
) -> None:
    a = await memory.working.add("in a", importance=0.5, session_id="a")
    b = await memory.working.add("in b", importance=0.5, session_id="b")
    turns = [RawDialogueInput("a", "user", f"a {i}") for i in range(25)]
    turns += [RawDialogueInput("b", "user", "b 0")]
    turns += [RawDialogueInput(f"other {i}", "user", "x") for i in range(100)]
    statements.clear()
    await memory.raw.store_many(turns)
    assert len(statements) <= 8, statements  # not one lock, counter and sweep per session
    assert await memory.working.get(a.added_id) is None  # 25 events: decayed away
    assert await attention_of(memory, b.added_id) == pytest.approx(0.5 * 0.85)
