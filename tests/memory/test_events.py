"""Memory events: every write path NOTIFYs, inside its transaction, only ids and kinds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gql_memory import RawDialogueInput
from gql_memory.config import NOTIFY_PAYLOAD_MAX_BYTES, Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.events import EventKind, MemoryEvent, process_origin, publish
from tests.live import EventTap


@pytest_asyncio.fixture
async def tap(database_url: str, memory: Memory) -> AsyncIterator[EventTap]:
    async with EventTap.open(database_url) as tap:
        yield tap


def kinds(events: list[MemoryEvent]) -> list[str]:
    return [e.kind.value for e in events]


async def test_an_add_reports_added_with_its_session_and_id(memory: Memory, tap: EventTap) -> None:
    result = await memory.working.add("fact", session_id="chat-1")
    [event] = await tap.drain()
    assert event.kind is EventKind.ADDED
    assert (event.namespace, event.session_id, event.ids) == (
        "default",
        "chat-1",
        (result.added_id,),
    )
    assert "fact" not in event.to_payload()  # ids, never content


async def test_an_add_over_capacity_reports_the_eviction_with_its_archive_row(
    memory: Memory, tap: EventTap
) -> None:
    for i in range(memory.settings.working_memory_capacity):
        await memory.working.add(f"item {i}")
    await tap.drain()
    result = await memory.working.add("one more")
    added, evicted = await tap.drain()
    assert (added.kind, added.ids) == (EventKind.ADDED, (result.added_id,))
    assert evicted.kind is EventKind.EVICTED and evicted.archive_reason == "LRU_EVICTION"
    assert (evicted.ids, evicted.archived_ids) == ((result.evicted_id,), (result.archived_id,))


async def test_access_archive_restore_and_clear_report_their_kinds(
    memory: Memory, tap: EventTap
) -> None:
    keep = await memory.working.add("critical", importance=0.9)
    other = await memory.working.add("ordinary", importance=0.3)
    await tap.drain()
    await memory.working.access(other.added_id)
    archived = await memory.working.archive(other.added_id)
    restored = await memory.stale.restore(archived.id)
    await memory.working.clear()
    events = await tap.drain()
    assert kinds(events) == ["ACCESSED", "ARCHIVED", "RESTORED", "ARCHIVED", "CLEARED"]
    assert events[1].archived_ids == (archived.id,)
    assert (events[2].ids, events[2].archived_ids) == ((restored.added_id,), (archived.id,))
    assert events[3].ids == (keep.added_id,)  # critical items are archived before a clear
    assert events[4].ids == (restored.added_id,)


async def test_decay_evictions_are_reported_as_decayed(memory: Memory, tap: EventTap) -> None:
    faded = await memory.working.add("fades", importance=0.5)
    await memory.raw.store_many([RawDialogueInput("default", "user", f"t{i}") for i in range(25)])
    events = await tap.drain()
    decayed = [e for e in events if e.kind is EventKind.DECAYED]
    assert [e.ids for e in decayed] == [(faded.added_id,)]
    assert decayed[0].archive_reason == "DECAY_EVICTION"
    assert kinds(events)[-1] == "DIALOGUE_STORED" and len(events[-1].ids) == 25


async def test_insights_episodes_and_erasure_report_their_kinds(
    memory: Memory, tap: EventTap
) -> None:
    insight = await memory.insights.add("PostgreSQL delivers NOTIFY on commit")
    episode = await memory.episodes.store("q", 0.5, "lesson")
    await memory.insights.delete(insight.id)
    await memory.episodes.delete(episode.id)
    await memory.forget_session("default")
    events = await tap.drain()
    assert kinds(events) == [
        "INSIGHT_ADDED",
        "EPISODE_STORED",
        "INSIGHT_DELETED",
        "EPISODE_DELETED",
        "SESSION_FORGOTTEN",
    ]
    assert events[0].ids == (insight.id,) and events[0].session_id is None
    assert events[1].ids == (episode.id,)


async def test_graph_writes_report_their_kinds(memory: Memory, tap: EventTap) -> None:
    a = await memory.graph.add_node("Person", "Ada")
    edge = await memory.graph.add_edge(a.id, ("Machine", "Engine"), "built", create_missing=True)
    await memory.graph.delete_node(a.id)
    await memory.graph.delete_node(a.id)  # nothing deleted: nothing reported
    events = await tap.drain()
    assert kinds(events) == ["NODE_ADDED", "NODE_ADDED", "EDGE_ADDED", "NODE_DELETED"]
    assert events[0].ids == (a.id,)
    assert events[2].ids == (edge.id, a.id, edge.target_id)


async def test_a_rolled_back_write_is_never_delivered(memory: Memory, tap: EventTap) -> None:
    with pytest.raises(RuntimeError):
        async with memory.db.write() as conn:
            await memory.working.add_in(conn, content="never committed")
            raise RuntimeError("abort the transaction")
    committed = await memory.working.add("committed")
    [event] = await tap.drain()
    assert event.ids == (committed.added_id,)


async def test_a_bulk_write_is_split_into_payloads_under_the_notify_limit(
    memory: Memory, tap: EventTap
) -> None:
    ids = tuple(range(10**15, 10**15 + 3000))
    event = MemoryEvent(EventKind.INSIGHT_ADDED, "n" * 255, ids=ids)
    parts = event.split()
    assert len(parts) > 1
    assert all(len(p.to_payload().encode()) <= NOTIFY_PAYLOAD_MAX_BYTES for p in parts)
    async with memory.db.write() as conn:
        await publish(conn, event)
    received = await tap.drain()
    assert tuple(i for e in received for i in e.ids) == ids


def test_payloads_round_trip_and_foreign_payloads_are_refused() -> None:
    event = MemoryEvent(EventKind.EVICTED, "ns", "sëssion", (1, 2), (10, 20))
    assert MemoryEvent.from_payload(event.to_payload()) == event
    for foreign in ("hello", "{}", '{"v": 99, "k": "ADDED"}', '{"v": 1, "k": "NOPE"}'):
        with pytest.raises(ValueError):
            MemoryEvent.from_payload(foreign)


async def test_nothing_is_published_with_live_events_switched_off(
    memory: Memory, tap: EventTap, settings: Settings
) -> None:
    quiet_settings = settings.with_overrides(live_events=False)
    assert quiet_settings.database_url
    quiet_db = Database.from_url(quiet_settings.database_url, quiet_settings)
    try:
        quiet = Memory(quiet_db, quiet_settings)
        await quiet.working.add("unannounced")
        await quiet.insights.add("unannounced insight")
    finally:
        await quiet_db.dispose()
    assert await tap.drain() == []


async def test_payloads_built_by_the_database_parse_and_stay_under_the_limit(
    memory: Memory, tap: EventTap, settings: Settings
) -> None:
    """Adds, sweeps and archives publish from inside the database (migration 0010): their
    payloads are the same version-1 events, and a large archive goes out in chunks."""
    roomy = Memory(memory.db, settings.with_overrides(working_memory_capacity=300))
    session = "é" * 255
    added = [
        (await roomy.working.add(f"item {i}", importance=0.9, session_id=session)).added_id
        for i in range(250)
    ]
    events = await tap.drain()
    assert [(e.kind, e.session_id, e.ids) for e in events] == [
        (EventKind.ADDED, session, (i,)) for i in added
    ]
    assert {e.origin for e in events} == {process_origin()}
    assert await roomy.working.clear(session) == 250
    cleared = await tap.drain()
    archived = [e for e in cleared if e.kind is EventKind.ARCHIVED]
    assert len(archived) > 1  # chunked
    assert {e.kind for e in cleared} == {EventKind.ARCHIVED, EventKind.CLEARED}
    assert all(len(e.to_payload().encode()) <= NOTIFY_PAYLOAD_MAX_BYTES for e in archived)
    assert [i for e in archived for i in e.ids] == added  # oldest access first
    stale = await roomy.stale.list(session_id=session, first=250)
    assert sorted(i for e in archived for i in e.archived_ids) == sorted(s.id for s in stale.items)
