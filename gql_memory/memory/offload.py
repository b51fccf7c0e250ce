"""CPU-bound work off the event loop.

Small inputs run inline (a thread hop would cost more than the work); inputs above
INLINE_CPU_CHARS run in a worker thread, so one request's large input never stalls the
event loop, and every other request with it.

The worker is one thread for the whole process: pure-Python work holds the GIL, so every
further busy thread would take GIL time from the event loop (30 concurrent packings on 30
threads left it a thirtieth). Large work queues behind large work; small work never waits.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from gql_memory.config import INLINE_CPU_CHARS

P = ParamSpec("P")
T = TypeVar("T")


@functools.cache
def _worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="gql-memory-cpu")


async def run_cpu(chars: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, in the worker thread when ``chars`` is above the threshold."""
    if chars <= INLINE_CPU_CHARS:
        return work(*args, **kwargs)
    call = functools.partial(work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_worker(), call)


async def run_in_worker(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)`` in the worker thread whatever its input: for work that takes
    milliseconds even on a small input, or a library that is not known to be thread-safe
    (one worker thread runs one call at a time)."""
    call = functools.partial(work, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_worker(), call)
