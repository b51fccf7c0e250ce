"""Raw dialogue: the cases of seed 004 and the l0-raw reading of seed 003."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from gql_memory import RawDialogueInput, ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.embeddings.local import E5Embedder
from gql_memory.memory import Memory
from gql_memory.memory.raw import parse_date_range
from gql_memory.memory.vectors import vector_literal
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI


async def test_store_returns_id_and_utc_timestamp(memory: Memory) -> None:
    turn = await memory.raw.store("s1", "user", "Hello")
    assert turn.id > 0 and turn.session_id == "s1"
    assert turn.timestamp.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - turn.timestamp) < timedelta(minutes=1)


async def test_metadata_json_round_trips(memory: Memory) -> None:
    metadata = {"tags": ["a", "b"], "nested": {"n": 1, "f": 1.5, "ok": True, "none": None}}
    stored = await memory.raw.store("s1", "assistant", "Hi", metadata)
    assert (await memory.raw.get(stored.id)).metadata == metadata  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("session_id", "speaker", "content", "message"),
    [
        ("", "user", "x", "sessionId must not be empty"),
        ("s", "", "x", "speaker must not be empty"),
        ("s", "user", "", "content must not be empty"),
        ("s", "x" * 51, "x", "speaker must be at most 50 characters"),
        ("s", "user", "nul\x00byte", "content must not contain NUL characters"),
    ],
)
async def test_missing_or_invalid_fields_are_rejected(
    memory: Memory, session_id: str, speaker: str, content: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.raw.store(session_id, speaker, content)


async def test_metadata_must_be_an_object(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="metadata must be a JSON object"):
        await memory.raw.store("s", "user", "x", ["not", "an", "object"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "content",
    [
        "Robert'); DROP TABLE raw_dialogue;--",
        "emoji 🧠 ümlaut ß 中文 \\ backslash \" quote ' apostrophe",
        "<script>alert(1)</script> %s %(x)s :param $1",
    ],
)
async def test_special_characters_are_stored_verbatim(memory: Memory, content: str) -> None:
    stored = await memory.raw.store("s", "user", content)
    assert (await memory.raw.get(stored.id)).content == content  # type: ignore[union-attr]
    async with memory.db.read() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM raw_dialogue")) == 1


async def test_one_megabyte_content_is_stored(memory: Memory) -> None:
    content = "lorem ipsum dolor sit amet " * 40_000  # ~1 MB
    stored = await memory.raw.store("big", "user", content)
    fetched = await memory.raw.get(stored.id)
    assert fetched is not None and fetched.content == content


async def test_turns_are_grouped_by_session(memory: Memory) -> None:
    await memory.raw.store_many(
        [RawDialogueInput(f"s{i % 2}", "user", f"turn {i}") for i in range(6)]
    )
    s0 = await memory.raw.list(session_id="s0")
    assert [t.content for t in s0.items] == ["turn 4", "turn 2", "turn 0"]
    assert {t.session_id for t in s0.items} == {"s0"}


async def test_batch_is_all_or_nothing(memory: Memory) -> None:
    turns = [RawDialogueInput("s", "user", "ok"), RawDialogueInput("s", "user", "")]
    with pytest.raises(ValidationError, match="turn 1: content must not be empty"):
        await memory.raw.store_many(turns)
    assert (await memory.raw.list()).items == []


async def test_filters_by_time_range_and_speaker(memory: Memory) -> None:
    day = datetime(2024, 1, 15, 12, tzinfo=UTC)
    await memory.raw.store_many(
        [
            RawDialogueInput("s", "user", "before", timestamp=day - timedelta(days=30)),
            RawDialogueInput("s", "user", "during", timestamp=day),
            RawDialogueInput("s", "assistant", "reply", timestamp=day + timedelta(minutes=1)),
            RawDialogueInput("s", "user", "after", timestamp=day + timedelta(days=30)),
        ]
    )
    january = await memory.raw.list(date_range="2024-01-15:2024-01-15")
    assert [t.content for t in january.items] == ["reply", "during"]
    ranged = await memory.raw.list(from_=day, to=day + timedelta(days=1), speaker="user")
    assert [t.content for t in ranged.items] == ["during"]
    assert (await memory.raw.list(speaker="nobody")).items == []


@pytest.mark.parametrize(
    "value", ["2024-01-01", "2024/01/01:2024/01/31", "2024-13-01:2024-12-31", "x:y", ""]
)
def test_malformed_date_ranges_are_bad_input(value: str) -> None:
    with pytest.raises(ValidationError, match="Invalid date_range format"):
        parse_date_range(value)


def test_reversed_date_range_is_bad_input() -> None:
    with pytest.raises(ValidationError, match="end must not be before its start"):
        parse_date_range("2024-02-01:2024-01-01")


async def test_date_range_and_from_to_are_exclusive(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="either dateRange or from/to"):
        await memory.raw.list(date_range="2024-01-01:2024-01-02", from_=datetime.now(UTC))


async def test_pages_are_newest_first_with_cursors(memory: Memory) -> None:
    await memory.raw.store_many([RawDialogueInput("s", "user", f"t{i}") for i in range(5)])
    first = await memory.raw.list(first=2)
    second = await memory.raw.list(first=2, after=first.end_cursor)
    third = await memory.raw.list(first=2, after=second.end_cursor)
    assert [t.content for p in (first, second, third) for t in p.items] == [
        "t4",
        "t3",
        "t2",
        "t1",
        "t0",
    ]
    assert first.has_next_page and second.has_next_page and not third.has_next_page


async def test_forget_session_erases_the_session_and_its_references(memory: Memory) -> None:
    gone = await memory.raw.store("gone", "user", "my secret plan")
    kept = await memory.raw.store("kept", "user", "public note")
    insight = await memory.insights.add("distilled", [gone.id, kept.id])
    node = await memory.graph.add_node("Turn", "t", raw_id=gone.id)
    await memory.working.add("x", session_id="gone")
    assert await memory.forget_session("gone") == 2
    assert await memory.raw.get(gone.id) is None
    assert (await memory.insights.get(insight.id)).source_ids == [kept.id]  # type: ignore[union-attr]
    assert (await memory.graph.get_node(node.id)).raw_id is None  # type: ignore[union-attr]
    assert (await memory.stats()).working_memory == 0


async def test_extreme_dates_and_cursors_are_bad_input_not_errors(memory: Memory) -> None:
    page = await memory.raw.list(date_range="9999-12-31:9999-12-31")
    assert page.items == []
    edge = datetime.fromisoformat("9999-12-31T23:59:59-14:00")
    with pytest.raises(ValidationError, match="timestamp is out of range"):
        await memory.raw.store("s", "user", "x", timestamp=edge)
    with pytest.raises(ValidationError, match="from is out of range"):
        await memory.raw.list(from_=datetime.fromisoformat("0001-01-01T00:00:00+14:00"))
    from gql_memory.memory.pagination import encode_cursor

    with pytest.raises(ValidationError, match="not a valid cursor"):
        await memory.raw.list(after=encode_cursor(datetime.now(UTC), 2**63))


async def test_every_stored_turn_is_logged_at_info_without_its_content(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="gql_memory"):
        turn = await memory.raw.store("logged-session", "user", "my secret plan")
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "raw_dialogue_stored"]
    assert record.levelno == logging.INFO and record.ids == [turn.id]
    assert f"ids {turn.id} (session logged-session)" in record.getMessage()
    assert "secret" not in record.getMessage()


class Probe:
    """An embedder that records what it was asked to embed (``inner`` does the work and
    counts the tokens)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.asymmetry = inner.asymmetry
        self.asked: list[str] = []

    async def embed(self, texts: list[str], *, role: TextRole) -> list[Vector]:
        self.asked += texts
        return await self.inner.embed(texts, role=role)

    async def aclose(self) -> None:
        pass


def sentences(count: int, seed: int) -> str:
    words = "harbour lantern meadow violin river stone window garden letter morning".split()
    return " ".join(
        f"The {words[(seed + i) % 10]} {words[(seed * 3 + i) % 10]} turned {i} times."
        for i in range(count)
    )


async def test_a_short_turn_after_a_long_one_is_embedded_alone_or_with_a_budgeted_context(
    db: Database, settings: Settings
) -> None:
    """By default (GQL_MEMORY_EMBED_RAW_CONTEXT_SHORT_ONLY) a turn after a long one is
    embedded alone; with context everywhere, after the end of the long one within the
    budget."""
    e5 = E5Embedder(settings.with_overrides(embedding_provider="local"))
    long = sentences(90, 1)  # ~3,200 characters
    short = "Ottilie keeps the brass compass in the linen drawer, next to the maps."
    assert len(long) > 3_000
    turns = [RawDialogueInput("s", "assistant", long), RawDialogueInput("s", "user", short)]

    probe = Probe(e5)
    await truncate_all(db)
    await Memory(db, settings, embedder=probe).raw.store_many(turns)
    assert probe.asked[-1] == f"user: {short}"

    probe = Probe(e5)
    await truncate_all(db)
    everywhere = settings.with_overrides(embed_raw_context_short_only=False)
    await Memory(db, everywhere, embedder=probe).raw.store_many(turns)
    document = probe.asked[-1]
    assert document.endswith(f"user: {short}")
    context = document.removesuffix(f"\nuser: {short}")
    budget = settings.embed_raw_context_tokens
    assert 0 < e5.count_tokens(context) <= budget
    assert long.endswith(context), "the end of the previous turn, the words closest to this one"
    assert e5.count_tokens(document) <= e5.window_tokens


async def test_a_turn_longer_than_the_window_is_embedded_in_overlapping_chunks(
    db: Database, settings: Settings, fake_openai: FakeOpenAI
) -> None:
    fake_openai.reset()
    memory = Memory(db, openai_settings(settings, fake_openai))
    await truncate_all(db)
    long = sentences(180, 2)  # ~6,300 characters
    assert len(long) > 6_000
    await memory.raw.store("s", "user", long)
    [request] = fake_openai.requests
    sent = request["body"]["input"]
    assert len(sent) >= 2
    for before, after in zip(sent, sent[1:], strict=False):
        assert " ".join(after.split()[:6]) in before, "each chunk repeats the end of the last"
    every = re.split(r"(?<=\.) ", f"user: {long}")
    assert all(any(sentence in chunk for chunk in sent) for sentence in every), "none dropped"


async def test_too_long_a_turn_is_stored_without_a_vector(memory: Memory) -> None:
    limited = Memory(memory.db, memory.settings.with_overrides(embedding_max_chars=1_000))
    stored = await limited.raw.store_many(
        [RawDialogueInput("s", "user", "word " * 400), RawDialogueInput("s", "user", "short")]
    )
    async with memory.db.read() as conn:
        found = await conn.execute(
            text("SELECT id, embedding IS NULL AS missing FROM raw_dialogue ORDER BY id")
        )
        assert [(r.id, r.missing) for r in found] == [(stored[0].id, True), (stored[1].id, False)]


async def test_a_fact_at_the_end_of_a_long_turn_finds_the_turn_by_vector(
    db: Database, settings: Settings
) -> None:
    """With the local e5 model: the end of a 6,000-character turn is in its vector (it was cut
    off at 4,000 characters before)."""
    e5 = E5Embedder(settings.with_overrides(embedding_provider="local"))
    memory = Memory(db, settings, embedder=e5)
    await truncate_all(db)
    facts = {
        "Ottilie keeps the brass compass in the linen drawer.": "Where is Ottilie's compass?",
        "Leopold parked the red canoe behind the boathouse.": "Where did Leopold leave the canoe?",
        "Zdenka planted three quince trees by the north wall.": "What trees did Zdenka plant?",
    }
    stored = await memory.raw.store_many(
        [
            RawDialogueInput(f"s{i}", "assistant", f"{sentences(180, i)} {fact}")
            for i, fact in enumerate(facts)
        ]
    )
    questions = await e5.embed(list(facts.values()), role=TextRole.QUERY)
    async with db.read() as conn:
        for turn, question in zip(stored, questions, strict=True):
            best = await conn.scalar(
                text(
                    "SELECT id FROM raw_dialogue ORDER BY embedding <=> CAST(:q AS vector) LIMIT 1"
                ),
                {"q": vector_literal(question)},
            )
            assert best == turn.id
