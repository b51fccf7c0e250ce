"""Retrieval that holds on long turns (issue 34), on the seeded synthetic corpus of
tests/memory/search/long_turns.py: a short turn with one rare word is found by the text leg, the
hybrid and its own vector, although the long answers around it hold every common word of
the question."""

from __future__ import annotations

import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings.local import E5Embedder
from gql_memory.memory import Memory
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search.types import SearchWeights
from tests.conftest import truncate_all
from tests.memory.search.long_turns import Conversation, conversation

CHATTER = 50  # short turns that say nothing: 121 turns, 61 of them long answers


@pytest_asyncio.fixture(scope="module")
async def stored(db: Database, settings: Settings) -> tuple[Memory, Conversation, list[int]]:
    """A conversation of 10 facts among 50 turns of chatter, 61 long answers around them."""
    await truncate_all(db)
    memory = Memory(db, settings, "long")
    talk = conversation(seed=34, chatter=CHATTER)
    turns = await memory.raw.store_many(
        [RawDialogueInput("chat", speaker, content) for speaker, content in talk.turns]
    )
    return memory, talk, [t.id for t in turns]


@pytest_asyncio.fixture(scope="module")
async def embedded(db: Database, settings: Settings) -> tuple[Memory, Conversation, list[int]]:
    """A smaller conversation stored with the real e5 model, whose vectors must find the short
    turn after a long one (25 turns: embedding long answers with e5 takes a while)."""
    memory = Memory(db, settings, "long-e5", embedder=E5Embedder(settings))
    talk = conversation(seed=35, facts=4, chatter=8)
    turns = await memory.raw.store_many(
        [RawDialogueInput("chat", speaker, content) for speaker, content in talk.turns]
    )
    return memory, talk, [t.id for t in turns]


def test_the_corpus_is_what_the_issue_describes() -> None:
    talk = conversation(seed=34, chatter=CHATTER)
    answers = [c for s, c in talk.turns if s == "assistant"]
    facts = [talk.turns[q.evidence][1] for q in talk.questions]
    assert len(answers) == 61 and all(1_500 <= len(a) <= 3_000 for a in answers)
    assert len(facts) == 10 and all(len(f) < 300 for f in facts)
    # "many days ago ... buy": words in most of the long answers, in none of the facts
    common = [sum(w in a.lower().split() for a in answers) for w in ("many", "days", "buy")]
    assert all(count > len(answers) // 2 for count in common)
    assert conversation(seed=34, chatter=CHATTER) == talk  # seeded


async def missed(
    memory: Memory, talk: Conversation, ids: list[int], weights: SearchWeights | None, k: int
) -> list[str]:
    """The questions whose evidence is not in the top k."""
    found = []
    for question in talk.questions:
        hits = await memory.search(
            question.text, top_k=k, session_id=None, layers=["RAW"], weights=weights
        )
        if ids[question.evidence] not in [h.id for h in hits]:
            found.append(question.text)
    return found


async def test_the_text_leg_ranks_the_rare_word_in_its_top_5(
    stored: tuple[Memory, Conversation, list[int]],
) -> None:
    assert not await missed(*stored, SearchWeights(vector=0, text=1), 5)


async def test_the_hybrid_ranks_it_in_its_top_5(
    stored: tuple[Memory, Conversation, list[int]],
    embedded: tuple[Memory, Conversation, list[int]],
) -> None:
    assert not await missed(*stored, None, 5)
    assert not await missed(*embedded, None, 5)


async def test_the_turns_own_vector_finds_it_in_the_top_10(
    embedded: tuple[Memory, Conversation, list[int]],
) -> None:
    """Each short turn was embedded after a long one: its own words must be in its vector."""
    assert not await missed(*embedded, SearchWeights(vector=1, text=0), 10)


async def test_coverage_ranking_would_have_missed_it(
    stored: tuple[Memory, Conversation, list[int]],
) -> None:
    """The issue's mechanism, shown on the same data: ranked by how many distinct query words
    a row holds, the long answers come first and the evidence is not in the top 5."""
    memory, talk, ids = stored

    coverage = """
    WITH q AS (SELECT unnest(tsvector_to_array(to_tsvector('english', :query))) AS l)
    SELECT r.id FROM raw_dialogue r WHERE r.namespace = :ns
    ORDER BY (SELECT count(*) FROM q WHERE r.content_tsv @@ CAST(quote_literal(q.l) AS tsquery))
             DESC, r.id DESC
    LIMIT 5"""
    missed = 0
    async with memory.db.read() as conn:
        for question in talk.questions:
            top = (
                await conn.execute(text(coverage), {"query": question.text, "ns": "long"})
            ).scalars()
            missed += ids[question.evidence] not in list(top)
    assert missed >= len(talk.questions) // 2
