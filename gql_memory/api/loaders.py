"""Per-request DataLoaders: nested fields are fetched in one batch, never one query per row."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from strawberry.dataloader import DataLoader

from gql_memory.memory import Memory

K = TypeVar("K")
V = TypeVar("V")


def _loader(
    fetch: Callable[[Sequence[int]], Awaitable[Mapping[int, V]]],
) -> DataLoader[int, V | None]:
    async def load(keys: list[int]) -> list[V | None]:
        found = await fetch(keys)
        return [found.get(key) for key in keys]

    return DataLoader(load_fn=load)


def _edges_loader(memory: Memory) -> DataLoader[tuple[int, int], list[Any]]:
    """Keys are (node id, how many edges): one query per distinct page size."""

    async def load(keys: list[tuple[int, int]]) -> list[list[Any]]:
        found: dict[tuple[int, int], list[Any]] = {}
        for limit in {limit for _, limit in keys}:
            ids = [node for node, wanted in keys if wanted == limit]
            for node, edges in (await memory.graph.edges_of(ids, limit)).items():
                found[(node, limit)] = edges
        return [found.get(key, []) for key in keys]

    return DataLoader(load_fn=load)


class Loaders:
    """One set per request (caches must not outlive the request or cross namespaces)."""

    def __init__(self, memory: Memory) -> None:
        self.namespace = memory.namespace
        self.raw_dialogue = _loader(memory.raw.get_many)
        self.insight = _loader(memory.insights.get_many)
        self.insight_embedding = _loader(memory.insights.embeddings)
        self.episode = _loader(memory.episodes.get_many)
        self.episode_embedding = _loader(memory.episodes.embeddings)
        self.node = _loader(memory.graph.get_nodes)
        self.node_edges = _edges_loader(memory)
        self.edge_supersedes = _loader(memory.graph.edge_supersedes)
