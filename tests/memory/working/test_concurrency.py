"""Concurrent adds never exceed capacity and never lose or duplicate an item."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory

ADDS = 200


async def assert_invariants(db: Database, adds: int, capacity: int) -> None:
    async with db.read() as conn:
        working = await conn.scalar(text("SELECT count(*) FROM working_memory"))
        stale = await conn.scalar(text("SELECT count(*) FROM stale_memory"))
        distinct = await conn.scalar(
            text(
                "SELECT count(DISTINCT c) FROM (SELECT content c FROM working_memory "
                "UNION ALL SELECT original_content FROM stale_memory) x"
            )
        )
    assert working == min(adds, capacity)
    assert working + stale == adds
    assert distinct == adds  # no item lost, none duplicated


@pytest.mark.parametrize("run", range(3))
async def test_concurrent_adds_never_exceed_capacity(
    memory: Memory, settings: Settings, run: int
) -> None:
    # Two engines = two independent connection pools, like two server workers.
    other_db = Database.from_url(settings.database_url or "", settings)
    other = Memory(other_db, settings)
    try:
        await asyncio.gather(
            *(
                (memory if i % 2 else other).working.add(f"run {run} item {i}", importance=0.5)
                for i in range(ADDS)
            )
        )
    finally:
        await other_db.dispose()
    await assert_invariants(memory.db, ADDS, settings.working_memory_capacity)


async def test_concurrent_adds_with_critical_items_still_hold_capacity(memory: Memory) -> None:
    await asyncio.gather(
        *(memory.working.add(f"item {i}", importance=0.9 if i % 3 else 0.2) for i in range(ADDS))
    )
    await assert_invariants(memory.db, ADDS, memory.settings.working_memory_capacity)


async def test_archives_racing_adds_never_fail_or_lose_items(memory: Memory) -> None:
    from gql_memory import NotFoundError

    ids = [(await memory.working.add(f"seed {i}")).added_id for i in range(10)]

    async def archive(item_id: int) -> None:
        # evicted by a concurrent add first: NOT_FOUND is an answer, not a failure
        with contextlib.suppress(NotFoundError):
            await memory.working.archive(item_id)

    await asyncio.gather(
        *(memory.working.add(f"new {i}") for i in range(40)), *(archive(i) for i in ids)
    )
    async with memory.db.read() as conn:
        working = await conn.scalar(text("SELECT count(*) FROM working_memory"))
        stale = await conn.scalar(text("SELECT count(*) FROM stale_memory"))
    assert working <= 10 and working + stale == 50
