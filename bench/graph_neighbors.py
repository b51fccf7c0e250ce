"""Graph traversal latency (library calls) on a seeded 10k-node / 100k-edge random graph.

Issue 12 targets: 2-hop neighbours (BOTH) p95 <= 5 ms, 3-hop OUT p95 <= 30 ms. The graph and
the start nodes come from ``random.Random(SEED)``, so every run measures the same queries.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from sqlalchemy import text

from bench.common import embedded_memory, percentile
from gql_memory.memory import Memory

NODES = 10_000
EDGES = 100_000
RELATIONS = 5
SAMPLES = 300
WARMUP = 20
SEED = 7

# first: the largest page (GQL_MEMORY_MAX_PAGE_SIZE), so the 3-hop case still builds ~1,000
CASES: list[tuple[str, dict[str, Any]]] = [
    ("neighbors depth 1, BOTH", {"depth": 1, "first": 1000}),
    ("neighbors depth 2, BOTH", {"depth": 2, "first": 1000}),
    ("neighbors depth 2, OUT", {"depth": 2, "direction": "OUT", "first": 1000}),
    ("neighbors depth 2, one relation", {"depth": 2, "relation": "rel1", "first": 1000}),
    ("neighbors depth 3, OUT", {"depth": 3, "direction": "OUT", "first": 1000}),
]


def random_edges(rng: random.Random, nodes: int, edges: int) -> list[tuple[int, int, str]]:
    """``edges`` distinct directed (source, target, relation) by node index, no self-loops."""
    pairs: dict[tuple[int, int], str] = {}
    while len(pairs) < edges:
        s, t = rng.randrange(nodes), rng.randrange(nodes)
        if s != t:
            pairs.setdefault((s, t), f"rel{rng.randrange(RELATIONS)}")
    return [(s, t, relation) for (s, t), relation in pairs.items()]


async def build_graph(memory: Memory, seed: int = SEED) -> list[int]:
    """The seeded graph in the default namespace; returns the node ids by index."""
    rng = random.Random(seed)
    edges = random_edges(rng, NODES, EDGES)
    async with memory.db.write() as conn:
        ids = list(
            (
                await conn.execute(
                    text(
                        "INSERT INTO nodes (namespace, label, name) "
                        "SELECT 'default', 'N', 'node ' || g FROM generate_series(1, :n) g "
                        "ORDER BY g RETURNING id"
                    ),
                    {"n": NODES},
                )
            ).scalars()
        )
        ids.sort()
        await conn.execute(
            text(
                "INSERT INTO edges (namespace, source_id, target_id, relation) "
                "SELECT 'default', s, t, r FROM unnest(CAST(:s AS bigint[]), "
                "CAST(:t AS bigint[]), CAST(:r AS text[])) AS e(s, t, r)"
            ),
            {
                "s": [ids[s] for s, _, _ in edges],
                "t": [ids[t] for _, t, _ in edges],
                "r": [r for _, _, r in edges],
            },
        )
        await conn.execute(text("ANALYZE nodes"))
        await conn.execute(text("ANALYZE edges"))
    return ids


async def measure(memory: Memory, ids: list[int], seed: int = SEED) -> list[str]:
    """One table row per case: p50 / p95 over SAMPLES seeded start nodes, after a warm-up."""
    rows = []
    for index, (name, kwargs) in enumerate(CASES):
        rng = random.Random(seed * 1000 + index)
        starts = [rng.choice(ids) for _ in range(WARMUP + SAMPLES)]
        latencies, sizes = [], []
        for position, start in enumerate(starts):
            began = time.perf_counter()
            found = await memory.graph.neighbors(start, **kwargs)
            if position >= WARMUP:
                latencies.append((time.perf_counter() - began) * 1000)
                sizes.append(len(found))
        rows.append(
            f"| {name} | {percentile(latencies, 50):.1f} | "
            f"{percentile(latencies, 95):.1f} | {sum(sizes) / len(sizes):.0f} |"
        )
    rng = random.Random(seed * 1000 + len(CASES))
    pairs = [(rng.choice(ids), rng.choice(ids)) for _ in range(WARMUP + SAMPLES)]
    latencies, found_paths = [], 0
    for position, (a, b) in enumerate(pairs):
        began = time.perf_counter()
        path = await memory.graph.path(a, b, max_depth=5)
        if position >= WARMUP:
            latencies.append((time.perf_counter() - began) * 1000)
            found_paths += path is not None
    rows.append(
        f"| shortest path, maxDepth 5 | {percentile(latencies, 50):.1f} | "
        f"{percentile(latencies, 95):.1f} | {found_paths / SAMPLES:.0%} found |"
    )
    return rows


async def run() -> list[str]:
    async with embedded_memory() as memory:
        ids = await build_graph(memory)
        rows = await measure(memory, ids)
    return [
        f"## Graph traversal on {NODES:,} nodes / {EDGES:,} edges (random graph, seed {SEED})",
        "",
        "| query | p50 ms | p95 ms | mean nodes returned |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
    ]


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    print("\n".join(main()))
