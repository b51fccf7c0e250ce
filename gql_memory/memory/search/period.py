"""Search step 2, the period a query names (``interpretTime``): "last week", "two months ago",
"in May 2023", "on 7 May 2023" read into a period that ranks the memories in it higher.

Reading. dateparser finds the expressions (its n-gram search, English) and resolves them
against a reference time. A question is full of words dateparser would take for a date
("may", "march", "second", "now", "sun", "we" for Wednesday): only an expression that names a
year, a month with its day, or a relative phrase ("ago", "yesterday", "last week") is
trusted (a year is one from 1900 to 2199: "room 1205" names none). Each names a day, a week
(Monday first), a month or a year, in the reference time's own timezone; several give their
span; one that begins after the reference time is dropped. A date after "since" and a span
("the past month", "the last two weeks") run to the end of the reference's day.
Turns about an event often come after it ("last week I ..."), so the period has a tail: up to
``search_time_window_days`` past its end, never past the reference time.

What it costs is bounded, whoever asks. dateparser's search grows with the text, fastest with
numbers, so it is handed only the spans that can hold a time: each cue (a number, "ago",
"last" ...) with a few words either side, each distinct span once. A query with more numbers
than TIME_READ_MAX_NUMBERS is not handed over at all. The rest is read in a worker process
(memory/offload.py ``WorkerProcesses``), stopped after GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS
of CPU time; when every reader is busy, the query is not queued. Whenever a query asked to be
read was not, it is searched without a period and the reason is noted (``periods_not_read``).

How the period ranks the hits is step 7, memory/search/period_ranking.py.

Nothing here runs, and dateparser is not even imported, unless a search asks for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta

from gql_memory.config import (
    TIME_READ_KILL_AFTER_CEILINGS,
    TIME_READ_KILL_AFTER_MIN_S,
    TIME_READ_MAX_CHARS,
    TIME_READ_MAX_NUMBERS,
    TIME_READ_WAIT_MS,
    TIME_READER_NICE,
    TIME_READERS,
    Settings,
)
from gql_memory.memory.offload import (
    CeilingReached,
    WorkerLost,
    WorkerProcesses,
    WorkersBusy,
)
from gql_memory.memory.search.types import QueryPeriod

GRANULARITIES = ("day", "week", "month", "year")
_MONTH = (
    r"jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t|tember)?"
    r"|oct(ober)?|nov(ember)?|dec(ember)?"
)
# a year memories can be about ("room 1205" and "555 1234" name none)
_YEAR = re.compile(r"\b(19|20|21)\d\d\b")
_A_MONTH = re.compile(rf"\b({_MONTH})\b", re.I)
_PUNCTUATION = " \t\n,.;:!?()[]{}\"'"
_NUMERIC_DATE = re.compile(r"\b\d{1,4}[-/.]\d{1,2}([-/.]\d{1,4})?\b")
_MONTH_AND_DAY = re.compile(
    rf"\b({_MONTH})\.?\s+\d{{1,2}}(st|nd|rd|th)?\b|\b\d{{1,2}}(st|nd|rd|th)?\s+(of\s+)?({_MONTH})\b",
    re.I,
)
_RELATIVE = re.compile(
    r"\b(ago|yesterday|today)\b|\b(last|past|previous|this)\s+(day|week|weekend|month|year"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b",
    re.I,
)
# "the past month", "the last two weeks": a span up to the reference time (dateparser reads
# only "a month ago", "two weeks ago", which it is handed)
_SPAN = re.compile(
    r"\b(?:the\s+)?(?:(?:last|past)\s+(\d{1,3}|an?|one|two|three|four|five|six|seven|eight"
    r"|nine|ten|eleven|twelve)\s+(day|week|month|year)s?|past\s+(day|week|month|year))\b",
    re.I,
)
_NUMBERS = {
    word: n
    for n, word in enumerate(
        "one two three four five six seven eight nine ten eleven twelve".split(), 1
    )
} | {"an": 1, "a": 1}
_DAYS = {"day": 1, "week": 7, "month": 31, "year": 366}
# A query without one of these words has no expression the reader would trust: it is not
# handed to dateparser at all. Within one, dateparser reads only the words around them.
_CUES = re.compile(r"\d|\b(ago|yesterday|today|last|past|previous|this)\b", re.I)
_WORD = re.compile(r"\S+")
_NUMBER = re.compile(r"\S*\d\S*")
# words either side of a cue handed to dateparser with it ("the week before 16 November
# 2023", "two months ago"), and the most words of one span (longer runs are cut)
SPAN_CONTEXT_WORDS = 3
SPAN_MAX_WORDS = 16

_NOT_READ: ContextVar[list[str] | None] = ContextVar("periods_not_read", default=None)


@contextmanager
def periods_not_read() -> Iterator[list[str]]:
    """Why the searches awaited in this block (and the tasks they start) read no period from
    a query that asked for one: the notes gathered in the list yielded, for the caller to
    show beside the hits (the API's periodNotRead, a context's notes)."""
    notes: list[str] = []
    token = _NOT_READ.set(notes)
    try:
        yield notes
    finally:
        _NOT_READ.reset(token)


def _not_read(reason: str) -> None:
    notes = _NOT_READ.get()
    if notes is not None:
        notes.append(f"time not read: {reason}; searched without a period")


@functools.cache
def _readers() -> WorkerProcesses:
    return WorkerProcesses(
        TIME_READERS,
        waiting=TIME_READERS,
        name="gql-memory-time-reader",
        preload=["dateparser.search", __name__],
        initializer=warm_up,
        nice=TIME_READER_NICE,
    )


def warm_up() -> None:
    """Load dateparser's English data (a fifth of a second, once per reader process) before
    the first reading is timed."""
    _search_dates("on 7 May 2023, two days ago", datetime(2023, 10, 20, tzinfo=UTC))


async def query_period(
    query: str, reference_time: datetime | None, settings: Settings
) -> QueryPeriod | None:
    """The period ``query`` names, read against ``reference_time`` (validated by the caller;
    default now, in the server's timezone); None when it names none, or when it could not be
    read within its bounds (the reason is noted: ``periods_not_read``)."""
    text = _head(query)
    if not _CUES.search(text):  # no expression the reader would trust: dateparser is spared
        return None
    numbers = len(_NUMBER.findall(text))
    if numbers > TIME_READ_MAX_NUMBERS:
        _not_read(f"the query holds {numbers} numbers, more than {TIME_READ_MAX_NUMBERS}")
        return None
    reference = reference_time or datetime.now().astimezone()
    window = timedelta(days=settings.search_time_window_days)
    ceiling = settings.search_time_read_ceiling_ms / 1000
    try:
        return await _readers().run(
            read_period,
            (text, reference, window),
            cpu_seconds=ceiling,
            wait_seconds=TIME_READ_WAIT_MS / 1000,
            kill_after_s=max(ceiling * TIME_READ_KILL_AFTER_CEILINGS, TIME_READ_KILL_AFTER_MIN_S),
        )
    except CeilingReached:
        _not_read(
            f"reading it took more than {settings.search_time_read_ceiling_ms} ms "
            "(GQL_MEMORY_SEARCH_TIME_READ_CEILING_MS)"
        )
    except WorkersBusy:
        _not_read("every time reader was busy")
    except WorkerLost:
        _not_read("the time reader did not answer")
    return None


def read_period(
    text: str, reference: datetime, window: timedelta = timedelta(0)
) -> QueryPeriod | None:
    """The period the time expressions of ``text`` name, read against ``reference`` (aware),
    with ``window`` after its end; None when it names none that can be trusted, or only
    periods that begin after ``reference`` (nothing can have happened in them yet).

    A date the text names "since" (since 1 May 2023) and a span ("the past month", "the last
    two weeks") run to the end of the reference's day. A date dateparser read to the day from
    a month or a year alone ("at 5pm in May 2023", "Q3 2023") is that month or year."""
    zone = reference.tzinfo
    now = reference.replace(tzinfo=None)
    try:
        today_ends = _period(now, "day")[1]
    except OverflowError:  # 31 December 9999: its day ends past what datetime holds
        today_ends = now
    found = [
        (e.strip(_PUNCTUATION), m, g)
        for span in date_spans(text)
        for e, m, g in _search_dates(span, reference)
    ]
    periods: dict[tuple[str, datetime, datetime], tuple[str, str]] = {}
    for expression, moment, granularity in [*found, *_spans(text, reference)]:
        if not _trusted(expression):
            continue
        if granularity == "day" and not _names_a_day(expression):
            granularity = "month" if _A_MONTH.search(expression) else "year"
        since = re.search(rf"\bsince\s+[(\[\"']?{re.escape(expression)}(?!\w)", text, re.I)
        try:
            start, end = _period(moment, granularity)
            if _SPAN.fullmatch(expression):
                end = today_ends
            elif since:
                expression, end = since.group(0), max(end, today_ends)
            start, end = start.replace(tzinfo=zone), end.replace(tzinfo=zone)
            start.astimezone(UTC), end.astimezone(UTC)  # what PostgreSQL will be given
        except (OverflowError, ValueError):  # a period past year 1 or 9999
            continue
        if start <= reference:
            periods.setdefault((expression.lower(), start, end), (expression, granularity))
    if not periods:
        return None
    start = min(key[1] for key in periods)
    end = max(key[2] for key in periods)
    coarsest = max((g for _, g in periods.values()), key=GRANULARITIES.index)
    expressions = dict.fromkeys(expression for expression, _ in periods.values())  # once each
    try:
        until = end + window
        until.astimezone(UTC)
    except OverflowError:
        until = end
    until = max(end, min(until, reference))  # the tail never runs past the reference time
    return QueryPeriod(" … ".join(expressions), coarsest, start, end, until)


def date_spans(text: str) -> list[str]:
    """The parts of ``text`` dateparser is handed: each cue with up to SPAN_CONTEXT_WORDS
    words either side, cues close together in one span (cut every SPAN_MAX_WORDS words),
    each distinct span once ("2023 2023 ... 2023" is read as one)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    runs: list[list[int]] = []  # [first, last] word of each span, in order
    for i, (start, end) in enumerate(words):
        if not _CUES.search(text[start:end]):
            continue
        first, last = max(0, i - SPAN_CONTEXT_WORDS), min(len(words), i + SPAN_CONTEXT_WORDS + 1)
        if runs and first <= runs[-1][1]:
            runs[-1][1] = last
        else:
            runs.append([first, last])
    spans = [
        text[words[at][0] : words[min(at + SPAN_MAX_WORDS, last) - 1][1]]
        for first, last in runs
        for at in range(first, last, SPAN_MAX_WORDS)
    ]
    return list(dict.fromkeys(spans))


def _spans(text: str, reference: datetime) -> list[tuple[str, datetime, str]]:
    """(expression, start, "day") of each span ("the past month") in ``text``: it starts that
    many days, weeks, months (31 days) or years (366 days) before the reference's day. A span
    of something else ("the last two days of May 2023") is none."""
    spans = []
    today = reference.replace(tzinfo=None)
    for match in _SPAN.finditer(text):
        if re.match(r"\s+(of|in)\b", text[match.end() :], re.I):
            continue
        count, unit = (match.group(1) or "1").lower(), (match.group(2) or match.group(3)).lower()
        number = int(count) if count.isdigit() else _NUMBERS[count]
        try:
            start = today - timedelta(days=number * _DAYS[unit])
        except OverflowError:
            continue
        spans.append((match.group(0), start, "day"))
    return spans


def _names_a_day(expression: str) -> bool:
    return bool(
        _MONTH_AND_DAY.search(expression)
        or _RELATIVE.search(expression)
        or _NUMERIC_DATE.search(expression)
        or _SPAN.search(expression)
    )


def _head(query: str) -> str:
    """The part of a query the reader reads: dateparser's search grows with the text, so at
    most TIME_READ_MAX_CHARS characters, cut at a space."""
    if len(query) <= TIME_READ_MAX_CHARS:
        return query
    head = query[:TIME_READ_MAX_CHARS]
    return head.rsplit(None, 1)[0] if " " in head else head


def _trusted(expression: str) -> bool:
    """An expression that names a year, a month with its day, or a relative phrase; not a
    lone month ("may"), weekday ("sun", "we"), ordinal ("18th") or "now"."""
    return bool(
        _YEAR.search(expression)
        or _MONTH_AND_DAY.search(expression)
        or _RELATIVE.search(expression)
        or _SPAN.fullmatch(expression)
    )


def _period(moment: datetime, granularity: str) -> tuple[datetime, datetime]:
    """[start, end) of the day, week (Monday first), month or year around ``moment``
    (naive, in the reference's wall time)."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    if granularity == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if granularity == "month":
        start = day.replace(day=1)
        following = (start + timedelta(days=31)).replace(day=1)
        return start, following
    if granularity == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    return day, day + timedelta(days=1)  # a day (or a time of day: its day)


def _search_dates(text: str, reference: datetime) -> list[tuple[str, datetime, str]]:
    """(expression, moment, granularity) of every date dateparser finds in ``text``, the
    moment naive in the wall time of ``reference``."""
    from dateparser.search import search_dates  # a fifth of a second to import: when used

    found = search_dates(
        text,
        languages=["en"],
        settings={
            "RELATIVE_BASE": reference.replace(tzinfo=None),
            "PREFER_DATES_FROM": "past",  # "in May" is the last May, not the next
            "PREFER_DAY_OF_MONTH": "first",  # ... and in May, this one
            "TIMEZONE": "UTC",  # read and returned as written: no conversion
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
        strategy="ngram",  # tries the longest spans first: "the week before 16 November 2023"
        add_period=True,
    )
    results = []
    for expression, moment, granularity in found or ():
        if moment.tzinfo is not None:  # the text named a zone: its instant, read locally
            moment = moment.astimezone(reference.tzinfo).replace(tzinfo=None)
        results.append((expression, moment, granularity if granularity in GRANULARITIES else "day"))
    return results
