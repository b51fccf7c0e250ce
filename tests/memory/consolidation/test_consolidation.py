"""Consolidation in the library: duplicates merged, changed facts superseded, entities made
aliases, quiet sessions digested; every action journaled and undone exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.consolidation import ActionKind
from gql_memory.memory.insights import InsightInput
from tests.conftest import truncate_all

DAY = timedelta(days=1)


@pytest.fixture
async def clean(db: Database, settings: Settings) -> Memory:
    """The hash embedder of the suite scores restatements lower than e5 does: the duplicate
    threshold is lowered to its scale; the wording and fact tests are what is tested."""
    await truncate_all(db)
    return Memory(db, settings.with_overrides(consolidation_duplicate_similarity=0.2))


def ago(days: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=days)


async def add(memory: Memory, *texts: str, start_days_ago: float = 30) -> list[int]:
    items = [InsightInput(t, valid_from=ago(start_days_ago - i)) for i, t in enumerate(texts)]
    return [i.id for i in await memory.insights.add_many(items)]


async def test_duplicates_merge_into_the_earliest_with_the_union_of_sources(
    clean: Memory,
) -> None:
    first = await clean.raw.store("s1", "user", "Carol likes hiking, she said")
    second = await clean.raw.store("s2", "user", "Carol really enjoys hiking")
    a = await clean.insights.add("Carol likes hiking.", [first.id], valid_from=ago(10))
    b = await clean.insights.add(
        "User mentioned that Carol really enjoys hiking", [second.id], valid_from=ago(5)
    )
    report = await clean.consolidation.run()
    [merge] = report.actions
    assert merge.kind is ActionKind.MERGE and merge.target_id == a.id and merge.ids == (b.id,)
    assert merge.evidence["matched"] == {str(b.id): "fact"}
    merged = await clean.insights.get(b.id)
    survivor = await clean.insights.get(a.id)
    assert merged is not None and survivor is not None
    assert merged.superseded_by == a.id and merged.supersession_reason == "merged"
    assert survivor.is_valid and survivor.valid_from == a.valid_from
    assert sorted(survivor.source_ids) == sorted([first.id, second.id])
    assert (await clean.consolidation.run()).actions == []  # a second run changes nothing


async def test_similar_but_distinct_facts_are_never_merged_or_superseded(clean: Memory) -> None:
    await add(
        clean,
        "Carol likes hiking.",
        "Carol likes hiking in winter.",
        "Carol's sister lives in Lisbon.",
        "Carol's brother lives in Lisbon.",
        "Carol speaks French.",
        "Carol speaks German.",
        "Anna works at Acme.",
        "Ben works at Acme.",
        "Carol called Dan.",
        "Dan called Carol.",
    )
    assert (await clean.consolidation.run()).actions == []


async def test_a_changed_fact_supersedes_the_old_one_with_reason_updated(clean: Memory) -> None:
    berlin, munich = await add(clean, "Carol lives in Berlin.", "Carol moved to Munich.")
    [action] = (await clean.consolidation.run()).actions
    assert action.kind is ActionKind.SUPERSEDE
    assert (action.target_id, action.ids) == (munich, (berlin,))
    assert action.evidence["attribute"] == "residence"
    old = await clean.insights.get(berlin)
    new = await clean.insights.get(munich)
    assert old is not None and new is not None
    assert old.supersession_reason == "updated" and old.valid_to == new.valid_from
    hits = await clean.insights.search("Where does Carol live?", 5)
    assert [h.insight.id for h in hits] == [munich]
    before = await clean.insights.search("Where does Carol live?", 5, as_of=new.valid_from - DAY)
    assert [h.insight.id for h in before] == [berlin]


async def test_a_value_that_comes_back_is_two_updates_not_a_merge(clean: Memory) -> None:
    b1, m, b2 = await add(
        clean, "Carol lives in Berlin.", "Carol moved to Munich.", "Carol moved back to Berlin."
    )
    actions = (await clean.consolidation.run()).actions
    assert sorted((a.kind, a.target_id, a.ids) for a in actions) == sorted(
        [(ActionKind.SUPERSEDE, m, (b1,)), (ActionKind.SUPERSEDE, b2, (m,))]
    )


async def test_undo_restores_the_exact_state_and_is_not_redone(clean: Memory) -> None:
    a, b = await add(clean, "Dan works at Acme.", "Dan works at Acme.")
    await clean.working.add("about Dan", importance=0.5, ref_kind="INSIGHT", ref_id=b)
    before = await clean.insights.get(b)
    [merge] = (await clean.consolidation.run()).actions
    assert await _working_refs(clean) == [a]  # the reference moved to the survivor
    assert merge.changes["working_refs"]
    result = await clean.consolidation.undo(merge.id)
    assert result.restored == (b,) and result.left == {}
    assert await clean.insights.get(b) == before
    assert await _working_refs(clean) == [b]
    history = (await clean.consolidation.history()).items
    assert history[0].id == merge.id and history[0].undone
    assert (await clean.consolidation.run()).actions == []  # an undo is a decision
    with pytest.raises(ValidationError, match="already undone"):
        await clean.consolidation.undo(merge.id)


async def _working_refs(memory: Memory) -> list[int]:
    async with memory.db.read() as conn:
        rows = await conn.execute(text("SELECT ref_id FROM working_memory ORDER BY id"))
        return [r[0] for r in rows]


async def test_undo_leaves_what_a_caller_closed_since_and_says_so(clean: Memory) -> None:
    berlin, munich = await add(clean, "Eve lives in Berlin.", "Eve moved to Munich.")
    [update] = (await clean.consolidation.run()).actions
    await clean.insights.invalidate(munich)
    result = await clean.consolidation.undo(update.id)
    assert result.restored == (berlin,)
    assert (await clean.insights.get(munich)).supersession_reason == "caller"  # type: ignore[union-attr]


async def test_a_later_action_on_the_same_fact_must_be_undone_first(clean: Memory) -> None:
    b1, m, b2 = await add(
        clean, "Carol lives in Berlin.", "Carol moved to Munich.", "Carol lives in Paris."
    )
    first, second = sorted((await clean.consolidation.run()).actions, key=lambda a: a.id or 0)
    with pytest.raises(ValidationError, match=f"undo {second.id} first"):
        await clean.consolidation.undo(first.id)
    await clean.consolidation.undo(second.id)
    await clean.consolidation.undo(first.id)
    valid = [(await clean.insights.get(i)).is_valid for i in (b1, m, b2)]  # type: ignore[union-attr]
    assert valid == [True, True, True]


async def test_dry_run_reports_and_changes_nothing(clean: Memory) -> None:
    await add(clean, "Dan works at Acme.", "Dan works at Acme.")
    report = await clean.consolidation.run(dry_run=True)
    assert [a.kind for a in report.actions] == [ActionKind.MERGE] and report.actions[0].id is None
    async with clean.db.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM consolidation_actions")) == 0
        assert await conn.scalar(text("SELECT count(*) FROM insights WHERE valid_to IS NULL")) == 2


async def test_items_other_tools_key_by_name_are_left_alone(clean: Memory) -> None:
    await clean.insights.add("Dan works at Acme.", metadata={"observation_of": {"name": "Dan"}})
    await clean.insights.add("Dan works at Acme.", metadata={"observation_of": {"name": "Dan"}})
    await clean.insights.add("Dan works at Acme.", metadata={"langgraph": {"key": "k"}})
    assert (await clean.consolidation.run()).actions == []


async def test_automatic_entities_that_name_one_person_become_aliases(clean: Memory) -> None:
    await clean.raw.store("s", "user", "I met Caroline at the park")
    await clean.raw.store("s", "caroline", "hi there, it is me")  # a speaker entity
    await clean.raw.store("s", "user", "We saw Caroline S. later")
    report = await clean.consolidation.run()
    merges = [a for a in report.actions if a.kind is ActionKind.ENTITY_MERGE]
    assert len(merges) == 1
    assert sorted(merges[0].evidence["aliases"].values()) == ["Caroline S", "caroline"]
    survivor = merges[0].target_id
    turn = await clean.raw.store("s2", "user", "We met Caroline S. again")
    async with clean.db.read() as conn:
        linked = await conn.scalar(
            text(
                "SELECT count(*) FROM edges e JOIN nodes n ON n.namespace = e.namespace "
                "AND n.id = e.source_id WHERE n.raw_id = :t AND e.target_id = :s"
            ),
            {"t": turn.id, "s": survivor},
        )
    assert linked == 1  # a new mention of the alias links to the entity it names
    undone = await clean.consolidation.undo(merges[0].id)
    assert undone.restored == merges[0].ids


async def test_a_quiet_session_gets_a_searchable_digest_once(
    db: Database, settings: Settings
) -> None:
    await truncate_all(db)
    memory = Memory(db, settings.with_overrides(consolidation_digest_quiet_s=3600))
    old = ago(2)
    lines = [
        "I booked the flight to Lisbon for the conference in May.",
        "The conference in Lisbon is about distributed databases.",
        "Great, do you need a hotel near the Lisbon conference venue?",
        "Yes, a hotel near the venue, under 150 euros a night.",
        "I found three hotels near the conference venue in Lisbon.",
    ]
    for i, line in enumerate(lines):
        speaker = "user" if i % 2 == 0 else "assistant"
        await memory.raw.store("trip", speaker, line, timestamp=old + timedelta(minutes=i))
    await memory.raw.store("live", "user", "still talking", timestamp=datetime.now(UTC))
    [digest] = (await memory.consolidation.run()).actions
    assert digest.kind is ActionKind.DIGEST
    insight = await memory.insights.get(digest.target_id)
    assert insight is not None and insight.digest_of == "trip"
    assert "Lisbon" in insight.content and len(insight.source_ids) == len(lines)
    hits = await memory.insights.search("Lisbon conference hotel", 1)
    assert hits[0].insight.id == insight.id
    assert (await memory.consolidation.run()).actions == []


async def test_restatements_below_the_similarity_threshold_are_not_merged(
    db: Database, settings: Settings
) -> None:
    await truncate_all(db)
    strict = Memory(db, settings.with_overrides(consolidation_duplicate_similarity=0.99))
    await add(strict, "Carol likes hiking.", "User mentioned that Carol really enjoys hiking")
    assert (await strict.consolidation.run()).actions == []
    loose = Memory(db, settings.with_overrides(consolidation_duplicate_similarity=0.2))
    assert [a.kind for a in (await loose.consolidation.run()).actions] == [ActionKind.MERGE]


async def test_a_sessions_digest_lends_its_turns_when_asked(
    db: Database, settings: Settings
) -> None:
    await truncate_all(db)
    old = ago(2)
    topics = {
        "trip": ["We fly to Lisbon in May.", "The hotel in Lisbon is booked.", "Pack light."],
        "work": ["The release ships Friday.", "The Lisbon office joins the call.", "Done."],
    }
    writer = Memory(db, settings.with_overrides(consolidation_digest_min_turns=3))
    for session, lines in topics.items():
        for i, line in enumerate(lines):
            await writer.raw.store(session, "user", line, timestamp=old + timedelta(minutes=i))
    digests = (await writer.consolidation.run()).actions
    assert sorted(a.evidence["session"] for a in digests) == ["trip", "work"]

    async def shares(digest_share: float) -> dict[str, float]:
        reader = Memory(db, settings.with_overrides(search_digest_share=digest_share))
        hits = await reader.search("Lisbon hotel", top_k=6, layers=["RAW"], session_id=None)
        return {h.content.removeprefix("user: "): h.session_share for h in hits}

    without, lent = await shares(0.0), await shares(0.5)
    trip, work = "The hotel in Lisbon is booked.", "The Lisbon office joins the call."
    assert lent[trip] > without[trip]  # the trip's digest is nearest the query
    assert lent[work] == without[work]  # the farthest digest lends nothing


async def test_the_same_words_of_two_subjects_are_two_facts(clean: Memory) -> None:
    """'will' is a stop word and 'User' a soft one: the words alone would be equal."""
    await add(clean, "User's favourite food is pizza.", "Will says their favourite food is pizza.")
    await add(clean, "I drink green tea in the morning.", "In the morning Will drinks green tea.")
    assert (await clean.consolidation.run()).actions == []
