"""Time in a search query (interpretTime): the period read from absolute and relative
expressions against a fixed reference, ordinary questions that name none, and search ranking
what happened in the period higher, explained on every hit; a query without an expression is
ranked exactly as without interpretTime."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import pytest

from gql_memory import ValidationError
from gql_memory.config import TIME_RANKING_DEPTH, Settings
from gql_memory.memory import Memory
from gql_memory.memory.context.assembly import explain_hit
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.search import period as time_expressions
from gql_memory.memory.search.period import read_period
from tests.conftest import ROOT

# a Friday
REFERENCE = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


TONIGHT = at(2023, 10, 21)  # the end of the reference's day
MAY = (at(2023, 5, 1), at(2023, 6, 1))
EXPRESSIONS = [
    # (question, the expression read (as found, perhaps with a preposition), granularity,
    #  start, end)
    ("What did Caroline do on 7 May 2023?", "7 May 2023", "day", at(2023, 5, 7), at(2023, 5, 8)),
    ("Who did Maria meet on May 3, 2023?", "May 3, 2023", "day", at(2023, 5, 3), at(2023, 5, 4)),
    ("What happened in May 2023?", "May 2023", "month", at(2023, 5, 1), at(2023, 6, 1)),
    ("Where did we travel in 2022?", "2022", "year", at(2022, 1, 1), at(2023, 1, 1)),
    ("What did I do yesterday?", "yesterday", "day", at(2023, 10, 19), at(2023, 10, 20)),
    ("What did we decide last week?", "last week", "week", at(2023, 10, 9), at(2023, 10, 16)),
    ("What happened two months ago?", "two months ago", "month", at(2023, 8, 1), at(2023, 9, 1)),
    ("What did we do 3 days ago?", "3 days ago", "day", at(2023, 10, 17), at(2023, 10, 18)),
    ("What did he say last Friday?", "last Friday", "day", at(2023, 10, 13), at(2023, 10, 14)),
    ("What happened on Aug 15th?", "Aug 15th", "day", at(2023, 8, 15), at(2023, 8, 16)),
    # a date since which, and spans: up to the end of the reference's day
    ("What changed since 1 May 2023?", "since 1 May 2023", "day", at(2023, 5, 1), TONIGHT),
    ("What did we cook in the past week?", "the past week", "day", at(2023, 10, 13), TONIGHT),
    ("Where did we go the last two weeks?", "the last two weeks", "day", at(2023, 10, 6), TONIGHT),
    # a year alone, whatever day dateparser guessed for it ("Q3 2023" reads as 1 July)
    ("what happened in q3 2023", "q3 2023", "year", at(2023, 1, 1), at(2024, 1, 1)),
    # ... and a day guessed from a month and a time of day, that month
    ("What did we do at 5pm in May 2023?", "May 2023", "month", *MAY),
    # a span of something else is no span up to now
    ("What did we do in the last two days of May 2023?", "May 2023", "month", *MAY),
    ("What happened since (May 2023)?", "since (May 2023", "month", at(2023, 5, 1), TONIGHT),
]


@pytest.mark.parametrize(("question", "expression", "granularity", "start", "end"), EXPRESSIONS)
def test_a_time_expression_is_read_into_its_period(
    question: str, expression: str, granularity: str, start: datetime, end: datetime
) -> None:
    period = read_period(question, REFERENCE, timedelta(days=7))
    assert period is not None
    assert expression in period.expression and period.expression in question
    assert (period.granularity, period.start, period.end) == (granularity, start, end)
    # the tail: 7 days after the period, never past the reference time
    assert period.until == max(end, min(end + timedelta(days=7), REFERENCE))


@pytest.mark.parametrize(
    "question",
    [
        "What may John's degree be in?",
        "Is May her favourite month?",
        "What might Caroline march for?",
        "What did Mel paint in March?",  # a month alone: which year?
        "Who came second in the race?",
        "What is she doing now?",
        "Did Melanie enjoy the sun at the beach?",
        "What does Sunday mean to Mel?",
        "What did we decide about the menu?",
        "How long ago was Caroline's 18th birthday?",
        "What was the last thing John said?",
        "Who is this?",
        "Which 3 books did Tim read?",
        "What happened at 5 pm?",
        "When did Melanie paint a sunrise?",
        "Where is room 1205?",  # no year: memories are not about the 13th century
        "Call me at 555 1234",
    ],
)
def test_ordinary_questions_name_no_period(question: str) -> None:
    assert read_period(question, REFERENCE) is None


def test_several_expressions_give_their_span() -> None:
    period = read_period("Where was John between August 11 and August 15 2023?", REFERENCE)
    assert period is not None
    assert (period.start, period.end) == (at(2023, 8, 11), at(2023, 8, 16))
    assert "August 11" in period.expression and "August 15 2023" in period.expression


def test_an_expression_repeated_is_read_once() -> None:
    period = read_period(" ".join(["2023"] * 100), REFERENCE)
    assert period is not None and period.expression == "2023"


def test_a_period_after_the_reference_time_is_dropped() -> None:
    assert read_period("What will happen on 7 May 2030?", REFERENCE) is None
    assert read_period("What is planned for next month?", REFERENCE) is None


def test_a_day_is_the_reference_times_own_day() -> None:
    tokyo = timezone(timedelta(hours=9))
    # 01:00 in Tokyo is still the 19th in UTC: "yesterday" is the 19th in Tokyo
    period = read_period("what happened yesterday?", datetime(2023, 10, 20, 1, 0, tzinfo=tokyo))
    assert period is not None
    assert (period.start, period.end) == (
        datetime(2023, 10, 19, tzinfo=tokyo),
        datetime(2023, 10, 20, tzinfo=tokyo),
    )


def test_a_period_that_utc_cannot_hold_is_dropped() -> None:
    kiribati = timezone(timedelta(hours=14))
    early = datetime(1, 1, 3, 5, 0, tzinfo=kiribati)
    assert read_period("What happened on 1 January 0001?", early) is None  # year 0 in UTC
    late = datetime(9999, 12, 30, tzinfo=UTC)
    period = read_period("What happened yesterday?", late, timedelta(days=30))
    assert period is not None and period.until == period.end  # no window past 9999
    for question in ("What happened this year?", "What happened this month?"):
        assert read_period(question, datetime(9999, 12, 30, 12, tzinfo=UTC)) is None
    last = datetime(9999, 12, 31, 12, 0, tzinfo=UTC)
    period = read_period("What changed since yesterday?", last, timedelta(days=30))
    assert period is not None and period.end == datetime(9999, 12, 31, 12, 0, tzinfo=UTC)


def test_the_reader_imports_dateparser_only_when_used() -> None:
    code = (
        "import sys, gql_memory, gql_memory.memory.search.pipeline, gql_memory.api.schema, "
        "gql_memory.mcp_server.tools; assert 'dateparser' not in sys.modules"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


# --- search -------------------------------------------------------------------------------


async def store_camping(memory: Memory) -> tuple[int, int]:
    """Two turns: the one outside July 2023 matches the query better by its words."""
    outside, inside = await memory.raw.store_many(
        [
            RawDialogueInput(
                "s",
                "user",
                "The camping trip was great, we did so much on that camping trip",
                timestamp=at(2023, 5, 8, 13),
            ),
            RawDialogueInput("s", "user", "We went camping", timestamp=at(2023, 7, 2, 10)),
        ]
    )
    return outside.id, inside.id


QUESTION = "What did we do on the camping trip in July 2023?"


async def test_a_turn_inside_the_period_ranks_above_one_outside(memory: Memory) -> None:
    outside, inside = await store_camping(memory)
    plain = await memory.search(QUESTION, layers=["RAW"])
    assert [h.id for h in plain] == [outside, inside]
    assert all(h.interpreted_period is None and h.time_score is None for h in plain)

    hits = await memory.search(
        QUESTION, layers=["RAW"], interpret_time=True, reference_time=at(2023, 10, 1)
    )
    assert [h.id for h in hits] == [inside, outside]
    first, second = hits
    july = first.interpreted_period
    assert july is not None and second.interpreted_period == july
    assert "July 2023" in july.expression and july.granularity == "month"
    assert (july.start, july.end, july.until) == (at(2023, 7, 1), at(2023, 8, 1), at(2023, 8, 8))
    assert (first.period_rank, first.rank_without_period) == (1, 2)
    assert (second.period_rank, second.rank_without_period) == (None, 1)
    k = memory.settings.rrf_k
    assert first.time_score == pytest.approx(1 / (k + 1) + 1 / (k + 2))
    assert second.time_score == pytest.approx(1 / (k + 1))
    # the other numbers are those of the search without the period
    assert first.final_score == plain[1].final_score
    reason = explain_hit(1, first)
    assert 'July 2023" = 2023-07-01 to 2023-07-31, and 7 days after' in reason
    assert "period rank 1, rank without the period 2" in reason


async def test_a_query_without_a_time_expression_is_ranked_exactly_as_without(
    memory: Memory,
) -> None:
    await store_camping(memory)
    for query in ("What did we do on the camping trip?", "What may the camping trip be?"):
        without = await memory.search(query, layers=["RAW"])
        with_time = await memory.search(
            query, layers=["RAW"], interpret_time=True, reference_time=REFERENCE
        )
        assert with_time == without  # same hits, same order, every number alike


async def test_the_setting_turns_interpretation_on_and_the_call_off(memory: Memory) -> None:
    outside, inside = await store_camping(memory)
    store = Memory(memory.db, memory.settings.with_overrides(search_interpret_time=True))
    # default reference: now, so July 2023 is past
    assert [h.id for h in await store.search(QUESTION, layers=["RAW"])] == [inside, outside]
    off = await store.search(QUESTION, layers=["RAW"], interpret_time=False)
    assert [h.id for h in off] == [outside, inside]


async def test_without_interpret_time_the_query_is_never_read(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store_camping(memory)

    def unexpected(*args: object) -> None:
        raise AssertionError("the query was read")

    # the reading happens in a reader process, which the search asks for first
    monkeypatch.setattr(time_expressions, "_readers", unexpected)
    monkeypatch.setattr(time_expressions, "read_period", unexpected)
    await memory.search(QUESTION, layers=["RAW"])
    await memory.search(QUESTION, layers=["RAW"], interpret_time=False)
    await memory.context(QUESTION)


async def test_explicit_since_and_until_leave_the_query_uninterpreted(memory: Memory) -> None:
    outside, _ = await store_camping(memory)
    hits = await memory.search(
        QUESTION,
        layers=["RAW"],
        interpret_time=True,
        since=at(2023, 5, 1),
        until=at(2023, 5, 31),
    )
    assert [h.id for h in hits] == [outside] and hits[0].interpreted_period is None


async def test_as_of_is_the_default_reference_time(memory: Memory) -> None:
    await store_camping(memory)
    [hit, *_] = await memory.search(
        "What did we do on the camping trip last week?",
        layers=["RAW"],
        interpret_time=True,
        as_of=at(2023, 7, 12),
    )
    assert hit.interpreted_period is not None
    assert hit.interpreted_period.start == at(2023, 7, 3)  # the week before 12 July: 3-9 July


async def test_as_of_as_the_reference_keeps_its_timezone(memory: Memory) -> None:
    """01:00 on 12 July in Tokyo is still 11 July in UTC: "yesterday" is Tokyo's 11 July."""
    await store_camping(memory)
    tokyo = timezone(timedelta(hours=9))
    as_of = datetime(2023, 7, 12, 1, 0, tzinfo=tokyo)
    question = "What did we do on the camping trip yesterday?"
    [hit, *_] = await memory.search(question, layers=["RAW"], interpret_time=True, as_of=as_of)
    assert hit.interpreted_period is not None
    assert hit.interpreted_period.start == datetime(2023, 7, 11, tzinfo=tokyo)
    context = await memory.context(question, include=["SEARCH"], interpret_time=True, as_of=as_of)
    [section] = context.sections
    assert "2023-07-11" in section.items[0].reason


async def test_a_context_as_of_the_first_day_is_not_refused_for_its_reference(
    memory: Memory,
) -> None:
    """asOf stands in for referenceTime without referenceTime's own bounds."""
    await store_camping(memory)
    early = datetime(1, 1, 1, 12, tzinfo=UTC)
    context = await memory.context("What happened yesterday?", interpret_time=True, as_of=early)
    assert context.query == "What happened yesterday?"


async def test_time_never_brings_in_a_hit_the_plain_search_would_not_consider(
    memory: Memory,
) -> None:
    """Time re-ranks the plain search's best TIME_RANKING_DEPTH hits: "a trip", the only turn
    of July 2023, ranks below them on its words and stays out, however well it fits the
    period."""
    await memory.raw.store_many(
        [
            RawDialogueInput(
                "s", "user", f"camping trip {i}: camping trip", timestamp=at(2023, 5, 8)
            )
            for i in range(25)
        ]
        + [RawDialogueInput("s", "user", "a trip", timestamp=at(2023, 7, 2, 10))]
    )
    plain = await memory.search(QUESTION, top_k=30, layers=["RAW"])
    assert [h.content for h in plain].index("user: a trip") >= TIME_RANKING_DEPTH
    hits = await memory.search(
        QUESTION, top_k=10, layers=["RAW"], interpret_time=True, reference_time=at(2023, 10, 1)
    )
    assert len(hits) == 10 and "user: a trip" not in [h.content for h in hits]
    assert all(h.rank_without_period is not None for h in hits)
    assert [h.id for h in hits] == [h.id for h in plain[:10]]  # nothing of May is in July


DISCUSSED = [  # (day of November 2026, what was said); read on Saturday the 28th
    (9, "We discussed the garden fence and the paint for it"),
    (17, "We discussed the budget for the garden"),
    (19, "We discussed which roses to plant in the garden"),
    (14, "I booked a dentist appointment"),
    (26, "We discussed the garden again, after the rain"),
    (28, "The printer is out of toner"),
    (30, "We discussed a garden party we plan"),  # after the reference: not in the tail
]


async def test_last_week_ranks_its_days_first_then_the_tail_up_to_the_reference(
    memory: Memory,
) -> None:
    """'Last week', read on Saturday 28 November 2026, is Monday 16 to Sunday 22 November;
    its tail runs to the reference time, not 7 days past the 22nd. Among the hits, those of
    the 17th and 19th come first, then those of the tail (26th, 28th), then the rest, each
    group in the order of the search without the period."""
    stored = await memory.raw.store_many(
        [
            RawDialogueInput("s", "user", text, timestamp=at(2026, 11, day, 12))
            for day, text in DISCUSSED
        ]
    )
    day_of = {turn.id: day for turn, (day, _) in zip(stored, DISCUSSED, strict=True)}
    reference = at(2026, 11, 28, 18)
    question = "What did we discuss last week?"
    plain = await memory.search(question, layers=["RAW"])
    hits = await memory.search(
        question, layers=["RAW"], interpret_time=True, reference_time=reference
    )
    period = hits[0].interpreted_period
    assert period is not None
    assert (period.start, period.end, period.until) == (
        at(2026, 11, 16),
        at(2026, 11, 23),
        reference,
    )
    rank = {h.id: r for r, h in enumerate(plain)}
    days = [day_of[h.id] for h in hits]
    assert sorted(days[:2]) == [17, 19] and sorted(days[2:4]) == [26, 28]
    assert set(days[4:]) == {9, 14, 30}
    for group in (hits[:2], hits[2:4], hits[4:]):
        assert [rank[h.id] for h in group] == sorted(rank[h.id] for h in group)
    assert [h.period_rank for h in hits] == [1, 2, 3, 4, None, None, None]


async def test_context_reads_time_and_says_so(memory: Memory) -> None:
    await store_camping(memory)
    context = await memory.context(
        QUESTION, include=["SEARCH"], interpret_time=True, reference_time=at(2023, 10, 1)
    )
    [section] = context.sections
    assert section.items[0].content.endswith("We went camping")
    assert 'July 2023" = 2023-07-01 to 2023-07-31' in section.items[0].reason


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"reference_time": datetime(2023, 10, 1)}, "referenceTime must carry a timezone"),
        ({"reference_time": "yesterday"}, "referenceTime must be a date-time"),
        ({"interpret_time": "yes"}, "interpretTime must be true or false"),
    ],
)
async def test_invalid_time_arguments_are_refused(
    memory: Memory, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.search(QUESTION, **arguments)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=message):
        await memory.context(QUESTION, **arguments)  # type: ignore[arg-type]


def test_the_window_after_the_period_is_a_setting() -> None:
    assert Settings().search_time_window_days == 7
    assert Settings().search_interpret_time is False
