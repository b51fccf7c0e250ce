"""Search on the cluster answers as one PostgreSQL does, with the same data.

The same seeded corpus (insights and raw turns) goes into a namespace on the embedded server
and into one on the cluster; hybrid, text-only and vector-only searches must return the same
hits, in the same order, with the same scores. Twice: with the default budgets (the namespace
is ranked whole and searched exactly) and with the smallest ones (the text leg's statistics
from the newest rows and its rarest-words-first walk, the vector leg's HNSW walk), which
compute per-namespace statistics inside the statement, on the worker.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search.types import SearchHit, SearchWeights

NAMESPACE = "same-data"
WORDS = (
    "harbour lantern orchard violin granite saffron meadow compass ember quarry falcon "
    "tapestry glacier cinnamon lighthouse marble thistle velvet canyon juniper pelican "
    "riverbank parchment walnut cobalt sparrow blizzard lagoon tundra apricot"
).split()
COMMON = "the a of and to in was with for on".split()
QUERIES = [
    "harbour lantern",
    "violin in the orchard",
    "granite quarry falcon",
    "saffron cinnamon apricot",
    "glacier tundra blizzard lagoon",
    "where was the lighthouse",
    "velvet tapestry and marble",
    "the of and",
    "pelican riverbank sparrow walnut cobalt",
    "juniper",
]
MODES = {
    "text": SearchWeights(vector=0, text=1),
    "vector": SearchWeights(vector=1, text=0),
    "hybrid": None,
}


def corpus(seed: int = 31) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)

    def sentence() -> str:
        words = rng.choices(WORDS, weights=[1 / (i + 1) for i in range(len(WORDS))], k=6)
        return " ".join(w if rng.random() > 0.3 else f"{rng.choice(COMMON)} {w}" for w in words)

    return [sentence() for _ in range(300)], [sentence() for _ in range(200)]


async def fill(memory: Memory) -> None:
    insights, turns = corpus()
    await memory.insights.add_many([InsightInput(c) for c in insights])
    start = datetime(2026, 1, 1, tzinfo=UTC)
    await memory.raw.store_many(
        [
            RawDialogueInput("s", "user", c, timestamp=start + timedelta(minutes=i))
            for i, c in enumerate(turns)
        ]
    )


def answers(hits: list[SearchHit]) -> list[tuple[object, ...]]:
    """Each hit as both databases must agree on it (ids differ: other rows came first)."""
    return [
        (
            h.layer.value,
            h.content,
            h.vector_rank,
            h.text_rank,
            None if h.vector_score is None else round(h.vector_score, 6),
            None if h.text_score is None else round(h.text_score, 6),
            round(h.fused_score, 6),
        )
        for h in hits
    ]


@pytest_asyncio.fixture(scope="module")
async def cluster_db(citus_url: str) -> AsyncIterator[Database]:
    db = Database.from_url(citus_url, Settings(db_pool_size=4, db_max_overflow=4))
    yield db
    await db.dispose()


@pytest_asyncio.fixture(scope="module")
async def both(db: Database, cluster_db: Database) -> tuple[Database, Database]:
    """The embedded server's database and the cluster's, the corpus in each."""
    for database in (db, cluster_db):
        await fill(Memory(database, Settings(), NAMESPACE))
    return db, cluster_db


@pytest.mark.parametrize(
    "budgets",
    [{}, {"text_search_max_matches": 100, "vector_exact_max_rows": 50}],
    ids=["whole-namespace", "smallest-budgets"],
)
async def test_the_cluster_finds_what_one_postgresql_finds(
    both: tuple[Database, Database], budgets: dict[str, int]
) -> None:
    settings = Settings().with_overrides(graph_propagation=0.0, **budgets)
    single, distributed = (Memory(database, settings, NAMESPACE) for database in both)
    compared = 0
    for query in QUERIES:
        for mode, weights in MODES.items():
            expected, found = [
                answers(
                    await memory.search(
                        query,
                        top_k=10,
                        session_id=None,
                        layers=("INSIGHT", "RAW"),
                        weights=weights,
                    )
                )
                for memory in (single, distributed)
            ]
            assert found == expected, (query, mode)
            compared += len(expected)
    assert compared
