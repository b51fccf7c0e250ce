"""Retrieval that carries over to long turns (issue 34; "Retrieval that carries over", item 6),
on the seeded corpus of tests/memory/search/long_turns_hard.py, as hard as LongMemEval-S's
haystacks: a short user turn says a fact in passing after a long answer, in a session whose
answers and follow-ups talk about the same thing, among turns that share the question's words.

What a user of the search needs is the evidence in the top 5. The bars are what plain
retrievers reach on the same corpus, measured as bench.longmemeval_recall measures its
references: multilingual-e5-small over each turn alone (cosine), BM25Okapi (k1 1.5, b 0.75)
over lowercased word tokens, and their reciprocal-rank fusion (k 60, each one's top 50). The
hybrid must reach the fusion; each leg alone (the other's weight 0, no graph propagation, as
the benchmark runs them) must reach its plain counterpart.

The vector leg fell short while every turn was embedded after the previous turn's last 96
tokens, which blurs a short turn after a long one (7 of 8 in the top 5, e5 over the turn
alone 8); since a turn gets its context only in a short exchange
(GQL_MEMORY_EMBED_RAW_CONTEXT_SHORT_ONLY) it finds all 8. The text leg fell short too (4 of 8,
BM25Okapi 7): PostgreSQL's english configuration drops "I / me / my", which tie an "I"
question to the user's own turns, and the long answers hold the question's other words.
Since a question in the first person names the user for speakerBoost
(GQL_MEMORY_SEARCH_ASKER_SPEAKER), it finds 7 (ranks 3, 7, 5, 1, 2, 1, 1, 2).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import pytest_asyncio

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings.local import E5Embedder
from gql_memory.memory import Memory
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search.types import SearchWeights
from tests.memory.search.long_turns_hard import (
    ASSISTANT_CHARS,
    QUESTIONS,
    TURNS,
    Conversation,
    conversation,
)

SEED = 34
TOP = 5
# The evidence's rank, question by question, in each plain reference on this corpus, measured
# with the in-process e5 (the provider's own windows for a turn longer than its window) and
# numpy; BM25Okapi's are recomputed below. The bars are how many of them are in the top 5.
E5_RANKS = (2, 3, 3, 2, 3, 1, 2, 1)
BM25_RANKS = (5, 2, 14, 4, 4, 1, 2, 2)
RRF_RANKS = (4, 2, 6, 3, 4, 1, 2, 1)
WORD = re.compile(r"\w+")

Stored = tuple[Memory, Conversation, list[int]]


def words(text: str) -> list[str]:
    """Lowercased word tokens, as the BM25Okapi reference reads a text."""
    return WORD.findall(text.lower())


def bm25_okapi(documents: Sequence[str], query: str, k1: float = 1.5, b: float = 0.75) -> list[int]:
    """The documents' indices by rank_bm25's BM25Okapi score for ``query``, best first (a
    word in more than half of the documents gets a quarter of the mean idf instead of a
    negative one)."""
    counts = [Counter(words(d)) for d in documents]
    lengths = [sum(c.values()) for c in counts]
    mean = sum(lengths) / len(lengths)
    containing = Counter(w for c in counts for w in c)
    idf = {w: math.log(len(counts) - n + 0.5) - math.log(n + 0.5) for w, n in containing.items()}
    floor = 0.25 * sum(idf.values()) / len(idf)
    idf = {w: floor if v < 0 else v for w, v in idf.items()}
    scores = [
        sum(
            idf.get(w, 0.0) * c[w] * (k1 + 1) / (c[w] + k1 * (1 - b + b * n / mean))
            for w in words(query)
        )
        for c, n in zip(counts, lengths, strict=True)
    ]
    return sorted(range(len(documents)), key=lambda i: -scores[i])


def in_top(ranks: Sequence[int | None], k: int = TOP) -> int:
    """How many questions have their evidence at rank ``k`` or better."""
    return sum(rank is not None and rank <= k for rank in ranks)


def outcome(ranks: Sequence[int | None], reference: str, reference_ranks: Sequence[int]) -> str:
    return (
        f"evidence ranks {list(ranks)}: {in_top(ranks)}/{len(ranks)} in the top 5, "
        f"{in_top(ranks, 10)} in the top 10; {reference}: {list(reference_ranks)}, "
        f"{in_top(reference_ranks)} in the top 5"
    )


@pytest_asyncio.fixture(scope="module")
async def stored(db: Database, settings: Settings) -> Stored:
    """The conversation stored with the real e5 model."""
    memory = Memory(db, settings, "long-turns", embedder=E5Embedder(settings))
    talk = conversation(SEED)
    turns = await memory.raw.store_many(
        [RawDialogueInput(session, speaker, content) for session, speaker, content in talk.turns]
    )
    return memory, talk, [t.id for t in turns]


async def ranks(stored: Stored, weights: SearchWeights | None = None) -> list[int | None]:
    """Each question's evidence rank in the top 10 of a RAW search (None: not there); with
    ``weights``, a leg alone without graph propagation."""
    memory, talk, ids = stored
    if weights is not None:
        settings = memory.settings.with_overrides(graph_propagation=0.0)
        memory = Memory(memory.db, settings, memory.namespace, embedder=memory.embedder)
    found: list[int | None] = []
    for question in talk.questions:
        hits = await memory.search(
            question.text, top_k=10, session_id=None, layers=["RAW"], weights=weights
        )
        top = [h.id for h in hits]
        evidence = ids[question.evidence]
        found.append(top.index(evidence) + 1 if evidence in top else None)
    return found


def test_the_corpus_is_shaped_like_longmemeval() -> None:
    """Answers as long as LongMemEval-S's (the median within a tenth), each fact a short user
    turn after one of the longer answers."""
    talk = conversation(SEED)
    answers = sorted(len(content) for _, speaker, content in talk.turns if speaker == "assistant")
    assert len(talk.turns) == TURNS and len(talk.questions) == QUESTIONS
    assert abs(answers[len(answers) // 2] - ASSISTANT_CHARS[10]) < ASSISTANT_CHARS[10] / 10
    assert max(answers) > ASSISTANT_CHARS[18]
    before = []
    for question in talk.questions:
        _, speaker, evidence = talk.turns[question.evidence]
        _, previous_speaker, previous = talk.turns[question.evidence - 1]
        assert speaker == "user" and len(evidence) < 300
        assert previous_speaker == "assistant"
        before.append(len(previous))
    assert sorted(before)[len(before) // 2] > ASSISTANT_CHARS[10]
    assert conversation(SEED) == talk  # seeded


def test_no_word_of_a_question_singles_out_its_evidence() -> None:
    """Every word a question shares with its evidence is in other turns too, and some other
    turn shares more of the question's words than the evidence does."""
    talk = conversation(SEED)
    turns = [set(words(content)) for _, _, content in talk.turns]
    for question in talk.questions:
        asked = set(words(question.text))
        shared = asked & turns[question.evidence]
        others = [t for i, t in enumerate(turns) if i != question.evidence]
        assert all(any(w in t for t in others) for w in shared), question.text
        assert max(len(asked & t) for t in others) > len(shared), question.text


def test_bm25okapi_ranks_the_evidence_as_measured() -> None:
    """The BM25Okapi reference recomputed: the corpus is still the one the bars were set on."""
    talk = conversation(SEED)
    documents = [content for _, _, content in talk.turns]
    found = [bm25_okapi(documents, q.text).index(q.evidence) + 1 for q in talk.questions]
    assert tuple(found) == BM25_RANKS


async def test_the_hybrid_finds_the_evidence_as_the_references_fusion_does(
    stored: Stored,
) -> None:
    found = await ranks(stored)
    assert in_top(found) >= in_top(RRF_RANKS), outcome(found, "RRF of e5 and BM25Okapi", RRF_RANKS)


async def test_the_vector_leg_alone_finds_it_as_e5_over_the_turn_alone_does(
    stored: Stored,
) -> None:
    """A short turn embedded after a long one must keep its own words in its vector."""
    found = await ranks(stored, SearchWeights(vector=1, text=0))
    assert in_top(found) >= in_top(E5_RANKS), outcome(found, "e5 over the turn alone", E5_RANKS)


async def test_the_text_leg_alone_finds_it_as_bm25okapi_does(stored: Stored) -> None:
    found = await ranks(stored, SearchWeights(vector=0, text=1))
    assert in_top(found) >= in_top(BM25_RANKS), outcome(found, "BM25Okapi", BM25_RANKS)
