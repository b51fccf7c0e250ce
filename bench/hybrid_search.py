"""Hybrid search latency (p50/p95) at 100k insights: both legs fused, graph propagation and
graph boosts, with each insight in the automatic graph."""

from __future__ import annotations

import asyncio
import os
import random
import time

from sqlalchemy import text

from bench.common import embedded_memory, percentile, vacuum_analyze
from bench.insight_search import load, sentence
from gql_memory.config import DEFAULT_DATABASE_ROLE
from gql_memory.db import Database
from gql_memory.db.fair import FairShare, NamespacedDatabase
from gql_memory.memory import Memory
from gql_memory.memory.search.types import SearchWeights

SIZE = int(os.environ.get("BENCH_HYBRID_SIZE", "100000"))
QUERIES = 200


async def measure(memory: Memory, rng: random.Random, **kwargs: object) -> tuple[float, float]:
    queries = [sentence(rng) for _ in range(QUERIES)]
    for q in queries[:10]:
        await memory.search(q, **kwargs)  # type: ignore[arg-type]
    latencies = []
    for q in queries:
        began = time.perf_counter()
        await memory.search(q, **kwargs)  # type: ignore[arg-type]
        latencies.append((time.perf_counter() - began) * 1000)
    return percentile(latencies, 50), percentile(latencies, 95)


async def run() -> list[str]:
    rng = random.Random(11)
    async with embedded_memory() as memory:
        db = memory.db
        await load(memory, SIZE, rng)
        # a session whose working memory refers to 5 graph nodes tied to insights,
        # each with 10 neighbours, so the boost query has real work to do
        tied = min(2000, SIZE)
        async with db.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO nodes (namespace, label, name, insight_id) "
                    "SELECT 'default', 'Fact', 'fact ' || g, g FROM generate_series(1, :n) g"
                ),
                {"n": tied},
            )
            await conn.execute(
                text(
                    "INSERT INTO edges (namespace, source_id, target_id, relation) "
                    "SELECT 'default', s, s + k, 'related' "
                    "FROM generate_series(1, :n) s, generate_series(1, 10) k"
                ),
                {"n": tied - 10},
            )
        for node in range(1, 6):
            await memory.working.add(
                f"focus {node}", 0.9, session_id="bench", ref_kind="NODE", ref_id=node
            )
        # the boost statement must not be planned for the empty tables of before the inserts
        await vacuum_analyze(db, "nodes", "edges")
        lines = [
            f"## Hybrid search at {SIZE:,} insights (dimension 384, hash embedder)",
            "",
            "Library call, top 10, including the query embedding. The text leg ranks at most "
            f"{memory.settings.text_search_max_matches:,} rows per search, found rarest query "
            "word first.",
            "",
            "| variant | p50 ms | p95 ms |",
            "| --- | --- | --- |",
        ]
        variants = {
            "hybrid (vector + text, DBSF + graph propagation), no session": {},
            "hybrid, RRF + graph propagation, no session": {"fusion": "RRF"},
            "hybrid + session and causal boosts": {"session_id": "bench"},
            "vector leg only": {"weights": SearchWeights(1, 0)},
            "text leg only": {"weights": SearchWeights(0, 1)},
            "hybrid, top 100": {"top_k": 100},
        }
        for name, kwargs in variants.items():
            p50, p95 = await measure(memory, rng, **kwargs)
            lines.append(f"| {name} | {p50:.1f} | {p95:.1f} |")
        # the server's path: requests run as gql_memory_app under row-level security
        url = memory.db.engine.url.render_as_string(hide_password=False)
        server_db = Database.from_url(url, memory.settings, role=DEFAULT_DATABASE_ROLE)
        try:
            scoped = NamespacedDatabase(server_db, "default", FairShare(10))
            as_server = Memory(scoped, memory.settings, "default", memory.embedder)
            p50, p95 = await measure(as_server, rng)
            lines.append(
                f"| hybrid as the server runs it (row-level security) | {p50:.1f} | {p95:.1f} |"
            )
        finally:
            await server_db.dispose()
        lines += await superseded_fifth(memory, rng)
    return [*lines, ""]


async def superseded_fifth(memory: Memory, rng: random.Random) -> list[str]:
    """Issue 14's check: with a fifth of the insights superseded, a search of now filters
    them in the index scans; its latency should stay within 10% of the all-valid figure."""
    queries_seed = rng.random()
    before = await measure(memory, random.Random(queries_seed))
    async with memory.db.write() as conn:
        await conn.execute(
            text(
                "UPDATE insights SET valid_to = valid_from + interval '1 second', "
                "superseded_by = id + 1 WHERE id % 5 = 0 AND id < (SELECT max(id) FROM insights)"
            )
        )
    # what autovacuum does once a fifth of a table changed (its default scale factor): without
    # it, the first searches set hint bits on every updated row and measure that instead
    await vacuum_analyze(memory.db, "insights")
    after = await measure(memory, random.Random(queries_seed))
    return [
        "",
        "Facts that change (issue 14): the same queries with a fifth of the insights superseded "
        "(a search of now filters them inside the index scans), after VACUUM ANALYZE as "
        "autovacuum would run it.",
        "",
        "| insights | p50 ms | p95 ms |",
        "| --- | --- | --- |",
        f"| all valid | {before[0]:.1f} | {before[1]:.1f} |",
        f"| 20% superseded | {after[0]:.1f} | {after[1]:.1f} |",
        f"| ratio | {after[0] / before[0]:.2f}x | {after[1] / before[1]:.2f}x |",
    ]


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    print("\n".join(main()))
