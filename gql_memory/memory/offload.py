"""CPU-bound work off the event loop.

Small inputs run inline (a thread hop would cost more than the work); inputs above
INLINE_CPU_CHARS run in a worker thread, so one request's large input never stalls the
event loop, and every other request with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from gql_memory.config import INLINE_CPU_CHARS

P = ParamSpec("P")
T = TypeVar("T")


async def run_cpu(chars: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, in a worker thread when ``chars`` is above the threshold."""
    if chars <= INLINE_CPU_CHARS:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)
