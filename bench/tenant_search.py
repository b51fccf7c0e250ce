"""Search when tenants share the tables (issue 29): the latency of hybrid search before and
after issue 29/34's statements (per-namespace statistics and BM25, exact vector search of a
small namespace), in one run on the same data, and one tenant's latency while another sends
long queries.

- 100k insights in one namespace (the shared HNSW index, the text leg's walk);
- 100k insights over 1,000 namespaces of 100 (exact vector search, the text leg ranked whole);
- a tenant's p50 alone, and while 8 clients of another tenant search with the longest
  queries allowed (GQL_MEMORY_SEARCH_MAX_QUERY_WORDS distinct words) and with longer ones
  (refused before any work).

The previous statements are bench/previous_search.py's; the library call includes the query
embedding (hash embedder). Each query runs with both in turn, so that drift hits both alike.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

from bench import previous_search
from bench.common import embedded_memory, percentile, vacuum_analyze
from bench.insight_search import VOCABULARY, load, sentence
from gql_memory.embeddings import TextRole
from gql_memory.errors import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.search import legs as search_module

SIZE = int(os.environ.get("BENCH_TENANT_SIZE", "100000"))
TENANTS = 1000
QUERIES = 200
PHASES = 8  # of the victim's queries beside each load
ATTACKERS = 8


@contextmanager
def statements(previous: bool) -> Iterator[None]:
    current = search_module.legs_sql
    if previous:
        search_module.legs_sql = previous_search.legs_sql
    try:
        yield
    finally:
        search_module.legs_sql = current


async def latencies(memories: list[Memory], queries: list[str]) -> list[float]:
    found = []
    for i, q in enumerate(queries):
        memory = memories[i % len(memories)]
        began = time.perf_counter()
        await memory.search(q, session_id=None)
        found.append((time.perf_counter() - began) * 1000)
    return found


async def compare(memories: list[Memory], rng: random.Random) -> dict[str, tuple[float, float]]:
    """p50/p95 of the previous and the current statements, each query searched with both in
    turn (alternating which goes first), so that the machine's load hits both alike."""
    measured: dict[str, list[float]] = {"before": [], "after": []}
    queries = [sentence(rng) for _ in range(QUERIES)]
    for name in ("before", "after"):
        with statements(previous=name == "before"):
            await latencies(memories, queries[:5])  # warm the plans
    for i, query in enumerate(queries):
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        for name in order:
            with statements(previous=name == "before"):
                measured[name] += await latencies([memories[i % len(memories)]], [query])
    return {k: (percentile(v, 50), percentile(v, 95)) for k, v in measured.items()}


async def spread(memory: Memory, rng: random.Random) -> list[Memory]:
    """SIZE more insights over TENANTS namespaces (written straight into the table, the
    statistics gathered as autovacuum would); their services."""
    per_tenant = SIZE // TENANTS
    embedder = memory.embedder
    names = [f"tenant-{i:04d}" for i in range(TENANTS)]
    for start in range(0, TENANTS, 100):
        rows = [
            {"ns": name, "content": sentence(rng)}
            for name in names[start : start + 100]
            for _ in range(per_tenant)
        ]
        vectors = await embedder.embed([r["content"] for r in rows], role=TextRole.DOCUMENT)
        async with memory.db.write() as conn:
            await conn.execute(
                text(
                    "INSERT INTO insights (namespace, content, embedding, content_tsv) "
                    "VALUES (:ns, :content, CAST(:vector AS vector), "
                    "to_tsvector('english', :content))"
                ),
                [r | {"vector": str(v)} for r, v in zip(rows, vectors, strict=True)],
            )
    await vacuum_analyze(memory.db, "insights")
    return [Memory(memory.db, memory.settings, name, embedder) for name in names]


async def beside(
    memory: Memory, attacker: Memory, queries: list[str], attack: str | None
) -> list[float]:
    """The victim's latencies while ATTACKERS clients of another tenant search in a loop
    with ``attack`` (none when None)."""
    if attack is None:
        return await latencies([memory], queries)
    stop = asyncio.Event()

    async def client() -> None:
        while not stop.is_set():
            await attacker.search(attack, session_id=None)

    tasks = [asyncio.create_task(client()) for _ in range(ATTACKERS)]
    try:
        return await latencies([memory], queries)
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def under_long_queries(memory: Memory, attacker: Memory, rng: random.Random) -> list[str]:
    """The victim's p50 alone, beside clients with ordinary queries, beside the longest."""
    words = memory.settings.search_max_query_words
    longest = " ".join(rng.sample(VOCABULARY, words))
    try:
        await attacker.search(" ".join(rng.sample(VOCABULARY, 1998)), session_id=None)
        refused = "no"
    except ValidationError:
        refused = "yes"
    queries = [sentence(rng) for _ in range(QUERIES)]
    attacks = {
        "alone": None,
        f"beside {ATTACKERS} clients, ordinary queries": sentence(rng),
        f"beside {ATTACKERS} clients, {words}-word queries": longest,
    }
    # in short phases, rotating which comes first, so that the machine's load hits all alike
    found: dict[str, list[float]] = {name: [] for name in attacks}
    phase = QUERIES // PHASES
    for i in range(PHASES):
        names = list(attacks)[i % len(attacks) :] + list(attacks)[: i % len(attacks)]
        for name in names:
            chunk = queries[i * phase : (i + 1) * phase]
            found[name] += await beside(memory, attacker, chunk, attacks[name])
    p50 = {name: percentile(values, 50) for name, values in found.items()}
    baseline = p50[f"beside {ATTACKERS} clients, ordinary queries"]
    return [
        "",
        f"One tenant's hybrid search ({QUERIES} queries) while {ATTACKERS} clients of another "
        "tenant search in a loop, with ordinary queries or with the longest that "
        f"GQL_MEMORY_SEARCH_MAX_QUERY_WORDS allows ({words} distinct words; a 1,998-word "
        f"query is refused before any work: {refused}). Ratio: p50 against the same load of "
        f"ordinary queries. The three run in {PHASES} short phases each, in rotation.",
        "",
        "| victim | p50 ms | p95 ms | ratio |",
        "| --- | --- | --- | --- |",
        *(
            f"| {name} | {p50[name]:.1f} | {percentile(values, 95):.1f} | "
            f"{p50[name] / baseline:.2f}x |"
            for name, values in found.items()
        ),
    ]


def table(title: str, found: dict[str, tuple[float, float]]) -> list[str]:
    before, after = found["before"], found["after"]
    return [
        f"| {title}, before | {before[0]:.1f} | {before[1]:.1f} |",
        f"| {title}, after | {after[0]:.1f} | {after[1]:.1f} |",
        f"| {title}, ratio | {after[0] / before[0]:.2f}x | {after[1] / before[1]:.2f}x |",
    ]


async def run() -> list[str]:
    rng = random.Random(29)
    async with embedded_memory() as memory:
        await load(memory, SIZE, rng)
        one = await compare([memory], rng)
        tenants = await spread(memory, rng)
        many = await compare(tenants, rng)
        isolation = await under_long_queries(tenants[0], tenants[1], rng)
    return [
        f"## Hybrid search with tenants side by side ({SIZE:,} insights, hash embedder)",
        "",
        "Library call, top 10, query embedding included; before = the statements of before "
        "issue 29/34 (coverage text leg on table-wide statistics, vector leg always through "
        "the HNSW index), after = per-namespace BM25 and exact vector search of a namespace "
        "within GQL_MEMORY_VECTOR_EXACT_MAX_ROWS. Each query searched with both in turn.",
        "",
        "| namespaces | p50 ms | p95 ms |",
        "| --- | --- | --- |",
        *table(f"{SIZE:,} in one namespace", one),
        *table(f"{SIZE:,} more over {TENANTS:,} namespaces", many),
        *isolation,
        "",
    ]


def main() -> list[str]:
    return asyncio.run(run())


if __name__ == "__main__":
    print("\n".join(main()))
