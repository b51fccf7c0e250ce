"""The extraction pipeline (SPEC §3.8) against a real PostgreSQL: tool output -> working memory."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from sqlalchemy import text

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.memory import Memory
from gql_memory.memory.extraction.redaction import redact
from gql_memory.memory.extraction.rules import DEFAULT_RULES, first_match, rules_for
from gql_memory.memory.extraction.summarizers import summarize
from tests.conftest import HANG_GUARD_S
from tests.memory.extraction.redaction_corpus import SECRETS, rand
from tests.scaling import growth


async def rows(memory: Memory, table: str) -> list[dict[str, Any]]:
    async with memory.db.read() as conn:
        result = await conn.execute(text(f"SELECT * FROM {table} ORDER BY id"))
        return [dict(r._mapping) for r in result]


def spec_file(size: int = 50_000) -> str:
    """A realistic Read of a 50 KB spec.md: a path header, then markdown lines."""
    lines = ["/repo/docs/spec.md", "# Product specification", ""]
    number = 0
    while sum(len(line) + 1 for line in lines) < size:
        number += 1
        lines.append(f"{number}. The service SHALL keep requirement {number} (see §{number % 9}).")
    return "\n".join(lines)[:size]


def grep_output(matches: int = 5000) -> str:
    """A 5,000-match `grep -rn error` over 50 files."""
    return "\n".join(
        f"src/pkg{i % 50}/module_{i % 50}.py:{i + 1}:    raise ValueError('error {i}')"
        for i in range(matches)
    )


def bash_output(lines: int = 3000) -> str:
    """A long `git commit` + test run on stdout."""
    head = ["$ git commit -am 'Fix eviction order'", "[main 3f78685] Fix eviction order"]
    body = [
        f"tests/test_{i}.py::test_case_{i} PASSED [{i * 100 // lines:3d}%]" for i in range(lines)
    ]
    return "\n".join(head + body + ["===== 3000 passed in 12.34s ====="])


async def test_read_of_a_50kb_spec_is_kept_as_first_and_last_500(memory: Memory) -> None:
    output = spec_file()
    result = await memory.extraction.ingest("Read", output, "s1", {"file_path": "docs/spec.md"})
    assert result.stored and result.rule_id == "read-spec" and result.summarizer == "firstLast500"
    assert result.working_memory is not None
    item = await memory.working.get(result.working_memory.added_id)
    assert item is not None and item.session_id == "s1" and item.importance == 0.9
    head, tail = item.content.split("\n… [", 1)
    assert output.startswith(head) and 450 <= len(head) <= 500
    assert output.endswith(tail.split("omitted] …\n", 1)[1])
    assert len(item.content) < 1100
    assert item.provenance == result.provenance
    assert item.provenance is not None
    assert {
        k: item.provenance[k]
        for k in ("rule_id", "summarizer", "redaction_applied", "original_length")
    } == {
        "rule_id": "read-spec",
        "summarizer": "firstLast500",
        "redaction_applied": False,
        "original_length": 50_000,
    }
    assert item.provenance["redaction_counts"] == {}
    assert item.provenance["metadata"] == {"file_path": "docs/spec.md"}


async def test_grep_with_5000_matches_becomes_a_count_and_its_files(memory: Memory) -> None:
    result = await memory.extraction.ingest("Grep", grep_output())
    assert result.stored and result.rule_id == "grep-error"
    assert result.working_memory is not None
    item = await memory.working.get(result.working_memory.added_id)
    assert item is not None and item.importance == 0.8
    lines = item.content.splitlines()
    assert lines[0] == "5000 matching lines in 50 files"
    assert lines[1].startswith("files: src/pkg0/module_0.py (100), ")
    assert lines[1].endswith("… and 30 more")
    assert lines[2] == "first matches:"
    assert lines[3] == "src/pkg0/module_0.py:1:    raise ValueError('error 0')"
    assert len(lines) == 3 + 5 and len(item.content) < 2000


async def test_long_bash_stdout_keeps_a_bounded_head_and_tail(memory: Memory) -> None:
    output = bash_output()
    result = await memory.extraction.ingest("Bash", output)
    assert result.stored and result.rule_id == "bash-git-commit"
    assert result.working_memory is not None
    item = await memory.working.get(result.working_memory.added_id)
    assert item is not None and item.importance == 0.7
    lines = item.content.splitlines()
    assert lines[0] == f"[stdout: 3003 lines, {len(output)} characters]"
    assert lines[1] == "$ git commit -am 'Fix eviction order'"
    assert "… [2963 lines omitted] …" in item.content
    assert lines[-1] == "===== 3000 passed in 12.34s ====="
    assert len(lines) == 1 + 20 + 1 + 20


async def test_a_short_output_is_kept_whole(memory: Memory) -> None:
    output = "$ git commit -m 'x'\n[main 1a2b3c4] x\n 1 file changed"
    result = await memory.extraction.ingest("Bash", output)
    assert result.working_memory is not None
    item = await memory.working.get(result.working_memory.added_id)
    assert item is not None and item.content == output


async def test_no_matching_rule_writes_nothing(memory: Memory) -> None:
    result = await memory.extraction.ingest("Bash", "$ ls\nREADME.md", metadata={"cwd": "/x"})
    assert not result.stored and result.working_memory is None and result.rule_id is None
    assert result.reason == "no extraction rule matched tool 'Bash'"
    assert await rows(memory, "working_memory") == []
    assert await rows(memory, "stale_memory") == []


async def test_first_matching_rule_decides_summarizer_and_importance(
    memory: Memory, settings: Settings
) -> None:
    rules = [
        {
            "id": "failures",
            "toolPattern": "^Bash",
            "contentPattern": "FAILED",
            "attention": 0.95,
            "summarizer": "stdoutSummary",
        },
        *DEFAULT_RULES,
        {"id": "catch-all", "toolPattern": ".", "attention": 0.2, "summarizer": "firstLast500"},
    ]
    custom = Memory(memory.db, settings.with_overrides(extraction_rules=rules))
    failed = await custom.extraction.ingest("Bash", "git commit ok\nFAILED test_x")
    committed = await custom.extraction.ingest("Bash", "git commit ok")
    other = await custom.extraction.ingest("WebFetch", "<html>hello</html>")
    assert [failed.rule_id, committed.rule_id, other.rule_id] == [
        "failures",
        "bash-git-commit",
        "catch-all",
    ]
    importances = [r["importance"] for r in await rows(memory, "working_memory")]
    assert importances == [0.95, 0.7, 0.2]


async def test_secrets_are_redacted_before_they_reach_the_database(memory: Memory) -> None:
    secrets = [s for s in SECRETS if s.family != "pem_private_key"][:20]
    output = "$ git commit -m 'add config'\n" + "\n".join(s.text for s in secrets)
    metadata = {"command": "cat .env", "env": {"TOKEN": "Bearer abcdefghijklmnop"}}
    result = await memory.extraction.ingest("Bash", output, "s", metadata)
    assert result.stored and result.redaction_applied
    assert result.provenance is not None
    counts = result.provenance["redaction_counts"]
    assert counts["bearer_token"] >= 7 and counts["aws_key"] >= 1
    (row,) = await rows(memory, "working_memory")
    stored = row["content"] + json.dumps(row["provenance"])
    assert "[REDACTED]" in row["content"]
    for sample in secrets:
        assert not [s for s in sample.secrets if s in stored], sample.family
    assert "abcdefghijklmnop" not in stored
    assert row["provenance"]["metadata"]["env"] == {"TOKEN": "[REDACTED]"}


async def test_a_summary_more_than_90_percent_redacted_is_not_stored(memory: Memory) -> None:
    key = next(s for s in SECRETS if s.family == "pem_private_key")
    result = await memory.extraction.ingest(
        "Read", key.text.replace("$ ", ""), metadata={"file_path": "docs/spec.md"}
    )
    assert not result.stored and result.rule_id == "read-spec" and result.redaction_applied
    assert "redacted (more than 90%): nothing was stored" in result.reason
    assert result.provenance is not None
    assert result.provenance["redaction_counts"] == {"pem_private_key": 1}
    assert result.provenance["redacted_fraction"] > 0.9
    assert await rows(memory, "working_memory") == []
    assert await rows(memory, "stale_memory") == []


async def test_nothing_secret_reaches_a_log_line(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    output = "Bash git commit\n" + "\n".join(s.text for s in SECRETS)
    key = next(s for s in SECRETS if s.family == "pem_private_key")
    caplog.set_level(logging.DEBUG)
    # SQLAlchemy keeps its loggers at WARNING; lift them so statements and parameters are
    # captured too: what reaches the database must be redacted as well.
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    stored = await memory.extraction.ingest("Bash", output, metadata={"k": SECRETS[0].text})
    too_secret = await memory.extraction.ingest("Read", key.text, metadata={"file_path": "spec.md"})
    unmatched = await memory.extraction.ingest("Tool " + SECRETS[0].text, output)
    assert stored.stored and not too_secret.stored and not unmatched.stored
    assert SECRETS[0].secrets[0] not in unmatched.reason
    logged = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "tool output" in logged
    # the add itself is one asyncpg statement SQLAlchemy does not log: check what it stored
    (item,) = await memory.working.list()
    written = logged + item.content + str(item.provenance)
    leaked = [s for sample in SECRETS for s in sample.secrets if s in written]
    assert leaked == []


async def test_catastrophic_rule_pattern_cannot_stall_ingestion(
    memory: Memory, settings: Settings
) -> None:
    rules = [
        {
            "id": "redos",
            "toolPattern": "^(x+x+)+y$|^Bash",
            "contentPattern": "(a+)+$",
            "attention": 0.5,
            "summarizer": "firstLast500",
        }
    ]
    custom = Memory(memory.db, settings.with_overrides(extraction_rules=rules))
    # 2^n ways to fail: a backtracking engine would never return (the guard makes it a failure)
    async with asyncio.timeout(HANG_GUARD_S):
        matched = await custom.extraction.ingest("Bash", "a" * 100_000)
        unmatched = await custom.extraction.ingest("x" * 200, "a" * 100_000 + "!")
    assert matched.stored and not unmatched.stored


@pytest.mark.parametrize(
    ("tool", "output", "message"),
    [
        ("", "x", "toolName must not be empty"),
        ("Read", "", "output must not be empty"),
        ("Read", "  \n ", "output must not be empty"),
        (None, "x", "toolName is required"),
        ("Read", None, "output is required"),
        ("R" * 256, "x", "toolName must be at most 255 characters"),
    ],
)
async def test_invalid_input_is_refused(
    memory: Memory, tool: Any, output: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await memory.extraction.ingest(tool, output)


async def test_binary_output_with_nul_bytes_is_stored_not_refused(memory: Memory) -> None:
    result = await memory.extraction.ingest("Read", "spec.md\n\x00\x01PNG\x00 spec.md")
    assert result.stored and result.working_memory is not None
    item = await memory.working.get(result.working_memory.added_id)
    assert item is not None and "\x00" not in item.content and "\ufffd" in item.content


async def test_raw_dialogue_gate_is_off_by_default_and_redacts_when_on(
    memory: Memory, settings: Settings
) -> None:
    said = "my key is AKIAABCDEFGHIJKLMNOP, mail me at jane@example.com"
    verbatim = await memory.raw.store("s", "user", said, {"from": "jane@example.com"})
    assert verbatim.content == said
    gated = Memory(memory.db, settings.with_overrides(redact_raw_dialogue=True))
    turn = await gated.raw.store("s", "user", said, {"from": "jane@example.com"})
    assert turn.content == "my key is [REDACTED], mail me at [REDACTED]"
    assert turn.metadata == {"from": "[REDACTED]"}
    stored = [r["content"] for r in await rows(memory, "raw_dialogue")]
    assert stored == [said, "my key is [REDACTED], mail me at [REDACTED]"]


async def test_a_rule_with_a_random_tail_matches_in_a_megabyte(memory: Memory) -> None:
    output = "Grep error\n" + rand("abc:/.\n ", 1_000_000)
    result = await memory.extraction.ingest("Grep", output)
    assert result.stored and result.rule_id == "grep-error"

    def summarized(output: str) -> str:
        """ingest's work on the output (in its worker thread): match, summarize, redact."""
        rule = first_match(rules_for(memory.settings), "Grep", output)
        assert rule is not None
        scan_chars = memory.settings.extraction_scan_chars
        return redact(summarize(rule.summarizer, output, scan_chars)).text

    small = "Grep error\n" + rand("abc:/.\n ", 62_500)
    assert growth(summarized, small, output) < 64  # 16 times the output: linear is <= 16


async def test_extraction_switched_off_stores_nothing(memory: Memory) -> None:
    """ADR-004's rollback switch (GQL_MEMORY_EXTRACTION=false): working-memory inserts stop,
    and the reply says why."""
    off = Memory(memory.db, memory.settings.with_overrides(extraction=False))
    result = await off.extraction.ingest("Read", spec_file(), "s1")
    assert not result.stored and "switched off" in result.reason
    assert result.working_memory is None and result.rule_id is None
    assert await rows(memory, "working_memory") == []
    with pytest.raises(ValidationError):  # input is still validated
        await off.extraction.ingest("Read", "   ", "s1")
    assert (await memory.extraction.ingest("Read", spec_file(), "s1")).stored
