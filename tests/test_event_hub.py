"""The in-process fan-out: namespaces stay apart, a slow subscriber only hurts itself."""

from __future__ import annotations

import asyncio

import pytest

from gql_memory.live.hub import EventHub, SubscriberOverflow
from gql_memory.memory.events import EventKind, MemoryEvent


def added(namespace: str, item_id: int, session: str = "default") -> MemoryEvent:
    return MemoryEvent(EventKind.ADDED, namespace, session, (item_id,))


async def test_subscribers_see_only_their_own_namespace() -> None:
    hub = EventHub(queue_size=10)
    with hub.subscribe("a") as sub_a, hub.subscribe("b") as sub_b:
        hub.publish(added("b", 1))
        hub.publish(added("a", 2))
        assert (await anext(sub_a)).ids == (2,)
        assert (await anext(sub_b)).ids == (1,)
        assert sub_a.queue.empty() and sub_b.queue.empty()


async def test_a_filter_picks_the_events_a_subscriber_wants() -> None:
    hub = EventHub(queue_size=10)
    with hub.subscribe("a", lambda e: e.session_id == "s2") as subscriber:
        hub.publish(added("a", 1, "s1"))
        hub.publish(added("a", 2, "s2"))
        assert (await anext(subscriber)).ids == (2,)
        assert subscriber.queue.empty()


async def test_a_slow_subscriber_is_closed_and_never_blocks_the_others() -> None:
    hub = EventHub(queue_size=3)
    received: list[int] = []
    with hub.subscribe("a") as slow, hub.subscribe("a") as fast:

        async def read_fast() -> None:
            async for event in fast:
                received.append(event.ids[0])
                if len(received) == 50:
                    return

        reader = asyncio.create_task(read_fast())
        for i in range(50):
            hub.publish(added("a", i))  # never waits, whatever the slow one does
            await asyncio.sleep(0)
        async with asyncio.timeout(2):
            await reader
        assert received == list(range(50))
        with pytest.raises(SubscriberOverflow, match="fell more than 3 events behind"):
            await anext(slow)
        assert hub.subscriber_count == 1  # the slow one was dropped at once
    assert hub.subscriber_count == 0


async def test_resync_and_close_reach_every_subscriber() -> None:
    hub = EventHub(queue_size=10)
    with hub.subscribe("a", lambda e: False) as subscriber:
        hub.resync()  # delivered even to a subscriber whose filter wants nothing else
        assert (await anext(subscriber)).kind is EventKind.RESYNC
        hub.close()
        with pytest.raises(StopAsyncIteration):
            await anext(subscriber)
