"""A small fuzz corpus of malformed transcripts (tests/data/transcripts): each file is either
refused as a whole, naming its line, or imported exactly; never a traceback, never a part."""

from __future__ import annotations

from pathlib import Path

import pytest

from gql_memory import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.importer import import_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "transcripts"
# file -> the start of the error (line and what), or the number of turns imported
EXPECTED: dict[str, str | int] = {
    "invalid_utf8.jsonl": "line 2: not UTF-8",
    "bom.jsonl": 2,
    "bom.json": 2,
    "truncated_last_line.jsonl": "line 3: not valid JSON",
    "deep_nesting.jsonl": "line 2: JSON nested too deeply",
    "deep_nesting.json": "line 1: JSON nested too deeply",
    "huge_timestamp.jsonl": "line 2: timestamp 1e+20 is out of range",
    "huge_integer.jsonl": "line 2: timestamp 999",
    "endless_integer.jsonl": "line 2: not valid JSON",
    "nan_timestamp.jsonl": "line 2: not valid JSON (NaN is not a JSON number)",
    "infinity_timestamp.json": "line 1: not valid JSON (-Infinity is not a JSON number)",
    "wrong_types.jsonl": "line 3: speaker must be a string",
    "wrong_types.json": "line 3: a turn must be a JSON object",
    "not_a_list.json": "line 1: a JSON transcript must be a list of turns",
    "empty.jsonl": 0,
    "blank_lines.jsonl": 0,
    "empty.json": "line 1: not valid JSON",
    "repeated_id.jsonl": "line 3: id 7 of session 's1' repeats line 1",
    "session_id_too_long.jsonl": "line 2: sessionId must be at most 255 characters",
}


def test_the_corpus_is_covered() -> None:
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_each_file_is_refused_at_its_line_or_imported_exactly(
    memory: Memory, name: str
) -> None:
    expected = EXPECTED[name]
    if isinstance(expected, int):
        summary = await import_file(memory.raw, CORPUS / name)
        assert summary.stored == expected
        assert (await memory.stats()).raw_dialogue == expected
        return
    with pytest.raises(ValidationError) as refused:
        await import_file(memory.raw, CORPUS / name)
    assert str(refused.value).startswith(expected), str(refused.value)
    assert (await memory.stats()).raw_dialogue == 0  # nothing of the file was written
