"""One way for the adapters to call either library class: written once against
``AsyncMemoryStore``, run on a ``MemoryStore``'s own loop thread when given one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from gql_memory.store import AsyncMemoryStore, MemoryStore

T = TypeVar("T")
Store = MemoryStore | AsyncMemoryStore


class StoreBridge:
    """Runs ``call(async_store)`` where the store's connection pool lives."""

    def __init__(self, store: Store) -> None:
        if not isinstance(store, MemoryStore | AsyncMemoryStore):
            raise TypeError(
                f"expected a MemoryStore or AsyncMemoryStore, got {type(store).__name__}"
            )
        self.store = store

    async def run(self, call: Callable[[AsyncMemoryStore], Awaitable[T]]) -> T:
        """From async code: on this loop for an async store, else on the sync store's thread
        (this loop stays free meanwhile)."""
        if isinstance(self.store, AsyncMemoryStore):
            return await call(self.store)
        return await self.store.run_async(call)

    def run_blocking(self, call: Callable[[AsyncMemoryStore], Awaitable[T]]) -> T:
        """From synchronous code: needs a ``MemoryStore`` (an ``AsyncMemoryStore``'s pool
        belongs to an event loop that a blocking call cannot borrow)."""
        if isinstance(self.store, AsyncMemoryStore):
            raise TypeError(
                "synchronous calls need a MemoryStore: an AsyncMemoryStore serves the async "
                "methods only"
            )
        return self.store.run(call)
