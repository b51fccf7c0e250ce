"""Fair sharing: a namespace holds at most its share of the pool; other tenants pass."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.db.fair import FairShare, NamespacedDatabase


async def test_a_busy_namespace_queues_behind_itself_not_in_front_of_others(db: Database) -> None:
    share = FairShare(2)
    busy, quiet = NamespacedDatabase(db, "busy", share), NamespacedDatabase(db, "quiet", share)
    release = asyncio.Event()
    inside = 0

    async def hold() -> None:
        nonlocal inside
        async with busy.read() as conn:
            await conn.execute(text("SELECT 1"))
            inside += 1
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(6)]
    while inside < 2:
        await asyncio.sleep(0.01)
    for _ in range(20):
        await asyncio.sleep(0)  # every queued task has had its chance to enter
    assert inside == 2 and share.in_use("busy") == 6
    async with quiet.read() as conn:  # another tenant is not behind the busy one's queue
        assert await conn.scalar(text("SELECT 1")) == 1
    assert inside == 2
    release.set()
    await asyncio.gather(*tasks)
    assert inside == 6 and share.in_use("busy") == 0


async def test_nested_work_of_a_namespace_never_deadlocks_on_its_own_limit(db: Database) -> None:
    share = FairShare(1)
    tenant = NamespacedDatabase(db, "t", share)
    async with tenant.write() as outer:
        await outer.execute(text("SELECT 1"))
        async with tenant.read() as inner:  # the same task holds the slot: passes through
            assert await inner.scalar(text("SELECT 2")) == 2

        async def spawned() -> int:
            async with tenant.read() as conn:
                return int(await conn.scalar(text("SELECT 3")) or 0)

        assert await asyncio.gather(spawned(), spawned()) == [3, 3]
