"""insightSearch latency (p50/p95) at 10k and 100k insights of dimension 384.

Synthetic insights (sentences drawn from a fixed vocabulary, seeded) are embedded with the
local embedder and bulk-loaded; the HNSW index is built after loading, as an operator would
for an import. Reports library-level and HTTP latency, the query plan, and HNSW recall@5
against an exact (sequential) search.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time

from sqlalchemy import text

from bench.common import embedded_memory, percentile, vacuum_analyze
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput, search_sql
from gql_memory.memory.vectors import vector_literal

SIZES = [int(s) for s in os.environ.get("BENCH_INSIGHT_SIZES", "10000,100000").split(",")]
QUERIES = 200
COMMON = (
    "user prefers likes dislikes travel hiking tea coffee project deadline meeting friday "
    "paris berlin python database postgres vector search memory agent session team sister "
    "brother dog cat garden music guitar piano painting book novel movie running marathon "
    "nurse engineer teacher doctor kitchen recipe pasta sushi birthday wedding holiday beach "
    "mountain winter summer budget invoice customer support ticket bug release deploy"
).split()
# A Zipf-like vocabulary: a few common words and a long tail of rare ones (pseudo-words),
# so that document frequencies look like natural text rather than a 70-word toy language.
SYLLABLES = "ka lo mi ne ru sa ti vo ze da fe gu hi jo pu".split()
RARE = sorted({a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES})
VOCABULARY = COMMON + RARE
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]


def sentence(rng: random.Random) -> str:
    words = rng.choices(VOCABULARY, weights=WEIGHTS, k=rng.randint(6, 16))
    return " ".join(words)


async def load(memory: Memory, count: int, rng: random.Random) -> None:
    async with memory.db.write() as conn:
        await conn.execute(text("DROP INDEX IF EXISTS ix_insights_embedding_hnsw"))
    batch = 2000
    for start in range(0, count, batch):
        await memory.insights.add_many(
            [InsightInput(sentence(rng)) for _ in range(min(batch, count - start))]
        )
    async with memory.db.write() as conn:
        await conn.execute(text("SET LOCAL statement_timeout = 0"))  # index builds take a while
        await conn.execute(text("SET LOCAL maintenance_work_mem = '1GB'"))
        await conn.execute(
            text(
                "CREATE INDEX ix_insights_embedding_hnsw ON insights "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
        )
    # settle the table as autovacuum would (visibility map, statistics), so that the
    # measurements do not race a background VACUUM of the freshly loaded rows
    await vacuum_analyze(memory.db, "insights", "nodes", "edges")  # the automatic graph too


async def measure(memory: Memory, rng: random.Random) -> dict[str, float]:
    queries = [sentence(rng) for _ in range(QUERIES)]
    for q in queries[:10]:
        await memory.insights.search(q)
    latencies = []
    for q in queries:
        started = time.perf_counter()
        await memory.insights.search(q, top_k=5)
        latencies.append((time.perf_counter() - started) * 1000)
    # recall@5 of the HNSW index against an exact scan, on 50 queries
    embedder = HashEmbedder(384)
    search_now = search_sql(None)  # the insights valid now, as insightSearch runs it
    hits = total = 0
    for q in queries[:50]:
        vector = vector_literal(embedder.embed_one(q))
        params = {"q": vector, "ns": "default", "k": 5, "exact_rows": 0}
        async with memory.db.read() as conn:
            approx = set((await conn.execute(text(search_now), params)).scalars())
            # the exact scan a namespace below GQL_MEMORY_VECTOR_EXACT_MAX_ROWS gets
            everything = params | {"exact_rows": 10**9}
            exact = set((await conn.execute(text(search_now), everything)).scalars())
        hits += len(approx & exact)
        total += len(exact)
    async with memory.db.read() as conn:
        plan = "\n".join((await conn.execute(text("EXPLAIN " + search_now), params)).scalars())
    return {
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "recall": hits / total,
        "uses_index": float("ix_insights_embedding_hnsw" in plan),
    }


async def run() -> list[str]:
    lines = [
        "## insightSearch latency (library call: embed query + HNSW search), dimension 384",
        "",
        "| insights | p50 ms | p95 ms | HNSW recall@5 vs exact | plan uses HNSW | load s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rng = random.Random(42)
    async with embedded_memory() as memory:
        loaded = 0
        for size in SIZES:
            started = time.perf_counter()
            await load(memory, size - loaded, rng)
            load_s = time.perf_counter() - started
            loaded = size
            result = await measure(memory, rng)
            lines.append(
                f"| {size:,} | {result['p50']:.1f} | {result['p95']:.1f} | "
                f"{result['recall']:.3f} | {'yes' if result['uses_index'] else 'no'} | "
                f"{load_s:.0f} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    return [*lines, ""]


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    print("\n".join(main()))
