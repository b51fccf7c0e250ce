"""Synchronous calls into async code: an event loop on its own thread, and proxies onto it.

The synchronous ``MemoryStore`` is the async core run on a private loop thread, not a second
implementation: every coroutine a proxied call returns is handed to that loop
(``asyncio.run_coroutine_threadsafe``) and the calling thread waits for its result. Because
the loop is not the caller's, the facade works the same from plain scripts, from worker
threads (concurrently) and from code that already runs an event loop (a notebook, an async
framework), where it blocks that loop for the duration of each call, as any blocking client
does.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class StoreClosedError(RuntimeError):
    """The synchronous store was used before ``connect()`` or after ``close()``."""


class LoopThread:
    """An event loop running forever in a daemon thread until ``stop()``."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:  # what asyncio.run does on the way out
            try:
                pending = asyncio.all_tasks(self._loop)
                for task in pending:
                    task.cancel()
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                self._loop.run_until_complete(self._loop.shutdown_default_executor())
            finally:
                self._loop.close()

    @property
    def running(self) -> bool:
        return not self._stopped and self._thread.is_alive()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and wait for its result (or its exception, as is)."""
        coroutine = awaitable if inspect.iscoroutine(awaitable) else _awaiting(awaitable)
        if not self.running:
            coroutine.close()
            raise StoreClosedError("MemoryStore is closed: connect() it again or open a new one")
        if threading.get_ident() == self._thread.ident:
            coroutine.close()  # waiting here for our own loop would wait forever
            raise RuntimeError(
                "the synchronous MemoryStore was called from its own event loop thread; "
                "use AsyncMemoryStore in async code"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the work too
            raise

    async def run_from_loop(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` run on this loop from another event loop, which stays free
        meanwhile; cancelling the caller cancels the work too."""
        coroutine = awaitable if inspect.iscoroutine(awaitable) else _awaiting(awaitable)
        if not self.running:
            coroutine.close()
            raise StoreClosedError("MemoryStore is closed: connect() it again or open a new one")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return await asyncio.wrap_future(future)
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop (finishing its cleanup) and wait for the thread to end."""
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()


async def _awaiting(awaitable: Awaitable[T]) -> T:
    return await awaitable


@functools.cache
def _is_service(cls: type) -> bool:
    """True for classes with coroutine methods (the memory layers), whose instances are
    proxied; plain values (results, settings, strings) are handed out as they are."""
    return any(inspect.iscoroutinefunction(getattr(cls, name, None)) for name in dir(cls))


def synchronous(value: Any, loop: LoopThread) -> Any:
    """``value`` as synchronous code sees it: awaitables run to their result, service
    objects wrapped in a ``SyncProxy``, callables wrapped to do both with what they return."""
    if inspect.isawaitable(value):
        value = loop.run(value)
    if callable(value) and not isinstance(value, type):
        return _blocking(value, loop)
    if value is not None and _is_service(value.__class__):
        return SyncProxy(value, loop)
    return value


def _blocking(function: Callable[..., Any], loop: LoopThread) -> Callable[..., Any]:
    @functools.wraps(function)  # keeps name, docstring and signature for help() and IDEs
    def call(*args: Any, **kwargs: Any) -> Any:
        return synchronous(function(*args, **kwargs), loop)

    return call


class SyncProxy:
    """A memory layer (``store.working``, ``store.raw``, ...) with blocking methods: the
    same names, signatures, results and exceptions as the async object it wraps."""

    __slots__ = ("_loop", "_target")

    def __init__(self, target: Any, loop: LoopThread) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return synchronous(getattr(self._target, name), self._loop)

    def __dir__(self) -> list[str]:
        return dir(self._target)

    def __repr__(self) -> str:
        return f"<synchronous {self._target!r}>"
