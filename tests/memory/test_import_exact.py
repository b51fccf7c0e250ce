"""Imports that are exact (issue 18): the database keeps each turn once, keys never depend on
a position, a file with a repeated id or a malformed record writes nothing, and an error
while writing names the line to resume from."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, text

from gql_memory import ValidationError
from gql_memory.db import Database
from gql_memory.db.migrate import alembic_config, upgrade
from gql_memory.memory import Memory
from gql_memory.memory.importer import (
    ImportStoppedError,
    TranscriptImporter,
    _key,
    import_file,
    read_transcript,
)
from gql_memory.store import MemoryStore


def jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def chat(turns: int, session: str = "s1") -> list[dict[str, Any]]:
    """Turns without ids, with repeats ("ok" from the same speaker) that must stay apart."""
    return [
        {"sessionId": session, "speaker": "user" if n % 2 else "bot", "content": f"line {n % 7}"}
        for n in range(turns)
    ]


async def stored(memory: Memory) -> list[tuple[str, str]]:
    async with memory.db.read() as conn:
        rows = await conn.execute(
            text("SELECT speaker, content FROM raw_dialogue WHERE namespace = :ns ORDER BY id"),
            {"ns": memory.namespace},
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_concurrent_imports_of_one_file_store_each_turn_once(
    memory: Memory, scratch_dir: Path
) -> None:
    """Finding 4: the check for stored keys and the insert race; the unique index decides."""
    path = jsonl(scratch_dir / "chat.jsonl", chat(600, "s1") + chat(300, "s2"))
    fmt, turns = read_transcript(path)
    importers = [TranscriptImporter(memory.raw, batch_size=25) for _ in range(3)]
    summaries = await asyncio.gather(*(i.run(fmt, list(turns)) for i in importers))
    assert len(await stored(memory)) == 900
    assert sum(s.stored for s in summaries) == 900


async def test_a_turn_inserted_mid_session_is_exactly_what_a_re_import_adds(
    memory: Memory, scratch_dir: Path
) -> None:
    """Finding 5: keys by position shifted every later turn of the session."""
    records = chat(40)
    await import_file(memory.raw, jsonl(scratch_dir / "a.jsonl", records))
    inserted = {"sessionId": "s1", "speaker": "user", "content": "line 3"}  # a repeat, too
    edited = records[:15] + [inserted] + records[15:]
    summary = await import_file(memory.raw, jsonl(scratch_dir / "b.jsonl", edited))
    assert (summary.read, summary.stored, summary.skipped) == (41, 1, 40)
    assert len(await stored(memory)) == 41


async def test_a_repeated_id_names_both_lines_and_writes_nothing(
    memory: Memory, scratch_dir: Path
) -> None:
    """Finding 6: the second record silently replaced the first."""
    records = [
        {"id": "a", "sessionId": "s1", "speaker": "user", "content": "first"},
        {"id": "b", "sessionId": "s1", "speaker": "user", "content": "second"},
        {"id": "a", "sessionId": "s1", "speaker": "user", "content": "third"},
    ]
    with pytest.raises(ValidationError, match=r"line 3: id 'a' of session 's1' repeats line 1"):
        await import_file(memory.raw, jsonl(scratch_dir / "dup.jsonl", records))
    assert await stored(memory) == []


async def test_a_turn_storing_would_refuse_is_refused_before_anything_is_written(
    memory: Memory, scratch_dir: Path
) -> None:
    records = chat(10)
    records[7]["timestamp"] = "10000-01-01T00:00:00Z"  # parses nowhere: not ISO-8601
    with pytest.raises(ValidationError, match=r"^line 8: "):
        await import_file(memory.raw, jsonl(scratch_dir / "late.jsonl", records), batch_size=2)
    records[7]["timestamp"] = "0001-01-01T00:00:00Z"  # ISO, but before what is stored
    with pytest.raises(ValidationError, match=r"^line 8: timestamp"):
        await import_file(memory.raw, jsonl(scratch_dir / "early.jsonl", records), batch_size=2)
    assert await stored(memory) == []


async def test_an_error_while_writing_names_the_line_to_resume_from(
    memory: Memory, scratch_dir: Path
) -> None:
    """Finding 9: a failure only the database finds (here: a trigger) after earlier batches
    were committed names the file line the import stopped at; a re-run resumes there."""
    async with memory.db.write() as conn:
        await conn.execute(
            text(
                "CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.content = 'boom' THEN RAISE EXCEPTION 'the database refused boom'; "
                "END IF; RETURN NEW; END $$"
            )
        )
        await conn.execute(
            text(
                "CREATE TRIGGER refuse_boom BEFORE INSERT ON raw_dialogue "
                "FOR EACH ROW EXECUTE FUNCTION refuse_boom()"
            )
        )
    try:
        records = chat(10)
        records[6]["content"] = "boom"
        path = jsonl(scratch_dir / "boom.jsonl", records)
        with pytest.raises(ImportStoppedError) as stopped:
            await import_file(memory.raw, path, batch_size=3)
        message = str(stopped.value)
        assert message.startswith("line 7: ")
        assert "the database refused boom" in message
        assert "the turns before line 7 are stored" in message
        assert len(await stored(memory)) == 6
    finally:
        async with memory.db.write() as conn:
            await conn.execute(text("DROP TRIGGER refuse_boom ON raw_dialogue"))
            await conn.execute(text("DROP FUNCTION refuse_boom()"))
    summary = await import_file(memory.raw, path, batch_size=3)  # resumes
    assert (summary.stored, summary.skipped) == (4, 6)
    assert len(await stored(memory)) == 10


@pytest.mark.parametrize(
    "namespace", ["", "has space", "x'; DROP TABLE raw_dialogue; --", "x" * 300]
)
def test_every_entry_point_refuses_a_namespace_no_key_could_read(namespace: str) -> None:
    """Finding 8: one rule for keys, the library, imports and the MCP bridge."""
    with pytest.raises(ValidationError, match="is invalid: it must be 1-255 characters"):
        MemoryStore("postgresql://nowhere/db", namespace=namespace)


async def test_legacy_position_keys_are_re_keyed_by_the_migration(
    db: Database, memory: Memory, scratch_dir: Path
) -> None:
    """Keys stored before migration 0008 counted positions; after it, re-importing the same
    file (new keys) adds nothing, and turns stored twice by a past race are marked."""
    records = chat(12)
    path = jsonl(scratch_dir / "old.jsonl", records)
    await migrate_to(db, "0007")
    try:
        async with db.write() as conn:
            for position, record in enumerate(records, 1):
                legacy = _key("turn", "s1", position, record["speaker"], record["content"])
                copies = 2 if position == 5 else 1  # a turn a past concurrent import doubled
                for _ in range(copies):
                    await conn.execute(
                        text(
                            "INSERT INTO raw_dialogue (namespace, session_id, speaker, content, "
                            "metadata) VALUES ('default', 's1', :speaker, :content, "
                            "jsonb_build_object('import_key', CAST(:key AS text)))"
                        ),
                        {"speaker": record["speaker"], "content": record["content"], "key": legacy},
                    )
    finally:
        await upgrade(db, 384)
    summary = await import_file(memory.raw, path)
    assert (summary.stored, summary.skipped) == (0, 12)
    async with db.read() as conn:
        marked = await conn.scalar(
            text("SELECT count(*) FROM raw_dialogue WHERE metadata ? 'import_duplicate_of'")
        )
    assert marked == 1


async def migrate_to(db: Database, revision: str) -> None:
    def downgrade(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    async with db.engine.begin() as conn:
        await conn.run_sync(downgrade)
