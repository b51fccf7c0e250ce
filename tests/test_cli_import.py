"""`gql-memory import FILE` end to end: a real process against the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from gql_memory.cli import app
from gql_memory.db import Database
from gql_memory.memory import Memory
from tests.conftest import truncate_all
from tests.memory.locomo_sample import LOCOMO


def gql_memory(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    return subprocess.run(
        [sys.executable, "-m", "gql_memory", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_import_command_is_idempotent_and_summarises(
    tmp_path: Path, db: Database, database_url: str, memory: Memory
) -> None:
    await truncate_all(db)
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(LOCOMO))
    first = gql_memory(
        "import",
        str(path),
        "--namespace",
        "bench",
        "--session-prefix",
        "lc-",
        database_url=database_url,
    )
    assert first.returncode == 0, first.stderr
    assert "imported 4 of 4 turns (0 already present) in 3 sessions of namespace 'bench'" in (
        first.stdout
    )
    second = gql_memory(
        "import",
        str(path),
        "--namespace",
        "bench",
        "--session-prefix",
        "lc-",
        database_url=database_url,
    )
    assert second.returncode == 0, second.stderr
    assert "imported 0 of 4 turns (4 already present)" in second.stdout
    bench = Memory(db, memory.settings, "bench", memory.embedder)
    turns = (await bench.raw.list()).items
    assert len(turns) == 4 and {t.session_id for t in turns} >= {"lc-conv-1-session_1"}


def test_import_command_reports_a_bad_file(tmp_path: Path, database_url: str) -> None:
    runner = CliRunner()
    env = {"DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    path = tmp_path / "turns.jsonl"
    path.write_text('{"sessionId": "s", "speaker": "user"}\n')
    result = runner.invoke(app, ["import", str(path)], env=env)
    assert result.exit_code == 2
    assert "line 1: content is required" in result.output
    missing = runner.invoke(app, ["import", str(tmp_path / "nope.json")], env=env)
    assert missing.exit_code == 2 and "no such file" in missing.output
    unknown = runner.invoke(app, ["import", str(path), "--format", "xml"], env=env)
    assert (
        unknown.exit_code == 2
        and "format must be auto, export, jsonl, json, locomo, mem0, mcp-memory or letta"
        in (unknown.output)
    )


def test_every_malformed_file_is_one_line_and_exit_2_before_any_database(
    tmp_path: Path,
) -> None:
    """The corpus through the command itself: exit 2, `error: line N: ...`, no traceback. No
    database is reachable here: a malformed file is refused before one is started."""
    from tests.memory.test_import_corpus import CORPUS, EXPECTED

    env = {"DATABASE_URL": "postgresql://127.0.0.1:9/unreachable"}
    for name, expected in EXPECTED.items():
        if isinstance(expected, int):
            continue
        result = CliRunner().invoke(app, ["import", str(CORPUS / name)], env=env)
        assert result.exit_code == 2, (name, result.output)
        assert result.output.startswith(f"error: {expected}"), (name, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), name
        assert "Traceback" not in result.output


@pytest.mark.parametrize("namespace", ["", "has space", "x'; DROP TABLE raw_dialogue; --"])
def test_import_refuses_a_namespace_no_key_could_read(tmp_path: Path, namespace: str) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text('{"sessionId": "s", "speaker": "user", "content": "hi"}\n')
    env = {"DATABASE_URL": "postgresql://127.0.0.1:9/unreachable"}
    result = CliRunner().invoke(app, ["import", str(path), "--namespace", namespace], env=env)
    assert result.exit_code == 2
    assert "is invalid: it must be 1-255 characters" in result.output


async def test_concurrent_import_commands_store_each_turn_once(
    tmp_path: Path, db: Database, database_url: str
) -> None:
    """Finding 4 as an operator meets it: three `gql-memory import` processes at once."""
    await truncate_all(db)
    path = tmp_path / "chat.jsonl"
    path.write_text(
        "".join(
            json.dumps({"sessionId": f"s{n % 3}", "speaker": "user", "content": f"turn {n % 40}"})
            + "\n"
            for n in range(1500)
        )
    )
    env = {**os.environ, "DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    command = [sys.executable, "-m", "gql_memory", "import", str(path), "--batch-size", "50"]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [run.communicate(timeout=180)[0] for run in runs]
    assert all(run.returncode == 0 for run in runs), outputs
    async with db.read() as conn:
        count = await conn.scalar(text("SELECT count(*) FROM raw_dialogue"))
    assert count == 1500


async def test_import_summary_counts_in_the_singular_too(
    tmp_path: Path, db: Database, database_url: str
) -> None:
    await truncate_all(db)
    path = tmp_path / "one.jsonl"
    path.write_text('{"sessionId": "solo", "speaker": "user", "content": "Hi"}\n')
    done = gql_memory("import", str(path), "--namespace", "one", database_url=database_url)
    assert done.returncode == 0, done.stderr
    assert (
        "imported 1 of 1 turn (0 already present) in 1 session of namespace 'one' "
        "from jsonl in 1 batch, "
    ) in done.stdout
