"""In-process fan-out of memory events to subscribers, each with its own bounded queue.

The listener hands every event to ``EventHub.publish``, which only ever does ``put_nowait``:
a subscriber that stops reading fills its own queue, is marked overflowed and dropped, and
its stream ends with ``SubscriberOverflow`` — nobody else waits for it, and the process
never buffers without bound for a client that went away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from gql_memory.errors import ServiceUnavailableError, UnauthenticatedError, ValidationError
from gql_memory.memory.events import EventKind, MemoryEvent

log = logging.getLogger(__name__)

EventFilter = Callable[[MemoryEvent], bool]


class SubscriberOverflow(ServiceUnavailableError):
    """The subscriber fell behind by more than its queue holds; its stream is closed."""


class HubObserver(Protocol):
    """What the hub reports (metrics implement it)."""

    def subscription_opened(self, stream: str) -> None: ...

    def subscription_closed(self, stream: str) -> None: ...

    def subscriber_overflowed(self, stream: str) -> None: ...

    def event_received(self, event: MemoryEvent) -> None: ...


class TooManySubscriptions(ValidationError):
    """A key holds as many open subscriptions on this process as it may."""


class SubscriptionRevoked(UnauthenticatedError):
    """The API key behind the subscription was revoked."""


class Subscriber:
    """One subscription's queue; iterate it to receive its events in order."""

    def __init__(
        self,
        namespace: str,
        wants: EventFilter,
        stream: str,
        queue_size: int,
        key_id: int | None = None,
    ) -> None:
        self.namespace = namespace
        self.wants = wants
        self.stream = stream
        self.key_id = key_id
        self.queue: asyncio.Queue[MemoryEvent | None] = asyncio.Queue(maxsize=queue_size)
        self.overflowed = False
        self.revoked = False

    def revoke(self) -> None:
        """Ends the stream at once: nothing queued is delivered any more."""
        self.revoked = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)

    def offer(self, event: MemoryEvent) -> bool:
        """Queue the event without waiting; False (and overflowed) when the queue is full."""
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            return False
        return True

    def __aiter__(self) -> AsyncIterator[MemoryEvent]:
        return self

    async def __anext__(self) -> MemoryEvent:
        if self.revoked:
            raise SubscriptionRevoked("The API key of this subscription was revoked")
        if self.overflowed:
            raise self._overflow_error()
        event = await self.queue.get()
        if self.revoked:
            raise SubscriptionRevoked("The API key of this subscription was revoked")
        if self.overflowed:  # it overflowed while this task was waking up: events are lost
            raise self._overflow_error()
        if event is None:  # the hub closed (server shutting down)
            raise StopAsyncIteration
        return event

    def _overflow_error(self) -> SubscriberOverflow:
        return SubscriberOverflow(
            f"Subscription closed: the client fell more than {self.queue.maxsize} events "
            "behind. Resubscribe and refetch the current state."
        )


class EventHub:
    """Subscribers of this process by namespace; events of other namespaces never reach them."""

    def __init__(
        self,
        queue_size: int,
        observer: HubObserver | None = None,
        on_key_revoked: Callable[[int], None] | None = None,
    ) -> None:
        self.queue_size = queue_size
        self.observer = observer
        self.on_key_revoked = on_key_revoked
        self._subscribers: dict[str, set[Subscriber]] = {}
        self._slots: dict[str, int] = {}

    @contextmanager
    def slot(self, holder: str, limit: int) -> Iterator[None]:
        """One of ``holder``'s (an API key's) at most ``limit`` open subscriptions here."""
        held = self._slots.get(holder, 0)
        if held >= limit:
            raise TooManySubscriptions(
                f"At most {limit} open subscriptions per API key on this server "
                "(GQL_MEMORY_MAX_SUBSCRIPTIONS_PER_KEY): complete one first"
            )
        self._slots[holder] = held + 1
        try:
            yield
        finally:
            remaining = self._slots[holder] - 1
            if remaining:
                self._slots[holder] = remaining
            else:
                del self._slots[holder]

    def _revoke(self, event: MemoryEvent) -> None:
        revoked = set(event.ids)
        for subscriber in list(self._subscribers.get(event.namespace, ())):
            if subscriber.key_id in revoked:
                subscriber.revoke()
        if self.on_key_revoked:
            for key_id in revoked:
                self.on_key_revoked(key_id)

    @property
    def subscriber_count(self) -> int:
        return sum(len(s) for s in self._subscribers.values())

    @contextmanager
    def subscribe(
        self,
        namespace: str,
        wants: EventFilter = lambda _: True,
        stream: str = "memoryEvents",
        key_id: int | None = None,
    ) -> Iterator[Subscriber]:
        """Register a subscriber for the block's duration (removed however the block ends)."""
        subscriber = Subscriber(namespace, wants, stream, self.queue_size, key_id)
        self._subscribers.setdefault(namespace, set()).add(subscriber)
        if self.observer:
            self.observer.subscription_opened(stream)
        try:
            yield subscriber
        finally:
            self._remove(subscriber)
            if self.observer:
                self.observer.subscription_closed(stream)

    def publish(self, event: MemoryEvent) -> None:
        """Offer the event to every interested subscriber of its namespace; never waits."""
        if event.kind is EventKind.KEY_REVOKED:
            self._revoke(event)
            return
        if self.observer:
            self.observer.event_received(event)
        for subscriber in list(self._subscribers.get(event.namespace, ())):
            if subscriber.wants(event) and not subscriber.offer(event):
                log.warning(
                    "closing a %s subscription of namespace %r: more than %d events behind",
                    subscriber.stream,
                    subscriber.namespace,
                    self.queue_size,
                )
                self._remove(subscriber)
                if self.observer:
                    self.observer.subscriber_overflowed(subscriber.stream)

    def resync(self) -> None:
        """Tell every subscriber that events may have been missed (the listener reconnected)."""
        for namespace, subscribers in list(self._subscribers.items()):
            event = MemoryEvent(EventKind.RESYNC, namespace)
            for subscriber in list(subscribers):
                if not subscriber.offer(event):
                    self._remove(subscriber)
                    if self.observer:
                        self.observer.subscriber_overflowed(subscriber.stream)

    def close(self) -> None:
        """End every subscription (server shutdown): their streams complete normally."""
        for subscribers in list(self._subscribers.values()):
            for subscriber in list(subscribers):
                self._remove(subscriber)
                try:
                    subscriber.queue.put_nowait(None)
                except asyncio.QueueFull:
                    subscriber.overflowed = True

    def _remove(self, subscriber: Subscriber) -> None:
        subscribers = self._subscribers.get(subscriber.namespace)
        if subscribers is None:
            return
        subscribers.discard(subscriber)
        if not subscribers:
            del self._subscribers[subscriber.namespace]
