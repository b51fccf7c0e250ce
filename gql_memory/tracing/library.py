"""The library's calls traced: each layer of a ``Memory`` (``working``, ``insights``,
``graph`` ...) and its own calls (``search``, ``context`` ...) replaced, on that instance
only, by traced ones. Applied by ``AsyncMemoryStore`` when tracing is on; off, nothing is
replaced and a call costs what it did."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gql_memory.tracing.spans import Tracing

LAYERS = (
    "raw",
    "working",
    "stale",
    "insights",
    "episodes",
    "graph",
    "knowledge_graph",
    "extraction",
)
CALLS = ("search", "context", "stats", "forget_session")


class TracedLayer:
    """A layer whose coroutine methods open a span per call; everything else passes
    through."""

    def __init__(self, inner: Any, layer: str, namespace: str, tracing: Tracing) -> None:
        self._inner = inner
        self._layer = layer
        self._namespace = namespace
        self._tracing = tracing

    async def _traced_layer(self) -> None:
        """Never called: the synchronous ``MemoryStore`` proxies the objects whose class has
        a coroutine method (loop_thread._is_service), and this one's come through
        ``__getattr__``."""

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(value):
            return value
        traced = self._tracing.wrap(value, f"{self._layer}.{name}", self._namespace)
        setattr(self, name, traced)  # once per method and instance
        return traced


def trace_memory(memory: Any, tracing: Tracing) -> Any:
    """``memory`` (a ``gql_memory.memory.Memory``) with its layers and calls traced."""
    for layer in LAYERS:
        setattr(
            memory, layer, TracedLayer(getattr(memory, layer), layer, memory.namespace, tracing)
        )
    for call in CALLS:
        setattr(memory, call, tracing.wrap(getattr(memory, call), call, memory.namespace))
    return memory
