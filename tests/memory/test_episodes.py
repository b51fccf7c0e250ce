"""Episode memory: similarity threshold, top-k, reward bounds (seed 003 resource 3)."""

from __future__ import annotations

import math

import pytest

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI


@pytest.fixture
async def controlled(db: Database, settings: Settings, fake_openai: FakeOpenAI) -> Memory:
    await truncate_all(db)
    fake_openai.reset()
    return Memory(db, openai_settings(settings, fake_openai))


async def store_at_angles(memory: Memory, fake: FakeOpenAI, angles: dict[str, float]) -> None:
    fake.set_vector("query", [1.0, 0.0])
    for name, angle in angles.items():
        fake.set_vector(name, [math.cos(angle), math.sin(angle)])
        await memory.episodes.store(name, 0.5, f"lesson of {name}")


async def test_store_and_get(memory: Memory) -> None:
    episode = await memory.episodes.store("deploy on friday", -0.8, "do not deploy on friday")
    assert (episode.query, episode.reward, episode.reflection) == (
        "deploy on friday",
        -0.8,
        "do not deploy on friday",
    )
    assert await memory.episodes.get(episode.id) == episode
    assert await memory.episodes.get(987654) is None


@pytest.mark.parametrize("reward", [-1.01, 1.5, float("nan")])
async def test_reward_outside_range_is_rejected(memory: Memory, reward: float) -> None:
    with pytest.raises(ValidationError, match="reward must be"):
        await memory.episodes.store("q", reward, "r")


async def test_min_similarity_threshold_and_default_top_three(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    # cos(0.2)=0.98, cos(0.5)=0.88, cos(0.7)=0.76, cos(0.75)=0.73, cos(1.0)=0.54
    await store_at_angles(
        controlled, fake_openai, {"a": 0.2, "b": 0.5, "c": 0.7, "d": 0.75, "e": 1.0}
    )
    hits = await controlled.episodes.similar("query")
    assert [h.episode.query for h in hits] == ["a", "b", "c"]
    assert [h.similarity for h in hits] == pytest.approx(
        [math.cos(0.2), math.cos(0.5), math.cos(0.7)]
    )
    strict = await controlled.episodes.similar("query", min_similarity=0.9)
    assert [h.episode.query for h in strict] == ["a"]
    wide = await controlled.episodes.similar("query", min_similarity=0.5, top_k=10)
    assert [h.episode.query for h in wide] == ["a", "b", "c", "d", "e"]
    assert await controlled.episodes.similar("query", min_similarity=0.99) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_similarity": 1.5}, "minSimilarity must be between -1.0 and 1.0"),
        ({"top_k": 0}, "topK must be between 1 and 100"),
    ],
)
async def test_invalid_similarity_arguments(memory: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.episodes.similar("q", **kwargs)


async def test_delete(memory: Memory) -> None:
    episode = await memory.episodes.store("q", 0.1, "r")
    assert await memory.episodes.delete(episode.id) is True
    assert await memory.episodes.delete(episode.id) is False
