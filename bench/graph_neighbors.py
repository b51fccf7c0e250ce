"""2-hop neighbors latency on a 10k-node / 100k-edge graph (the seed targets p95 < 20 ms)."""

from __future__ import annotations

import asyncio
import random
import time

from sqlalchemy import text

from bench.common import embedded_memory, percentile

NODES = 10_000
EDGES = 100_000
SAMPLES = 300


async def run() -> list[str]:
    rng = random.Random(7)
    async with embedded_memory() as memory:
        db = memory.db
        async with db.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO nodes (namespace, label, name) "
                    "SELECT 'default', 'N', 'node ' || g FROM generate_series(1, :n) g"
                ),
                {"n": NODES},
            )
            # random distinct directed edges, no self-loops, 5 relation kinds
            await conn.execute(
                text(
                    """
                    INSERT INTO edges (namespace, source_id, target_id, relation)
                    SELECT 'default', s, t, 'rel' || (abs(s * 31 + t) % 5)
                    FROM (
                        SELECT DISTINCT 1 + floor(random() * :n)::bigint AS s,
                                        1 + floor(random() * :n)::bigint AS t
                        FROM generate_series(1, :m)
                    ) pairs
                    WHERE s <> t
                    """
                ),
                {"n": NODES, "m": int(EDGES * 1.01)},
            )
            edges = await conn.scalar(text("SELECT count(*) FROM edges"))
            await conn.execute(text("ANALYZE nodes"))
            await conn.execute(text("ANALYZE edges"))
        lines = [
            f"## Graph traversal on {NODES:,} nodes / {edges:,} edges (random graph)",
            "",
            "| query | p50 ms | p95 ms | mean nodes returned |",
            "| --- | --- | --- | --- |",
        ]
        cases = [
            ("neighbors depth 1, BOTH", {"depth": 1}),
            ("neighbors depth 2, BOTH", {"depth": 2}),
            ("neighbors depth 2, OUT", {"depth": 2, "direction": "OUT"}),
            ("neighbors depth 2, one relation", {"depth": 2, "relation": "rel1"}),
            ("neighbors depth 3, OUT", {"depth": 3, "direction": "OUT"}),
        ]
        for name, kwargs in cases:
            latencies, sizes = [], []
            for _ in range(SAMPLES):
                start = rng.randint(1, NODES)
                began = time.perf_counter()
                found = await memory.graph.neighbors(start, **kwargs)
                latencies.append((time.perf_counter() - began) * 1000)
                sizes.append(len(found))
            lines.append(
                f"| {name} | {percentile(latencies, 50):.1f} | "
                f"{percentile(latencies, 95):.1f} | {sum(sizes) / len(sizes):.0f} |"
            )
        latencies = []
        for _ in range(SAMPLES):
            a, b = rng.randint(1, NODES), rng.randint(1, NODES)
            began = time.perf_counter()
            await memory.graph.path(a, b, max_depth=5)
            latencies.append((time.perf_counter() - began) * 1000)
        lines.append(
            f"| shortest path, maxDepth 5 | {percentile(latencies, 50):.1f} | "
            f"{percentile(latencies, 95):.1f} | - |"
        )
    return [*lines, ""]


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    print("\n".join(main()))
