"""context() latency (p50/p95) at 100k insights, with every section doing real work.

Synthetic data (seeded): 100k insights bulk-loaded with the HNSW index dropped and rebuilt
afterwards (as bench/insight_search.py does), 10k raw dialogue turns, 1k episodes, a graph of
2,000 nodes tied to insights with 19,000 edges, and a session whose working memory holds 10
items, five of them referring to graph nodes (so search boosts and graph facts have work to
do). Sentences draw words from a Zipf-distributed vocabulary of 20,000 pseudo-words whose
100 most frequent are left out, as the text-search configuration drops stop words: a query
word then occurs in a realistic share of rows. (With the 60-word vocabulary of
bench/insight_search.py every row contains every query's words, and the OR-semantics text
leg ranks the whole table.) Half of the queries are stored episodes' queries, so the
episode section finds lessons. Each variant runs its queries after 10 warm-ups, through
the library (``Memory.context``, the call the GraphQL resolver and the MCP tool make), local
embedder of dimension 384.
Writes docs/benchmarks-context.md (with the token estimator accuracy, when tiktoken is
installed). Bounded: a few minutes, mostly loading.

    .venv/bin/python -m bench.context_latency          # BENCH_CONTEXT_SIZE=10000 for a quick run
"""

from __future__ import annotations

import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench import token_estimate
from bench.common import DOCS, percentile
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from gql_memory.memory.raw import RawDialogueInput

SIZE = int(os.environ.get("BENCH_CONTEXT_SIZE", "100000"))
QUERIES = {"default": 200, "other": 100}
VOCABULARY_SIZE = 20_000
STOP_WORDS = 100
SESSION = "bench"
READING = (
    "Reading the numbers: hybrid search is nearly all of the cost (its vector legs walk the "
    "HNSW indexes of insights and raw turns; its OR-semantics text leg ranks every row that "
    "shares a word with the query); working memory (one indexed query) and similar "
    "episodes (one HNSW query) take a few milliseconds, and packing under the budget is "
    "well under one. The budget hardly matters: the candidates (10 working-memory items, "
    "20 hits, 3 episodes, 30 facts) fit in about 650 tokens here."
)
VARIANTS: dict[str, dict[str, Any]] = {
    "all sections, maxTokens 2000 (default)": {},
    "all sections, maxTokens 8000": {"max_tokens": 8000},
    "all sections, maxTokens 500": {"max_tokens": 500},
    "WORKING only": {"include": ["WORKING"]},
    "SEARCH only": {"include": ["SEARCH"]},
    "EPISODES only": {"include": ["EPISODES"]},
    "SEARCH + GRAPH": {"include": ["SEARCH", "GRAPH"]},
}


class Sentences:
    """Seeded sentences of 6..16 words from a Zipf vocabulary without its stop words."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        words: set[str] = set()
        while len(words) < VOCABULARY_SIZE:
            words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
        ordered = sorted(words)  # sets of str iterate in a per-process order: sort, then shuffle
        rng.shuffle(ordered)
        self.words = ordered[STOP_WORDS:]
        self.weights = [1 / rank for rank in range(STOP_WORDS + 1, VOCABULARY_SIZE + 1)]

    def __call__(self) -> str:
        count = self.rng.randint(6, 16)
        return " ".join(self.rng.choices(self.words, self.weights, k=count))


async def load_insights(memory: Memory, sentence: Sentences) -> None:
    """Bulk load with the HNSW index dropped, then rebuilt (as an operator would import)."""
    async with memory.db.write() as conn:
        await conn.execute(text("DROP INDEX IF EXISTS ix_insights_embedding_hnsw"))
    for start in range(0, SIZE, 2000):
        batch = min(2000, SIZE - start)
        await memory.insights.add_many([InsightInput(sentence()) for _ in range(batch)])
    async with memory.db.write() as conn:
        await conn.execute(text("SET maintenance_work_mem = '1GB'"))
        await conn.execute(
            text(
                "CREATE INDEX ix_insights_embedding_hnsw ON insights "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
            )
        )


async def seed_other_layers(memory: Memory, sentence: Sentences) -> list[str]:
    """Raw turns, episodes, a graph over the first insights, and the bench session."""
    rng = sentence.rng
    for start in range(0, 10_000, 2000):
        await memory.raw.store_many(
            [RawDialogueInput(f"chat-{(start + i) % 50}", "user", sentence()) for i in range(2000)]
        )
    episode_queries = [sentence() for _ in range(1000)]
    for query in episode_queries:
        await memory.episodes.store(query, rng.uniform(-1, 1), sentence())
    async with memory.db.write() as conn:
        await conn.execute(
            text(
                "INSERT INTO nodes (namespace, label, name, insight_id) "
                "SELECT 'default', 'Fact', 'fact ' || g, g FROM generate_series(1, 2000) g"
            )
        )
        await conn.execute(
            text(
                "INSERT INTO edges (namespace, source_id, target_id, relation) "
                "SELECT 'default', s, s + k, 'related' "
                "FROM generate_series(1, 1900) s, generate_series(1, 10) k"
            )
        )
        await conn.execute(text("ANALYZE"))
    for i in range(10):
        refs = {"ref_kind": "NODE", "ref_id": i + 1} if i < 5 else {}
        await memory.working.add(sentence(), rng.uniform(0.3, 0.95), session_id=SESSION, **refs)
    return episode_queries


async def measure(
    memory: Memory, sentence: Sentences, episodes: list[str], count: int, **kwargs: Any
) -> dict[str, float]:
    queries = [sentence() if i % 2 else sentence.rng.choice(episodes) for i in range(count + 10)]
    for q in queries[:10]:
        await memory.context(q, SESSION, **kwargs)
    latencies, tokens, items = [], [], []
    for q in queries[10:]:
        began = time.perf_counter()
        context = await memory.context(q, SESSION, **kwargs)
        latencies.append((time.perf_counter() - began) * 1000)
        tokens.append(context.total_tokens)
        items.append(sum(len(s.items) for s in context.sections))
    return {
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "tokens": statistics.mean(tokens),
        "items": statistics.mean(items),
    }


async def run() -> list[str]:
    sentence = Sentences(random.Random(7))
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pg = start_embedded(Path(tmp) / "data")
        try:
            # no statement timeout: building the HNSW index over 100k rows takes a while
            settings = Settings(
                database_url=pg.url, embedding_provider="hash", statement_timeout_ms=0
            )
            db = Database.from_url(pg.url, settings)
            await upgrade(db, 384)
            memory = Memory(db, settings)
            await load_insights(memory, sentence)
            episodes = await seed_other_layers(memory, sentence)
            loaded = time.perf_counter() - began
            print(f"loaded in {loaded:.0f} s", file=sys.stderr, flush=True)
            rows = []
            for index, (name, kwargs) in enumerate(VARIANTS.items()):
                count = QUERIES["default" if index == 0 else "other"]
                result = await measure(memory, sentence, episodes, count, **kwargs)
                rows.append(
                    f"| {name} | {result['p50']:.1f} | {result['p95']:.1f} | "
                    f"{result['tokens']:.0f} | {result['items']:.1f} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
            await db.dispose()
        finally:
            pg.stop()
    return [
        "# Context assembly: latency at scale, and the token estimator",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, embedded PostgreSQL 18; total run "
        f"{time.perf_counter() - began:.0f} s ({loaded:.0f} s loading); 1-minute load "
        f"average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end (other "
        "work shared the machine: read the numbers as upper bounds). "
        "Reproduce: `.venv/bin/python -m bench.context_latency`.",
        "",
        f"## context() at {SIZE:,} insights (dimension 384, local embedder)",
        "",
        f"Plus 10,000 raw turns, 1,000 episodes, 2,000 graph nodes tied to insights with "
        f"19,000 edges; session `{SESSION}` holds 10 working-memory items, 5 referring to "
        f"nodes. Library call (query embedding included); {QUERIES['default']} queries for the "
        f"default variant, {QUERIES['other']} for the others, half of them stored episodes' "
        "queries. "
        "The sections are read concurrently: working memory, hybrid search (INSIGHT + RAW, "
        "top 20, session boosts), similar episodes; then the graph facts of the top hits.",
        "",
        "| variant | p50 ms | p95 ms | mean totalTokens | mean items |",
        "| --- | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        READING,
        "",
        *token_estimate.main(),
    ]


def main() -> list[str]:
    lines = asyncio.run(run())
    DOCS.mkdir(exist_ok=True)
    (DOCS / "benchmarks-context.md").write_text("\n".join(lines) + "\n")
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
