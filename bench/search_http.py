"""search over HTTP on a LoCoMo-sized scope with the real embedder, beside the query embedding
alone (issue 12: p50 within the embedding's time + 5 ms).

One LoCoMo conversation (the first of the dev split, 419 turns) is stored as raw dialogue with
the in-process e5-small embedder and analyzed (as autovacuum does within a minute); a
`gql-memory serve` on the same database answers its questions (`search(layers: [RAW],
topK: 10)`) one at a time on a keep-alive connection. The embedding of each question is then
timed alone with the same model in this process, so the difference is what search adds on
top of embedding the query.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from bench.common import percentile, server
from bench.hot_paths import HttpConnection
from bench.locomo_recall import DEFAULT_PATH, turns_of
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.embeddings import TextRole
from gql_memory.memory import Memory

SEARCH = (
    "query($q: String!) { search(query: $q, layers: [RAW], topK: 10) "
    "{ id layer content rrfScore } }"
)
WARM_UP = 10


async def load(url: str, sample: dict) -> tuple[list[str], Memory, Database]:
    settings = Settings(database_url=url, embedding_provider="local", statement_timeout_ms=0)
    db = Database.from_url(url, settings)
    await upgrade(db, settings.embedding_dim)
    memory = Memory(db, settings)
    turns = turns_of(sample)
    for start in range(0, len(turns), 100):
        await memory.raw.store_many(turns[start : start + 100])
    # what autovacuum does within a minute of an import: right after it the planner thinks
    # the tables are empty and the graph statement walks every node per hit (8.7 ms, not 1.3)
    async with db.write() as conn:
        await conn.execute(text("ANALYZE"))
    questions = [qa["question"] for qa in sample["qa"] if qa.get("category") in (1, 2, 3, 4)]
    return questions, memory, db


async def over_http(url: str, questions: list[str]) -> list[float]:
    connection = HttpConnection(url)
    await connection.open()
    try:
        for q in questions[:WARM_UP]:
            await connection.send(connection.request(SEARCH, {"q": q}))
        latencies = []
        for q in questions:
            request = connection.request(SEARCH, {"q": q})
            began = time.perf_counter()
            await connection.send(request)
            latencies.append((time.perf_counter() - began) * 1000)
        return latencies
    finally:
        await connection.close()


async def embedding_alone(memory: Memory, questions: list[str]) -> list[float]:
    embedder = memory.embedder
    assert embedder is not None
    for q in questions[:WARM_UP]:
        await embedder.embed([q], role=TextRole.QUERY)
    latencies = []
    for q in questions:
        began = time.perf_counter()
        await embedder.embed([q], role=TextRole.QUERY)
        latencies.append((time.perf_counter() - began) * 1000)
    return latencies


async def measure(url: str, sample: dict) -> tuple[list[str], list[float], list[float]]:
    """Load, then search over HTTP, then embed alone (one after the other, never at once)."""
    questions, memory, db = await load(url, sample)
    try:
        with server(DATABASE_URL=url, GQL_MEMORY_EMBEDDING_PROVIDER="local") as srv:
            searched = await over_http(srv.url, questions)
        embedded = await embedding_alone(memory, questions)
    finally:
        await db.dispose()
    return questions, searched, embedded


def main() -> list[str]:
    import json

    if not DEFAULT_PATH.is_file():
        return [f"## Search over HTTP: skipped ({DEFAULT_PATH} not found)", ""]
    sample = json.loads(DEFAULT_PATH.read_text())[0]
    with tempfile.TemporaryDirectory() as tmp:
        pg = start_embedded(Path(tmp) / "pg")
        try:
            questions, searched, embedded = asyncio.run(measure(pg.url, sample))
        finally:
            pg.stop()
    turns = len(turns_of(sample))
    s50, s95 = percentile(searched, 50), percentile(searched, 95)
    e50, e95 = percentile(embedded, 50), percentile(embedded, 95)
    return [
        "## Search over HTTP on a LoCoMo conversation (real embedder)",
        "",
        f"{turns} turns of {sample.get('sample_id', 'conversation 1')} as raw dialogue, "
        f"{len(questions)} questions, `search(layers: [RAW], topK: 10)` one at a time on a "
        f"keep-alive connection to `gql-memory serve` (in-process e5-small, "
        f"{os.cpu_count()} cores); the query embedding alone timed with the same model.",
        "",
        "| | p50 ms | p95 ms |",
        "| --- | --- | --- |",
        f"| search over HTTP | {s50:.1f} | {s95:.1f} |",
        f"| query embedding alone | {e50:.1f} | {e95:.1f} |",
        f"| search minus embedding | {s50 - e50:.1f} | – |",
        "",
    ]


if __name__ == "__main__":
    print("\n".join(main()))
