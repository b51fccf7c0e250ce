"""Stale memory: filters, pagination, validation."""

from __future__ import annotations

import pytest

from gql_memory import NotFoundError, ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.working.archive import ArchiveReason


async def archive(memory: Memory, content: str, importance: float, session: str = "default") -> int:
    added = await memory.working.add(content, importance=importance, session_id=session)
    return (await memory.working.archive(added.added_id)).id


async def test_newest_first_and_filters(memory: Memory) -> None:
    await archive(memory, "low", 0.2)
    await archive(memory, "high", 0.9)
    await archive(memory, "other session", 0.95, session="s2")
    page = await memory.stale.list()
    assert [i.original_content for i in page.items] == ["other session", "high", "low"]
    high = await memory.stale.list(importance_min=0.8, session_id="default")
    assert [i.original_content for i in high.items] == ["high"]
    assert (await memory.stale.list(reason=ArchiveReason.LRU_EVICTION)).items == []
    assert len((await memory.stale.list(reason="MANUAL_ARCHIVE")).items) == 3


async def test_pagination_walks_every_item_once(memory: Memory) -> None:
    for i in range(7):
        await archive(memory, f"item {i}", 0.5)
    seen, after = [], None
    while True:
        page = await memory.stale.list(first=3, after=after)
        seen.extend(i.original_content for i in page.items)
        if not page.has_next_page:
            break
        after = page.end_cursor
    assert seen == [f"item {i}" for i in reversed(range(7))]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"importance_min": 1.5}, "importanceMin must be <= 1.0"),
        ({"importance_min": -1}, "importanceMin must be >= 0.0"),
        ({"first": 0}, "first must be between 1 and 1000"),
        ({"first": 1001}, "first must be between 1 and 1000"),
        ({"after": "not-a-cursor"}, "after is not a valid cursor"),
        ({"reason": "FORGOTTEN"}, "reason must be one of"),
    ],
)
async def test_invalid_filters_are_rejected(memory: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.stale.list(**kwargs)


async def test_restore_unknown_id_is_not_found(memory: Memory) -> None:
    with pytest.raises(NotFoundError):
        await memory.stale.restore(12345)


async def test_no_match_is_an_empty_page(memory: Memory) -> None:
    page = await memory.stale.list(session_id="nobody")
    assert page.items == [] and not page.has_next_page and page.end_cursor is None


async def test_archive_turns_archives_the_newest_unarchived_turns_and_keeps_the_transcript(
    memory: Memory,
) -> None:
    turns = [await memory.raw.store("chat", "user", f"turn {i}") for i in range(4)]
    await memory.raw.store("other", "user", "another session")
    [popped] = await memory.stale.archive_turns("chat", newest=1)
    assert (popped.ref_kind, popped.ref_id) == ("RAW", turns[3].id)
    assert popped.original_content == "user: turn 3"
    assert popped.reason is ArchiveReason.MANUAL_ARCHIVE
    [again] = await memory.stale.archive_turns("chat", newest=1)  # the next newest
    assert again.ref_id == turns[2].id
    rest = await memory.stale.archive_turns("chat")
    assert [i.ref_id for i in rest] == [turns[1].id, turns[0].id]
    assert await memory.stale.archive_turns("chat") == []
    assert len((await memory.raw.list(session_id="chat")).items) == 4  # nothing deleted
    assert len((await memory.stale.list(session_id="chat")).items) == 4
    with pytest.raises(ValidationError, match="newest must be between"):
        await memory.stale.archive_turns("chat", newest=0)
