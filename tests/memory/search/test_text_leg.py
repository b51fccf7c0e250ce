"""The full-text leg: BM25 over the namespace's own rows. A namespace no larger than the budget
(GQL_MEMORY_TEXT_SEARCH_MAX_MATCHES) is ranked whole, exactly; a larger one is searched
through its rarest query words first (its statistics from its newest rows), the frequent words
only re-ranking what those found."""

from __future__ import annotations

import math
import random

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.insights import InsightInput
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search.types import SearchHit, SearchWeights
from tests.conftest import truncate_all

BUDGET = 100  # the smallest budget the setting allows
TEXT_ONLY = SearchWeights(vector=0, text=1)
# Every row's query lexemes with their counts, and its length: what BM25 needs.
ROW_TERMS = """
SELECT i.id, length(i.content_tsv) AS len, u.lexeme, cardinality(u.positions) AS tf
FROM insights i CROSS JOIN LATERAL unnest(i.content_tsv) u
WHERE i.namespace = :ns
"""
QUERY_LEXEMES = "SELECT tsvector_to_array(to_tsvector('english', :query))"


async def bm25_reference(memory: Memory, query: str, k1: float, b: float) -> list[int]:
    """Every row of the namespace scored by the textbook BM25 (Lucene's idf), best first,
    ties by id descending: what the text leg must return for a namespace within its budget."""
    async with memory.db.read() as conn:
        lexemes = set((await conn.execute(text(QUERY_LEXEMES), {"query": query})).scalar_one())
        rows = (await conn.execute(text(ROW_TERMS), {"ns": memory.namespace})).all()
    lengths = {r.id: r.len for r in rows}
    docs, mean = len(lengths), sum(lengths.values()) / len(lengths)
    tf = {(r.id, r.lexeme): r.tf for r in rows if r.lexeme in lexemes}
    df = {x: sum(1 for (_, lexeme) in tf if lexeme == x) for x in lexemes}
    scores: dict[int, float] = {}
    for (row, lexeme), count in tf.items():
        idf = math.log(1 + (docs - df[lexeme] + 0.5) / (df[lexeme] + 0.5))
        norm = count + k1 * (1 - b + b * lengths[row] / mean)
        scores[row] = scores.get(row, 0.0) + idf * count * (k1 + 1) / norm
    return sorted(scores, key=lambda row: (-round(scores[row], 9), -row))


def budgeted(db: Database, settings: Settings, namespace: str = "default") -> Memory:
    """Services with the smallest budget, and no graph propagation (text order stays)."""
    changed = settings.with_overrides(text_search_max_matches=BUDGET, graph_propagation=0.0)
    return Memory(db, changed, namespace)


@pytest.fixture
async def memory(db: Database, settings: Settings) -> Memory:
    await truncate_all(db)
    return budgeted(db, settings)


async def add(memory: Memory, contents: list[str]) -> list[int]:
    """Store insights, then let PostgreSQL gather statistics as autovacuum would."""
    added = await memory.insights.add_many([InsightInput(c) for c in contents])
    async with memory.db.write() as conn:
        await conn.execute(text("ANALYZE insights"))
    return [i.id for i in added]


def text_order(hits: list[SearchHit]) -> list[int]:
    """The hits as the text leg ranked them."""
    return [h.id for h in sorted(hits, key=lambda h: h.text_rank or 0)]


async def search(memory: Memory, query: str, top_k: int = 10) -> list[SearchHit]:
    return await memory.search(query, top_k=top_k, session_id=None, weights=TEXT_ONLY)


async def test_frequent_words_are_found_among_the_newest_rows(memory: Memory) -> None:
    """'common' and 'words' are in more rows than the budget: the walk takes the rows of
    'zanzibar' (all of them), and the rest of the page comes from the newest rows with the
    frequent words, as BM25 over every row ranks them (equal scores: newest first)."""
    commons = await add(memory, [f"common words everywhere {i}" for i in range(300)])
    lighthouses = await add(
        memory, ["zanzibar lighthouse tower beacon", "zanzibar lighthouse harbour beacon"]
    )
    [target] = await add(memory, ["zanzibar lighthouse with common words"])
    hits = await search(memory, "common words about zanzibar")
    assert text_order(hits)[:3] == [target, *sorted(lighthouses, reverse=True)]
    assert len(hits) == 10 and set(text_order(hits)[3:]) <= set(commons)


async def test_a_question_of_only_frequent_words_still_finds_rows(memory: Memory) -> None:
    await add(memory, [f"common words everywhere {i}" for i in range(300)])
    await add(memory, [f"common ground {i}" for i in range(150)])
    hits = await search(memory, "common words", top_k=5)
    assert len(hits) == 5  # found through the rarer of the two, ranked by both
    assert all(h.content.startswith("common words") for h in hits)


async def test_the_rarest_words_are_read_first_when_the_budget_runs_out(memory: Memory) -> None:
    """3 + 30 + 90 rows contain a query word; the budget ranks 100 of them: all of the rarer
    words' rows, and only then the most frequent word's. A row with two of the words is
    found, and counted, once. Rarity is read from the namespace's newest rows."""
    groups = [
        [f"filler text {i}" for i in range(100)],
        [f"zanzibar maple lighthouse {i}" for i in range(3)],
        [f"cedar grove {i}" for i in range(90)],
        [f"maple grove {i}" for i in range(30)],
    ]
    # stored interleaved, so that the newest rows (the statistics' sample) hold every group
    spread = sorted((i / len(g), text) for g in groups for i, text in enumerate(g))
    contents = [text for _, text in spread]
    ids = dict(zip(contents, await add(memory, contents), strict=True))
    rare = [i for c, i in ids.items() if c.startswith("zanzibar")]
    cedars = [i for c, i in ids.items() if c.startswith("cedar")]
    maples = [i for c, i in ids.items() if c.startswith("maple")]
    hits = await search(memory, "cedar maple zanzibar", top_k=100)
    found = {h.id for h in hits}
    assert len(found) == BUDGET
    assert set(rare) <= found and set(maples) <= found
    assert len(found & set(cedars)) == BUDGET - len(rare) - len(maples)


async def test_a_small_namespace_in_a_large_table_is_ranked_whole(
    db: Database, settings: Settings, memory: Memory
) -> None:
    """Another namespace makes 'common' too frequent to walk; this one is small enough to
    rank every row, so rows with only that word still match (OR semantics)."""
    await add(memory, [f"common words everywhere {i}" for i in range(300)])
    small = budgeted(db, settings, "small")
    both = await add(small, ["common words and zanzibar"])
    rare = await add(small, ["zanzibar alone"])
    common = await add(small, ["common words only", "common sense"])
    await add(small, ["nothing to see"])
    hits = await search(small, "common words zanzibar")
    assert text_order(hits)[:2] == both + common[:1]  # 3 then 2 of the 3 words
    assert set(text_order(hits)[2:]) == set(rare + common[1:])  # 1 of 3


async def test_a_namespace_within_the_budget_is_ranked_as_if_every_row_were_scored(
    memory: Memory,
) -> None:
    rng = random.Random(7)
    vocabulary = "amber basil cedar dune ember fjord grove heath isle juniper".split()
    await add(memory, [" ".join(rng.choices(vocabulary, k=rng.randint(2, 7))) for _ in range(90)])
    settings = memory.settings
    for query in ("amber cedar ember grove isle", "basil dune", "juniper heath fjord amber"):
        hits = await search(memory, query)
        expected = await bm25_reference(
            memory, query, settings.text_search_bm25_k1, settings.text_search_bm25_b
        )
        assert len(hits) == 10
        assert all(expected[h.text_rank - 1] == h.id for h in hits if h.text_rank), query


async def test_raw_turns_of_a_long_conversation_are_walked_rarest_first(
    memory: Memory,
) -> None:
    turns = [RawDialogueInput("s1", "Mel", f"we talked about the weather {i}") for i in range(200)]
    turns.append(RawDialogueInput("s1", "Mel", "the weather in Zanzibar was fine"))
    stored = await memory.raw.store_many(turns)
    async with memory.db.write() as conn:
        await conn.execute(text("ANALYZE raw_dialogue"))
    hits = await memory.search(
        "How was the weather in Zanzibar?", session_id=None, layers=["RAW"], weights=TEXT_ONLY
    )
    assert hits[0].id == stored[-1].id
