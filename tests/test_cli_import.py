"""`gql-memory import FILE` end to end: a real process against the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    assert unknown.exit_code == 2 and "format must be auto, jsonl, json or locomo" in unknown.output
