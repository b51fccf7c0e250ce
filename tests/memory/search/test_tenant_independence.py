"""Another tenant's data never changes your results (SPEC §8): the same hits in the same order
before and after another namespace stores 25,000 near-copies of your query, on both legs and
every layer, for a namespace searched exactly and for one large enough to walk the shared
HNSW index and the rarest words first."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.indexes import hnsw_index_ddl, hnsw_index_name
from gql_memory.embeddings.hashed import HashEmbedder
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search.types import SearchWeights
from gql_memory.memory.vectors import vector_literal
from tests.conftest import truncate_all

ROWS = 300  # per layer of tenant A
FLOOD = 25_000  # per layer of tenant B: more than pgvector's hnsw.max_scan_tuples (20,000)
FACT = "Falcon budget report due Friday"
QUERIES = (FACT, "Falcon budget report xylophone", "when is the report due")
LAYERS = ("INSIGHT", "EPISODE", "RAW")
WEIGHTS = {
    "vector": SearchWeights(vector=1, text=0),
    "text": SearchWeights(vector=0, text=1),
    "hybrid": None,
}
WORDS = (
    "project meeting budget travel garden music report friday plan team coffee book city "
    "weekend family dinner launch review design market office"
).split()
# A's small namespace is searched exactly; with these settings the same rows are a large
# namespace: the vector leg walks the shared index, the text leg the rarest words first.
LARGE = {"vector_exact_max_rows": 100, "text_search_max_matches": 100}

# B's flood, written straight into the tables (as an import would): the query's words with a
# word A also uses, each row's vector the query's own, nudged.
FLOOD_SQL = {
    "insights": """
        INSERT INTO insights (namespace, content, embedding, content_tsv)
        SELECT 'b', :content || ' xylophone ' || g, {vector},
               to_tsvector('english', :content || ' xylophone ' || g)
        FROM generate_series(1, :n) g""",
    "episodes": """
        INSERT INTO episodes (namespace, query, reward, reflection, embedding, content_tsv)
        SELECT 'b', :content || ' xylophone ' || g, 0.5, 'noted', {vector},
               to_tsvector('english', :content || ' xylophone ' || g || ' noted')
        FROM generate_series(1, :n) g""",
    "raw_dialogue": """
        INSERT INTO raw_dialogue (namespace, session_id, speaker, content, embedding, content_tsv)
        SELECT 'b', 's', 'user', :content || ' xylophone ' || g, {vector},
               to_tsvector('english', :content || ' xylophone ' || g)
        FROM generate_series(1, :n) g""",
}
NUDGED = (
    "CAST(ARRAY(SELECT x + (random() - 0.5) * 0.002 + g * 0 "
    "FROM unnest(CAST(CAST(:vector AS vector) AS real[])) x) AS vector)"
)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(4, 10)))


async def store_tenant_a(memory: Memory) -> None:
    rng = random.Random(5)
    contents = [sentence(rng) for _ in range(ROWS - 2)] + [FACT, "the xylophone report"]
    rng.shuffle(contents)
    await memory.insights.add_many([InsightInput(c) for c in contents])
    for c in contents:
        await memory.episodes.store(c, 0.5, "lesson about " + c.split()[0])
    await memory.raw.store_many([RawDialogueInput("s", "user", c) for c in contents])


async def flood(db: Database, settings: Settings) -> None:
    """25,000 near-copies of the query per layer in namespace b, then the indexes rebuilt and
    the statistics gathered, as after a bulk import and autovacuum."""
    vector = vector_literal(HashEmbedder(settings.hash_embedding_dim).embed_one(FACT))
    async with db.write() as conn:
        await conn.execute(text("SET LOCAL statement_timeout = 0"))
        await conn.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
        for table, statement in FLOOD_SQL.items():
            await conn.execute(text(f"DROP INDEX {hnsw_index_name(table)}"))
            await conn.execute(
                text(statement.format(vector=NUDGED)),
                {"content": FACT, "vector": vector, "n": FLOOD},
            )
            await conn.execute(text(hnsw_index_ddl(table)))
    async with db.engine.connect() as raw:
        autocommit = await raw.execution_options(isolation_level="AUTOCOMMIT")
        for table in FLOOD_SQL:
            await autocommit.execute(text(f"ANALYZE {table}"))


async def results(memory: Memory) -> dict[str, Any]:
    """Everything A's searches return: ids in order, per query, layer and leg."""
    found: dict[str, Any] = {}
    for query in QUERIES:
        for layer in LAYERS:
            for leg, weights in WEIGHTS.items():
                hits = await memory.search(
                    query, top_k=10, session_id=None, layers=[layer], weights=weights
                )
                found[f"{query} / {layer} / {leg}"] = [h.id for h in hits]
        insights = await memory.insights.search(query, top_k=10)
        found[f"{query} / insightSearch"] = [h.insight.id for h in insights]
        episodes = await memory.episodes.similar(query, min_similarity=0.0, top_k=10)
        found[f"{query} / similarEpisodes"] = [h.episode.id for h in episodes]
    return found


@pytest_asyncio.fixture(scope="module")
async def before_and_after(db: Database, settings: Settings) -> AsyncIterator[dict[str, Any]]:
    """A's results alone, then beside B's flood: for the exact and the large settings."""
    await truncate_all(db)
    small = Memory(db, settings, "a")
    large = Memory(db, settings.with_overrides(**LARGE), "a")
    await store_tenant_a(small)
    alone = {"exact": await results(small), "large": await results(large)}
    await flood(db, settings)
    beside = {"exact": await results(small), "large": await results(large)}
    yield {"alone": alone, "beside": beside}
    await truncate_all(db)


@pytest.mark.parametrize("path", ["exact", "large"])
async def test_another_tenants_flood_never_changes_your_hits(
    before_and_after: dict[str, Any], path: str
) -> None:
    alone, beside = before_and_after["alone"][path], before_and_after["beside"][path]
    assert alone.keys() == beside.keys()
    changed = {key: (alone[key], beside[key]) for key in alone if alone[key] != beside[key]}
    assert not changed, changed


@pytest.mark.parametrize("path", ["exact", "large"])
async def test_the_fact_is_found_on_both_legs_beside_the_flood(
    before_and_after: dict[str, Any], path: str
) -> None:
    """Not only the same hits: full pages, with the fact among them (the issue's tenant got
    `[]`), for every layer and leg."""
    beside = before_and_after["beside"][path]
    for layer in LAYERS:
        for leg in WEIGHTS:
            for query in (FACT, "Falcon budget report xylophone"):
                assert len(beside[f"{query} / {layer} / {leg}"]) == 10, (query, layer, leg)
