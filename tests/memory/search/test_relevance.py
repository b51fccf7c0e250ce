"""Relevance is a property of the hit (issue 42): it tells what answers the question from the
other memories of the same namespace, so a context holds the answer and leaves out the rest;
and a question the memory cannot answer gets an empty context. With the real e5 model, whose
calibration it is. The first two are strict expected failures until issue 42's refit lands
(docs/benchmarks-retrieval.md, "Relevance per hit")."""

from __future__ import annotations

import pytest
import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings.local import E5Embedder
from gql_memory.memory import Memory
from gql_memory.memory.context.packing import ItemKind

FACTS = {
    "cat": "My cat is called Miso.",
    "peanuts": "I am allergic to peanuts.",
    "berlin": "I went to Berlin for a conference in May.",
    "restaurant": "Lesson: book restaurants a week ahead on Fridays.",
}
SESSION = "relevance"  # no working memory: a context holds only what was found


@pytest_asyncio.fixture(scope="module")
async def four(db: Database, settings: Settings) -> tuple[Memory, dict[int, str]]:
    memory = Memory(db, settings, "four-insights", embedder=E5Embedder(settings))
    ids = {}
    for name, fact in FACTS.items():
        ids[(await memory.insights.add(fact)).id] = name
    return memory, ids


async def found_in_context(memory: Memory, ids: dict[int, str], question: str) -> list[str]:
    context = await memory.context(question, SESSION)
    return [
        ids[int(item.id)]
        for section in context.sections
        for item in section.items
        if item.kind is ItemKind.INSIGHT
    ]


async def test_the_context_holds_the_answer_and_none_of_the_other_memories(
    four: tuple[Memory, dict[int, str]],
) -> None:
    memory, ids = four
    assert await found_in_context(memory, ids, "What is my cat called?") == ["cat"]
    assert await found_in_context(memory, ids, "What am I allergic to?") == ["peanuts"]


async def test_a_question_the_memory_cannot_answer_gets_an_empty_context(
    four: tuple[Memory, dict[int, str]],
) -> None:
    memory, ids = four
    context = await memory.context("What is the capital of Mongolia?", SESSION)
    assert [item for section in context.sections for item in section.items] == []


async def test_the_other_memories_are_rated_far_below_the_answer(
    four: tuple[Memory, dict[int, str]],
) -> None:
    memory, ids = four
    hits = await memory.search("What is my cat called?", layers=["INSIGHT"], min_relevance=0)
    by_name = {ids[h.id]: h.relevance for h in hits}
    assert by_name["cat"] > 0.5
    assert max(v for name, v in by_name.items() if name != "cat") < 0.1
    assert by_name["cat"] == pytest.approx(max(by_name.values()))
