"""Time-aware facts in the library: validity, supersession, as-of reads, nothing deleted."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.search.types import MemoryLayer
from tests.conftest import truncate_all

PARIS = "The user lives in Paris and works at a bakery"
LYON = "The user lives in Lyon and works at a bakery"
BERLIN = "The user moved to Berlin and works at a bakery"


@pytest.fixture
async def clean(db: Database, memory: Memory) -> Memory:
    await truncate_all(db)
    return memory


async def test_superseding_closes_links_and_keeps_everything(clean: Memory) -> None:
    paris = await clean.insights.add(PARIS)
    berlin = await clean.insights.add(BERLIN, supersedes=[paris.id])
    old = await clean.insights.get(paris.id)
    assert old is not None and old.valid_to == berlin.valid_from
    assert old.superseded_by == berlin.id and not old.is_valid
    assert (await clean.insights.get(berlin.id)).supersedes == (paris.id,)  # type: ignore[union-attr]
    async with clean.db.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM insights")) == 2


async def test_a_backdated_fact_closes_its_predecessor_at_its_own_start(clean: Memory) -> None:
    paris = await clean.insights.add(PARIS, valid_from=datetime.now(UTC) - timedelta(days=30))
    moved = datetime.now(UTC) - timedelta(days=10)
    berlin = await clean.insights.add(BERLIN, supersedes=[paris.id], valid_from=moved)
    assert berlin.valid_from == moved
    three_weeks_ago = datetime.now(UTC) - timedelta(days=21)
    then = await clean.search("where does the user live", as_of=three_weeks_ago)
    assert [h.id for h in then] == [paris.id]
    before_both = datetime.now(UTC) - timedelta(days=40)
    assert await clean.search("where does the user live", as_of=before_both) == []
    with pytest.raises(ValidationError, match="before it became valid"):
        await clean.insights.add(
            LYON, supersedes=[berlin.id], valid_from=datetime.now(UTC) - timedelta(days=20)
        )
    with pytest.raises(ValidationError, match="future"):
        await clean.insights.add(LYON, valid_from=datetime.now(UTC) + timedelta(days=1))


async def test_a_refused_supersession_writes_nothing(clean: Memory) -> None:
    paris = await clean.insights.add(PARIS)
    with pytest.raises(ValidationError, match="Unknown insight ids"):
        await clean.insights.add(BERLIN, supersedes=[paris.id, paris.id + 1000])
    page = await clean.insights.list(include_superseded=True)
    assert [i.content for i in page.items] == [PARIS]
    assert page.items[0].is_valid


async def test_concurrent_supersessions_of_one_fact_let_one_win(clean: Memory) -> None:
    paris = await clean.insights.add(PARIS)
    results = await asyncio.gather(
        clean.insights.add(BERLIN, supersedes=[paris.id]),
        clean.insights.add(LYON, supersedes=[paris.id]),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], ValidationError)
    page = await clean.insights.list(include_superseded=True)
    assert len(page.items) == 2  # the loser's insight was rolled back with its supersession


async def test_superseded_neighbours_do_not_come_back_through_the_graph(clean: Memory) -> None:
    turn = (await clean.raw.store("s", "user", "I moved from Paris to Berlin last spring")).id
    paris = await clean.insights.add(PARIS, source_ids=[turn])
    await clean.insights.add(BERLIN, source_ids=[turn], supersedes=[paris.id])
    # the turn's hit lends to the insights distilled from it: only the valid one may join
    hits = await clean.search("moved from Paris to Berlin", layers=["RAW", "INSIGHT"])
    found = {(h.layer, h.id) for h in hits}
    assert (MemoryLayer.INSIGHT, paris.id) not in found
    assert all(h.valid_to is None for h in hits)


async def test_episodes_supersede_and_hide_like_insights(clean: Memory) -> None:
    first = await clean.episodes.store("book a table", 0.2, "call ahead")
    moment = datetime.now(UTC)
    await asyncio.sleep(0.01)
    second = await clean.episodes.store(
        "book a table", 0.9, "use the app, it confirms at once", supersedes=[first.id]
    )
    assert second.supersedes == (first.id,)
    now = await clean.episodes.similar("book a table", 0.0)
    assert [h.episode.id for h in now] == [second.id]
    then = await clean.episodes.similar("book a table", 0.0, as_of=moment)
    assert [h.episode.id for h in then] == [first.id]
    hits = await clean.search("book a table", layers=["EPISODE"])
    assert [h.id for h in hits] == [second.id]


async def test_context_as_of_an_instant_sees_the_facts_of_then(clean: Memory) -> None:
    paris = await clean.insights.add(PARIS)
    moment = datetime.now(UTC)
    await asyncio.sleep(0.01)
    await clean.insights.add(BERLIN, supersedes=[paris.id])
    now = await clean.context("where does the user live", include=["SEARCH"])
    then = await clean.context("where does the user live", include=["SEARCH"], as_of=moment)
    assert "Berlin" in now.text and "Paris" not in now.text
    assert "Paris" in then.text and "Berlin" not in then.text


async def test_the_contradiction_threshold_is_a_setting(db: Database, settings: Settings) -> None:
    await truncate_all(db)
    memory = Memory(db, settings.with_overrides(contradiction_similarity=0.7))
    paris = await memory.insights.add(PARIS)
    berlin = await memory.insights.add(BERLIN)  # ~0.57 with the hash embedder: not similar
    lyon = await memory.insights.add(LYON)  # ~0.76
    hints = await memory.insights.possible_contradictions(lyon.id)
    assert [h.insight.id for h in hints] == [paris.id]
    assert berlin.id not in {h.insight.id for h in hints}
    await memory.insights.add("The user lives in Nice", supersedes=[paris.id])
    assert await memory.insights.possible_contradictions(lyon.id) == []  # only valid ones
