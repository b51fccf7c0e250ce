"""Context assembly (SPEC §3.9): sections, reasons, token costs, the budget, determinism and
a bounded number of round trips."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import event
from sqlalchemy.engine import Engine

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.context.assembly import Context, ItemKind, SectionKind
from gql_memory.memory.context.tokens import DEFAULT_TOKENIZER
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI


@pytest.fixture
async def controlled(db: Database, settings: Settings, fake_openai: FakeOpenAI) -> Memory:
    """Services whose embeddings are the fake server's known vectors."""
    await truncate_all(db)
    fake_openai.reset()
    return Memory(db, openai_settings(settings, fake_openai))


async def seed_agent_memory(memory: Memory) -> dict[str, int]:
    """A small world: working memory, insights, raw turns, an episode and a graph."""
    ids: dict[str, int] = {}
    ids["wm_low"] = (await memory.working.add("User likes green tea", 0.3, session_id="s")).added_id
    ids["wm_high"] = (
        await memory.working.add("Deadline for the Berlin trip is Friday", 0.95, session_id="s")
    ).added_id
    ids["berlin"] = (await memory.insights.add("The user is planning a trip to Berlin")).id
    ids["tea"] = (await memory.insights.add("The user prefers tea over coffee")).id
    ids["turn"] = (await memory.raw.store("s", "user", "Book a hotel in Berlin for me")).id
    ids["episode"] = (
        await memory.episodes.store(
            "plan a trip to Berlin", 0.8, "Ask for the dates before booking anything"
        )
    ).id
    berlin = await memory.graph.add_node("City", "Berlin", insight_id=ids["berlin"])
    germany = await memory.graph.add_node("Country", "Germany")
    await memory.graph.add_edge(berlin.id, germany.id, "located_in")
    ids["edge"] = (
        await memory.graph.add_edge(("Person", "user"), berlin.id, "visits", create_missing=True)
    ).id
    return ids


def section(context: Context, kind: SectionKind) -> list[str]:
    found = [s for s in context.sections if s.kind is kind]
    return [i.content for i in found[0].items] if found else []


async def test_the_four_sections_come_in_order_with_headers(memory: Memory) -> None:
    await seed_agent_memory(memory)
    context = await memory.context("trip to Berlin", session_id="s")
    assert [s.kind for s in context.sections] == list(SectionKind)
    for s in context.sections:
        assert s.header in context.text
        assert s.reason and s.tokens > 0
    assert context.text.index("Working memory") < context.text.index("Relevant memories")
    assert context.text.index("Lessons") < context.text.index("Related facts")


async def test_working_memory_comes_highest_attention_first(memory: Memory) -> None:
    await seed_agent_memory(memory)
    context = await memory.context("trip to Berlin", session_id="s")
    working = context.sections[0]
    assert [i.content for i in working.items] == [
        "- Deadline for the Berlin trip is Friday",
        "- User likes green tea",
    ]
    assert [i.kind for i in working.items] == [ItemKind.WORKING_MEMORY] * 2
    assert "importance 0.95" in working.items[0].reason and "#1" in working.items[0].reason
    other = await memory.context("trip to Berlin", session_id="another")
    assert not section(other, SectionKind.WORKING)


async def test_search_hits_say_why_they_ranked(memory: Memory) -> None:
    ids = await seed_agent_memory(memory)
    context = await memory.context("trip to Berlin", session_id="s")
    hits = next(s for s in context.sections if s.kind is SectionKind.SEARCH).items
    assert hits[0].kind is ItemKind.INSIGHT and hits[0].id == str(ids["berlin"])
    assert hits[0].reason.startswith("search #1: vector rank")
    assert "text rank" in hits[0].reason and "dbsf" in hits[0].reason and "final" in hits[0].reason
    assert any(i.kind is ItemKind.RAW and "Book a hotel" in i.content for i in hits)


async def test_search_hits_a_working_memory_item_refers_to_are_not_repeated(
    memory: Memory,
) -> None:
    ids = await seed_agent_memory(memory)
    await memory.working.add(
        "Berlin trip insight", 0.5, session_id="s", ref_kind="INSIGHT", ref_id=ids["berlin"]
    )
    context = await memory.context("trip to Berlin", session_id="s")
    hits = [
        (i.kind, i.id) for s in context.sections if s.kind is SectionKind.SEARCH for i in s.items
    ]
    assert hits and (ItemKind.INSIGHT, str(ids["berlin"])) not in hits
    referring = [i for i in context.sections[0].items if "refers to INSIGHT" in i.reason]
    assert "(search hit #1, not repeated there)" in referring[0].reason
    # the others keep their rank among all the hits: #1 is the one working memory shows
    numbers = [
        int(i.reason.split(":", 1)[0].removeprefix("search #"))
        for s in context.sections
        if s.kind is SectionKind.SEARCH
        for i in s.items
    ]
    assert numbers == list(range(2, len(numbers) + 2))


async def test_lessons_carry_reflection_and_reward(memory: Memory) -> None:
    ids = await seed_agent_memory(memory)
    context = await memory.context("plan a trip to Berlin", session_id="s")
    [lesson] = next(s for s in context.sections if s.kind is SectionKind.EPISODES).items
    assert lesson.id == str(ids["episode"]) and lesson.kind is ItemKind.EPISODE
    assert "Ask for the dates before booking anything" in lesson.content
    assert "reward +0.80" in lesson.content
    assert "similarity 1.000 >= 0.70" in lesson.reason


async def test_graph_facts_are_one_hop_around_the_top_hits(memory: Memory) -> None:
    ids = await seed_agent_memory(memory)
    context = await memory.context("trip to Berlin", session_id="s", include=["GRAPH"])
    [graph] = context.sections
    assert graph.kind is SectionKind.GRAPH
    facts = {i.content for i in graph.items}
    assert facts == {
        "- Berlin (City) —located_in→ Germany (Country)",
        "- user (Person) —visits→ Berlin (City)",
    }
    visit = next(i for i in graph.items if i.id == str(ids["edge"]))
    assert f"tied to INSIGHT {ids['berlin']} (search hit #" in visit.reason


async def test_include_chooses_the_sections(memory: Memory) -> None:
    await seed_agent_memory(memory)
    context = await memory.context("Berlin", session_id="s", include=["EPISODES", "WORKING"])
    assert [s.kind for s in context.sections] == [SectionKind.WORKING]  # no similar episode
    assert "Relevant memories" not in context.text


async def test_an_empty_memory_gives_an_empty_context(memory: Memory) -> None:
    context = await memory.context("anything")
    assert (context.text, context.sections, context.total_tokens) == ("", (), 0)


async def test_items_that_do_not_fit_are_cut_with_a_marker_or_skipped(memory: Memory) -> None:
    long = " ".join(f"word{i}" for i in range(3000))
    await memory.working.add(long, 0.9, session_id="s")
    await memory.working.add("short note", 0.1, session_id="s")
    context = await memory.context("note", session_id="s", max_tokens=200, include=["WORKING"])
    items = context.sections[0].items
    assert items[0].truncated and items[0].content.endswith("… [truncated]")
    assert context.total_tokens <= 200
    assert [i.content for i in items][-1] == "- short note"


async def test_token_costs_add_up_to_the_total(memory: Memory) -> None:
    await seed_agent_memory(memory)
    context = await memory.context("trip to Berlin", session_id="s", max_tokens=500)
    count = DEFAULT_TOKENIZER.count
    for s in context.sections:
        assert s.tokens == count(s.header) + sum(i.tokens for i in s.items)
        for item in s.items:
            assert item.tokens == count("\n" + item.content)
    separators = count("\n\n") * (len(context.sections) - 1)
    assert context.total_tokens == count(context.text)
    # parts are counted on their own: rounding makes the whole at most their sum
    parts = sum(s.tokens for s in context.sections) + separators
    assert parts - len(context.sections) * 2 <= context.total_tokens <= parts


async def test_the_same_data_gives_the_same_context(memory: Memory) -> None:
    await seed_agent_memory(memory)
    first = await memory.context("trip to Berlin", session_id="s", max_tokens=300)
    second = await memory.context("trip to Berlin", session_id="s", max_tokens=300)
    assert first == second


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query must not be empty"),
        ({"query": "   "}, "query must not be empty"),
        ({"query": "q", "max_tokens": 10}, "maxTokens must be between 32 and 100000"),
        ({"query": "q", "max_tokens": 100_001}, "maxTokens must be between 32 and 100000"),
        ({"query": "q", "include": []}, "include must name at least one section"),
        ({"query": "q", "include": ["NOPE"]}, "include must be WORKING, SEARCH, EPISODES"),
        ({"query": "q", "session_id": ""}, "sessionId must not be empty"),
    ],
)
async def test_invalid_arguments_are_refused(
    memory: Memory, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.context(**kwargs)  # type: ignore[arg-type]


async def test_the_query_is_embedded_once(controlled: Memory, fake_openai: FakeOpenAI) -> None:
    await seed_agent_memory(controlled)
    fake_openai.requests.clear()
    await controlled.context("trip to Berlin", session_id="s")
    assert len(fake_openai.requests) == 1


@pytest.fixture
def statements() -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


async def test_round_trips_are_bounded_whatever_the_data(
    memory: Memory, statements: list[str]
) -> None:
    await seed_agent_memory(memory)
    for i in range(40):
        insight = await memory.insights.add(f"fact {i} about the Berlin trip")
        node = await memory.graph.add_node("Fact", str(i), insight_id=insight.id)
        await memory.graph.add_edge(node.id, ("City", "Berlin"), "about")
    statements.clear()
    context = await memory.context("Berlin trip", session_id="s")
    assert context.sections
    queries = [s for s in statements if not s.strip().upper().startswith(("BEGIN", "COMMIT"))]
    # working memory, search (legs, raw sessions and speakers, graph, content), episodes, facts
    assert len(queries) <= 7, queries


@hypothesis_settings(
    max_examples=40,
    deadline=None,
    # the data is seeded once per example run by the first call; examples only read
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    max_tokens=st.integers(min_value=32, max_value=3000),
    include=st.sets(st.sampled_from(list(SectionKind)), min_size=1),
    query=st.sampled_from(["Berlin", "trip to Berlin", "tea", "plan a trip to Berlin"]),
)
async def test_the_total_never_exceeds_the_budget(
    memory: Memory, max_tokens: int, include: set[SectionKind], query: str
) -> None:
    if (await memory.stats()).working_memory == 0:
        await seed_agent_memory(memory)
        for i in range(30):
            await memory.working.add(f"note {i} " + "x" * (i * 40), 0.5, session_id="s")
    context = await memory.context(query, session_id="s", max_tokens=max_tokens, include=include)
    assert context.total_tokens == DEFAULT_TOKENIZER.count(context.text) <= max_tokens
    assert {s.kind for s in context.sections} <= include
    for s in context.sections:
        assert all(i.tokens > 0 and i.reason for i in s.items)


async def test_without_embeddings_it_falls_back_to_full_text_and_says_so(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    await seed_agent_memory(controlled)
    fake_openai.always_fail = 503
    context = await controlled.context("trip to Berlin", session_id="s")
    assert [s.kind for s in context.sections] == [
        SectionKind.WORKING,
        SectionKind.SEARCH,
        SectionKind.GRAPH,
    ]
    hits = context.sections[1].items
    assert hits and all("vector rank" not in i.reason and "text rank" in i.reason for i in hits)
    assert context.notes[0].startswith("embeddings unavailable")
    assert context.notes[1] == "episodes skipped: their similarity needs embeddings"


async def test_time_over_its_ceiling_is_not_read_and_the_context_says_so(
    memory: Memory,
) -> None:
    """A question whose time takes more than GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS of CPU
    to read (here 1 ms; it takes several) is stopped in its reader and searched without a
    period; the notes say why."""
    strict = Memory(memory.db, memory.settings.with_overrides(search_time_read_ceiling_ms=1))
    await strict.raw.store(
        "s", "user", "We went camping", timestamp=datetime(2023, 7, 2, tzinfo=UTC)
    )
    question = "What happened between 1 May 2023 and 7 May 2023, 9 June 2023 or 12 July 2023?"
    context = await strict.context(
        question,
        include=["SEARCH"],
        interpret_time=True,
        reference_time=datetime(2023, 10, 1, tzinfo=UTC),
    )
    assert context.notes == (
        "time not read: reading it took more than 1 ms (GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS);"
        " searched without a period",
    )
    [item] = context.sections[0].items
    assert "time read from the query" not in item.reason
    read = await memory.context(
        question,
        include=["SEARCH"],
        interpret_time=True,
        reference_time=datetime(2023, 10, 1, tzinfo=UTC),
    )
    assert read.notes == () and "time read from the query" in read.sections[0].items[0].reason


async def test_a_huge_item_is_packed_off_the_event_loop(memory: Memory) -> None:
    """Issue 11's first reproducer: a 15 MB item without spaces. Packing reads a bounded
    prefix, and a large budget is packed in a worker thread, not on the event loop."""
    import threading

    await memory.working.add("x" * 15_000_000, 0.5, session_id="huge")
    packer = memory.assembler.packer
    threads: list[str] = []
    original = packer.pack_counted

    def recording_pack(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    packer.pack_counted = recording_pack  # type: ignore[method-assign]
    try:
        small = await memory.context("x", "huge", max_tokens=2000, include=["WORKING"])
        large = await memory.context("x", "huge", max_tokens=100_000, include=["WORKING"])
    finally:
        packer.pack_counted = original  # type: ignore[method-assign]
    main = threading.main_thread().name
    assert threads[0] == main and threads[1] != main  # small budgets stay inline
    for context, budget in ((small, 2000), (large, 100_000)):
        [item] = context.sections[0].items
        assert item.truncated and context.total_tokens <= budget
        assert item.content.startswith("- xxxx")
