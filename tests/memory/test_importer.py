"""Transcript import: JSONL, JSON and LoCoMo turns into raw dialogue, batched and idempotent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gql_memory import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.importer import ImportFormat, import_file, read_transcript
from tests.memory.locomo_sample import LOCOMO


def write(tmp_path: Path, name: str, content: Any) -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("\n".join(json.dumps(r) for r in content) + "\n")
    else:
        path.write_text(json.dumps(content))
    return path


async def all_turns(memory: Memory) -> list[Any]:
    return list(reversed((await memory.raw.list(first=1000)).items))  # oldest first


async def test_locomo_turns_follow_the_benchmark_protocol(memory: Memory, tmp_path: Path) -> None:
    path = write(tmp_path, "locomo.json", LOCOMO)
    summary = await import_file(memory.raw, path)
    assert summary.format is ImportFormat.LOCOMO
    assert (summary.read, summary.stored, summary.skipped, summary.sessions) == (4, 4, 0, 3)
    turns = await all_turns(memory)
    assert [t.content for t in turns[:3]] == [
        "Caroline: Hey Mel! How are you?",
        "Melanie: Great, look at this! [shares a photo: a photo of a dog on a beach]",
        "Caroline: I went to a support group.",
    ]
    first, second = turns[0], turns[1]
    assert first.session_id == "conv-1-session_1" and first.speaker == "Caroline"
    assert first.timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert second.timestamp == datetime(2023, 5, 8, 13, 56, 1, tzinfo=UTC)  # order is kept
    assert first.metadata == {
        "source": "locomo",
        "sample_id": "conv-1",
        "dia_id": "D1:1",
        "session": 1,
        "session_date_time": "1:56 pm on 8 May, 2023",
        "import_key": "locomo:conv-1:D1:1",
    }
    assert turns[2].session_id == "conv-1-session_2"
    assert turns[3].session_id == "conv-2-session_1"


async def test_reimporting_never_duplicates(memory: Memory, tmp_path: Path) -> None:
    path = write(tmp_path, "locomo.json", LOCOMO)
    await import_file(memory.raw, path, batch_size=2)
    again = await import_file(memory.raw, path, batch_size=2)
    assert (again.read, again.stored, again.skipped, again.batches) == (4, 0, 4, 0)
    assert len(await all_turns(memory)) == 4


async def test_an_interrupted_import_resumes_where_it_stopped(
    memory: Memory, tmp_path: Path
) -> None:
    records = [{"sessionId": "s", "speaker": "user", "content": f"turn {i}"} for i in range(10)]
    await import_file(memory.raw, write(tmp_path, "part.jsonl", records[:4]))
    summary = await import_file(memory.raw, write(tmp_path, "all.jsonl", records), batch_size=3)
    assert (summary.stored, summary.skipped) == (6, 4)
    assert [t.content for t in await all_turns(memory)] == [f"turn {i}" for i in range(10)]


async def test_identical_turns_in_a_session_stay_two_turns(memory: Memory, tmp_path: Path) -> None:
    records = [{"sessionId": "s", "speaker": "user", "content": "ok"}] * 2
    path = write(tmp_path, "twice.jsonl", records)
    assert (await import_file(memory.raw, path)).stored == 2
    assert (await import_file(memory.raw, path)).stored == 0


async def test_generic_json_with_metadata_timestamps_and_prefix(
    memory: Memory, tmp_path: Path
) -> None:
    records = [
        {
            "sessionId": "chat-1",
            "speaker": "user",
            "content": "Book a table",
            "metadata": {"channel": "web"},
            "timestamp": "2024-05-01T10:00:00Z",
        },
        {"session_id": "chat-1", "speaker": "assistant", "content": "Done", "id": "m-2"},
    ]
    path = write(tmp_path, "chat.json", records)
    summary = await import_file(memory.raw, path, session_prefix="import-")
    assert summary.format is ImportFormat.JSON and summary.stored == 2
    first, second = await all_turns(memory)
    assert first.session_id == second.session_id == "import-chat-1"
    assert first.timestamp == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert first.metadata is not None and first.metadata["channel"] == "web"
    assert second.metadata is not None and len(second.metadata["import_key"]) == 32


async def test_turns_go_to_the_store_namespace(memory: Memory, tmp_path: Path) -> None:
    other = Memory(memory.db, memory.settings, "tenant-b", memory.embedder)
    path = write(tmp_path, "locomo.json", LOCOMO)
    await import_file(other.raw, path)
    assert await all_turns(memory) == []
    assert len(await all_turns(other)) == 4
    assert (await import_file(memory.raw, path)).stored == 4  # keys are per namespace


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", [{"speaker": "u", "content": "x"}], "line 1: sessionId must not be empty"),
        ("bad.json", [{"sessionId": "s", "speaker": "u", "content": ""}], "line 1: content"),
        ("bad.json", {"sessionId": "s"}, "must be a list of turns"),
        (
            "bad.json",
            [{"sessionId": "s", "speaker": "u", "content": "x", "timestamp": "yesterday"}],
            "timestamp 'yesterday' is not ISO-8601",
        ),
        (
            "bad.json",
            [{"conversation": {"session_1_date_time": "soon", "session_1": []}}],
            "session date 'soon'",
        ),
        ("bad.json", [{"sessionId": "s", "speaker": "x" * 51, "content": "c"}], "speaker"),
    ],
)
def test_invalid_files_are_refused_before_anything_is_stored(
    tmp_path: Path, name: str, content: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        read_transcript(write(tmp_path, name, content))


def test_the_format_can_be_forced(tmp_path: Path) -> None:
    path = tmp_path / "turns.txt"
    path.write_text('{"sessionId": "s", "speaker": "u", "content": "hi"}\n')
    fmt, turns = read_transcript(path, "jsonl")
    assert fmt is ImportFormat.JSONL and turns[0].content == "hi"
    with pytest.raises(ValidationError, match="format must be"):
        read_transcript(path, "xml")


def test_a_pretty_printed_file_names_the_line_of_its_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "turns.json"
    path.write_text(
        '[\n {"sessionId": "s", "speaker": "u", "content": "a"},\n'
        ' {"sessionId": "s" "speaker": "u"}\n]\n'
    )
    with pytest.raises(ValidationError, match=r"^line 3: not valid JSON \(Expecting ','"):
        read_transcript(path)
