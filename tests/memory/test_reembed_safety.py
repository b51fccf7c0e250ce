"""Re-embedding never mixes models (issue 18): the fake embedding server marks every vector
with the model that made it, and after each scenario every stored vector must carry the mark
of the model the database records."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import make_provider
from gql_memory.errors import ConfigurationError, GqlMemoryError
from gql_memory.memory import Memory
from gql_memory.memory.embedding_config import (
    EMBEDDED_TABLES,
    reembed,
    reembed_status,
    stored_signature,
    verify_embedding_config,
)
from gql_memory.store import AsyncMemoryStore
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI, model_mark

ROWS = 30


@pytest_asyncio.fixture
async def marked(
    fake_openai: FakeOpenAI, db: Database, settings: Settings
) -> AsyncIterator[FakeOpenAI]:
    """A database at model-a (30 insights, episodes and turns), the fake marking models."""
    fake_openai.reset()
    fake_openai.mark_models = True
    await truncate_all(db)
    async with db.write() as conn:  # a fresh start: whatever earlier tests switched to
        await conn.execute(text("UPDATE embedding_config SET provider = 'unset', dim = 384"))
    at_a = make_provider(openai_settings(settings, fake_openai, embedding_model="model-a"))
    await verify_embedding_config(db, at_a)
    memory = Memory(db, settings.with_overrides(embed_raw_dialogue=True), embedder=at_a)
    for n in range(ROWS):
        await memory.insights.add(f"insight {n}")
        await memory.episodes.store(f"task {n}", 0.5, f"lesson {n}")
        await memory.raw.store("s1", "user", f"turn {n}")
    await at_a.aclose()
    yield fake_openai
    fake_openai.reset()


def provider(settings: Settings, fake: FakeOpenAI, model: str, dim: int = 384):  # type: ignore[no-untyped-def]
    return make_provider(openai_settings(settings, fake, embedding_model=model, embedding_dim=dim))


async def marks(db: Database) -> set[float]:
    """The model marks of every stored vector (the last component)."""
    found: set[float] = set()
    async with db.read() as conn:
        for table in EMBEDDED_TABLES:
            rows = await conn.execute(
                text(
                    f"SELECT DISTINCT round(CAST((CAST(embedding AS real[]))"
                    f"[vector_dims(embedding)] AS numeric), 3) FROM {table} "
                    "WHERE embedding IS NOT NULL"
                )
            )
            found |= {float(v) for v in rows.scalars()}
    return found


async def interrupted(db: Database, settings: Settings, fake: FakeOpenAI, model: str) -> None:
    """A run toward ``model`` that dies after two batches (as a kill -9 would leave it)."""
    fake.fail_after = len(fake.requests) + 2
    towards = provider(settings, fake, model)
    with pytest.raises(GqlMemoryError):
        await reembed(db, towards, batch_size=10, embed_all_raw=True)
    await towards.aclose()
    fake.fail_after = None


async def test_an_interrupted_run_is_not_continued_toward_another_model(
    db: Database, settings: Settings, marked: FakeOpenAI
) -> None:
    """Finding 1: a re-run with model B 'completed' and left A's vectors next to B's."""
    assert await marks(db) == {round(model_mark("model-a"), 3)}
    await interrupted(db, settings, marked, "model-b")
    status = await reembed_status(db, embed_all_raw=True)
    assert status.target is not None and status.target.model == "model-b"
    assert status.tables["insights"][0] > 0  # part of the way
    # servers and library users refuse the database meanwhile
    with pytest.raises(ConfigurationError, match="re-embed toward .*model-b.* is in progress"):
        await verify_embedding_config(db, provider(settings, marked, "model-a"))

    at_c = provider(settings, marked, "model-c")
    with pytest.raises(ConfigurationError, match="--restart") as refused:
        await reembed(db, at_c, batch_size=10, embed_all_raw=True)
    assert "model-b" in str(refused.value) and "model-c" in str(refused.value)
    counts = await reembed(db, at_c, batch_size=10, embed_all_raw=True, restart=True)
    assert counts == {table: ROWS for table in EMBEDDED_TABLES}
    assert await marks(db) == {round(model_mark("model-c"), 3)}
    assert (await stored_signature(db)).model == "model-c"
    assert (await reembed_status(db)).target is None
    await verify_embedding_config(db, at_c)


async def test_an_interrupted_run_resumes_toward_the_same_model(
    db: Database, settings: Settings, marked: FakeOpenAI
) -> None:
    await interrupted(db, settings, marked, "model-b")
    requests = len(marked.requests)
    counts = await reembed(
        db, provider(settings, marked, "model-b"), batch_size=10, embed_all_raw=True
    )
    assert sum(counts.values()) < 3 * ROWS  # what the first run wrote is kept
    assert len(marked.requests) - requests < 9
    assert await marks(db) == {round(model_mark("model-b"), 3)}


async def test_another_dimension_after_an_interrupted_run_rebuilds_the_side_column(
    db: Database, settings: Settings, marked: FakeOpenAI
) -> None:
    """Finding 2: ADD COLUMN IF NOT EXISTS kept the old 384-dimension side column."""
    await interrupted(db, settings, marked, "model-b")
    marked.dim = 256
    try:
        small = provider(settings, marked, "model-small", dim=256)
        with pytest.raises(ConfigurationError, match="--restart"):
            await reembed(db, small, batch_size=10, embed_all_raw=True)
        await reembed(db, small, batch_size=10, embed_all_raw=True, restart=True)
        assert await marks(db) == {round(model_mark("model-small"), 3)}
        async with db.read() as conn:
            dims = await conn.execute(text("SELECT DISTINCT vector_dims(embedding) FROM insights"))
            assert set(dims.scalars()) == {256}
    finally:  # back to 384 dimensions for the tests after this one
        marked.dim = 384
        back = provider(settings, marked, "model-a")
        await reembed(db, back, batch_size=50, embed_all_raw=True, restart=True)


async def test_a_re_embed_is_refused_while_a_server_or_library_is_connected(
    db: Database, settings: Settings, marked: FakeOpenAI
) -> None:
    """Finding 3: writes during the fill got no vector in the side column, and a server on
    the old model wrote into the new column. Now the run refuses to start while anything
    that writes or searches is connected, and nothing has changed when it does."""
    assert settings.database_url
    at_a = openai_settings(settings, marked, embedding_model="model-a")
    async with AsyncMemoryStore(settings=at_a, migrate=False) as user:
        await user.memory.insights.add("written by a connected library user")
        admin = Database.for_maintenance(settings.database_url, settings)
        try:
            with pytest.raises(ConfigurationError, match="stop every server and library user"):
                await reembed(
                    admin, provider(settings, marked, "model-b"), exclusive=True, batch_size=10
                )
        finally:
            await admin.dispose()
    assert (await reembed_status(db)).target is None
    assert await marks(db) == {round(model_mark("model-a"), 3)}


async def test_reembed_status_shows_the_target_and_what_is_left(
    db: Database, settings: Settings, marked: FakeOpenAI
) -> None:
    from typer.testing import CliRunner

    from gql_memory.cli import app

    await interrupted(db, settings, marked, "model-b")
    assert settings.database_url
    shown = await asyncio.to_thread(  # the command runs its own event loop
        CliRunner().invoke,
        app,
        ["reembed", "--status"],
        env={"DATABASE_URL": settings.database_url},
    )
    assert shown.exit_code == 0, shown.output
    lines = [line for line in shown.output.splitlines() if '"level"' not in line]  # not logs
    assert lines[0].startswith("re-embed in progress toward 384-dimensional embeddings from ")
    assert "openai/model-b" in lines[0]
    assert any(line.startswith("insights: ") and line.endswith(" left") for line in lines)
    assert "run `gql-memory reembed` again to finish it" in shown.output
    # finish it, so that the database is at one model again
    await reembed(db, provider(settings, marked, "model-b"), batch_size=50, embed_all_raw=True)
    assert await marks(db) == {round(model_mark("model-b"), 3)}
