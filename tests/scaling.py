"""How the cost of a function grows with its input, for tests of "linear time".

A test never asserts an absolute duration (it flakes on a busy machine). It compares two
measurements taken side by side in the same test: the cost of the same work on a small and on
a large input. Each cost is the calling thread's CPU time (``time.thread_time``: waiting for a
core does not count), the least of several runs (noise only ever adds time), small and large
interleaved so that a slow moment hits both, with the garbage collector paused.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _cpu_seconds(work: Callable[[T], object], argument: T) -> float:
    started = time.thread_time()
    work(argument)
    return time.thread_time() - started


def growth(work: Callable[[T], object], small: T, large: T, runs: int = 5) -> float:
    """How many times more CPU time ``work(large)`` takes than ``work(small)``."""
    small_costs: list[float] = []
    large_costs: list[float] = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            small_costs.append(_cpu_seconds(work, small))
            large_costs.append(_cpu_seconds(work, large))
    finally:
        if enabled:
            gc.enable()
    return min(large_costs) / max(min(small_costs), 1e-6)
