"""Insights: storage, sources, ranking with controlled vectors, the HNSW index."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.insights import search_sql
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI


@pytest.fixture
async def controlled(db: Database, settings: Settings, fake_openai: FakeOpenAI) -> Memory:
    """Insight services whose embeddings come from the fake server's known vectors."""
    await truncate_all(db)
    fake_openai.reset()
    return Memory(db, openai_settings(settings, fake_openai))


async def test_add_get_and_list(memory: Memory) -> None:
    turn = await memory.raw.store("s", "user", "I love hiking in the Alps")
    insight = await memory.insights.add("User likes hiking", [turn.id], {"topic": "hobbies"})
    assert insight.source_ids == [turn.id] and insight.metadata == {"topic": "hobbies"}
    assert await memory.insights.get(insight.id) == insight
    assert await memory.insights.get(999_999) is None
    page = await memory.insights.list()
    assert page.items == [insight]


async def test_unknown_source_ids_are_rejected_and_nothing_is_written(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="Unknown sourceIds .*: 4242"):
        await memory.insights.add("orphan", [4242])
    assert (await memory.insights.list()).items == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query must not be empty"),
        ({"query": "x", "top_k": 0}, "topK must be between 1 and 100"),
        ({"query": "x", "top_k": 101}, "topK must be between 1 and 100"),
    ],
)
async def test_invalid_search_input(memory: Memory, kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.insights.search(**kwargs)


async def test_search_of_empty_store_is_empty(memory: Memory) -> None:
    assert await memory.insights.search("anything") == []


async def test_ranking_and_scores_follow_cosine_distance(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_vector("query", [1.0, 0.0])
    angles = {"same": 0.0, "close": 0.3, "far": 1.2, "opposite": math.pi}
    for name, angle in angles.items():
        fake_openai.set_vector(name, [math.cos(angle), math.sin(angle)])
        await controlled.insights.add(name)
    hits = await controlled.insights.search("query", top_k=3)
    assert [h.insight.content for h in hits] == ["same", "close", "far"]
    for hit in hits:
        assert hit.score == pytest.approx(math.cos(angles[hit.insight.content]), abs=1e-6)
    assert len(await controlled.insights.search("query")) == 4  # top 5 by default, 4 exist
    assert (await controlled.insights.search("query", top_k=1))[0].insight.content == "same"


async def test_embedding_is_stored_as_given(controlled: Memory, fake_openai: FakeOpenAI) -> None:
    fake_openai.set_vector("v", [0.6, 0.8])
    insight = await controlled.insights.add("v")
    stored = (await controlled.insights.embeddings([insight.id]))[insight.id]
    assert stored[:3] == pytest.approx([0.6, 0.8, 0.0])


async def test_delete(memory: Memory) -> None:
    insight = await memory.insights.add("to forget")
    assert await memory.insights.delete(insight.id) is True
    assert await memory.insights.delete(insight.id) is False
    assert await memory.insights.get(insight.id) is None


async def test_search_uses_the_hnsw_index_now_and_as_of(memory: Memory) -> None:
    async with memory.db.write() as conn:
        await conn.execute(
            text(
                "INSERT INTO insights (namespace, content, embedding) "
                "SELECT 'default', 'row ' || g, "
                "       ARRAY(SELECT random() - 0.5 + g * 0 FROM generate_series(1, 384))::vector "
                "FROM generate_series(1, 5000) g"
            )
        )
        # a fifth of them superseded: the validity test filters during the index scan
        await conn.execute(
            text("UPDATE insights SET valid_to = valid_from + interval '1 second' WHERE id % 5 = 0")
        )
        await conn.execute(text("ANALYZE insights"))
    query = "[" + ",".join(["0.01"] * 384) + "]"
    moment = datetime.now(UTC)
    for as_of in (None, moment):
        async with memory.db.read() as conn:
            # a namespace above GQL_MEMORY_VECTOR_EXACT_MAX_ROWS walks the index (below, it is
            # searched exactly: tests/memory/search/test_tenant_independence.py)
            plan = "\n".join(
                (
                    await conn.execute(
                        text("EXPLAIN " + search_sql(as_of)),
                        {"q": query, "ns": "default", "k": 5, "as_of": as_of, "exact_rows": 1000},
                    )
                ).scalars()
            )
        assert "ix_insights_embedding_hnsw" in plan, plan
        hits = await memory.insights.search("row 7", top_k=5, as_of=as_of)
        assert len(hits) == 5
        assert all(h.insight.valid_to is None for h in hits)


async def test_optional_redaction_gate_for_insights(memory: Memory) -> None:
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    plain = await memory.insights.add(f"token is {secret}")
    assert secret in plain.content  # off by default
    gated = Memory(memory.db, memory.settings.with_overrides(redact_insights=True))
    stored = await gated.insights.add(f"token is {secret}", metadata={"key": secret})
    assert secret not in stored.content and "[REDACTED]" in stored.content
    assert stored.metadata == {"key": "[REDACTED]"}


async def test_long_texts_are_indexed_by_their_beginning_and_long_queries_refused(
    memory: Memory,
) -> None:
    long_text = "word " * 600_000  # 3 MB: over PostgreSQL's 1 MB tsvector limit if indexed whole
    insight = await memory.insights.add(long_text)
    assert (await memory.insights.get(insight.id)).content == long_text  # type: ignore[union-attr]
    episode = await memory.episodes.store("q", 0.1, long_text)
    assert episode.reflection == long_text
    with pytest.raises(ValidationError, match="query must be at most 10000 characters"):
        await memory.search("x" * 10_001)


async def test_an_insight_racing_the_erasure_of_its_sources_never_dangles(memory: Memory) -> None:
    """addInsight(sourceIds) against forgetSession of the session those turns are in: either
    the insight is refused (its sources are gone) or it is stored and then cleaned."""
    for trial in range(8):
        session = f"race-{trial}"
        turns = [(await memory.raw.store(session, "user", f"turn {i}")).id for i in range(3)]

        async def add(content: str, sources: list[int]) -> None:
            try:
                await memory.insights.add(content, sources)
            except ValidationError as exc:
                assert "Unknown sourceIds" in str(exc)

        await asyncio.gather(add(f"insight {trial}", turns), memory.forget_session(session))
        async with memory.db.read() as conn:
            dangling = await conn.scalar(
                text(
                    "SELECT count(*) FROM insights i, unnest(i.source_ids) s "
                    "WHERE NOT EXISTS (SELECT 1 FROM raw_dialogue r WHERE r.id = s)"
                )
            )
        assert dangling == 0, trial
