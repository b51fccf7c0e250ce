"""`gql-memory export` and `gql-memory import` of an export, in process, on the test database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

import pytest
from typer.testing import CliRunner

from gql_memory.cli import app
from tests.memory.test_interchange import without_ids


def run(database_url: str, *args: str) -> tuple[int, str, str]:
    env = {"DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_export_then_import_then_export_again(tmp_path: Path, database_url: str) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text(
        "\n".join(
            json.dumps({"sessionId": f"s{i % 2}", "speaker": "user", "content": f"turn {i}"})
            for i in range(5)
        )
    )
    code, out, err = run(database_url, "import", str(turns), "--namespace", "cli-src")
    assert code == 0, err
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"

    code, out, err = run(database_url, "export", "--namespace", "cli-src", "-o", str(first))
    assert code == 0, err
    assert "exported" in out and "raw: 5" in out and not (tmp_path / "first.jsonl.partial").exists()

    code, out, err = run(database_url, "import", str(first), "--namespace", "cli-copy")
    assert code == 0, err
    assert "into namespace 'cli-copy' from the export first.jsonl (session: 2, raw: 5" in out
    assert "rows to embed anew" in out and "embedded" in out  # exported without vectors

    code, out, err = run(database_url, "export", "--namespace", "cli-copy", "--with-vectors")
    assert code == 0, err
    second.write_text(out)  # stdout holds the file alone; the summary went to stderr
    assert '"embedding":{' in out.splitlines()[0] and "exported" in err
    assert '"gqlMemory":"0.' in out.splitlines()[0]
    again = [{k: v for k, v in r.items() if k != "embedding"} for r in without_ids(out)[1:]]
    assert again == without_ids(first.read_text())[1:]

    code, out, err = run(database_url, "import", str(second), "--namespace", "cli-copy")
    assert code == 2 and "already holds data" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(database_url, "import", str(second), "--namespace", "cli-copy", "--merge")
    assert code == 0 and out.startswith("imported 0 of ") and "(merged)" in out


def test_a_bad_export_is_one_error_line(tmp_path: Path, database_url: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"format": "gql-memory-export", "version": 1, "namespace": "x"})
        + '\n{"kind": "session", "sessionId": "s", "eventCounter": -1}\n'
    )
    code, out, err = run(database_url, "import", str(path), "--namespace", "cli-bad")
    assert code == 2
    assert err.strip() == "error: line 2: eventCounter must be a non-negative integer"
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "gql-memory-export", "version": 99}) + "\n")
    code, out, err = run(database_url, "import", str(newer), "--format", "export")
    assert code == 2 and "version 99, newer than this gql_memory reads" in err
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"sessionId": "s", "speaker": "u", "content": "c"}\n')
    code, out, err = run(database_url, "import", str(transcript), "--replace")
    assert code == 2 and "--replace and --merge apply to an export file" in err


def test_an_export_that_fails_leaves_no_file_behind(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever ends it (here an unexpected error half-way), the file named by --output keeps
    what it held and no partial file is left."""
    from gql_memory.memory.interchange import export as exporting

    async def broken(db: object, namespace: str, out: TextIO, **options: object) -> None:
        out.write('{"format":"gql-memory-export"}\n')
        raise RuntimeError("the export broke half-way")

    monkeypatch.setattr(exporting, "export_namespace", broken)
    target = tmp_path / "keep.jsonl"
    target.write_text("what was there\n")
    code, _, _ = run(database_url, "export", "--namespace", "cli-src", "-o", str(target))
    assert code != 0
    assert target.read_text() == "what was there\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]


def test_an_empty_file_is_no_export(tmp_path: Path, database_url: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    code, _, err = run(database_url, "import", str(empty), "--format", "export")
    assert code == 2
    assert err.strip() == "error: line 1: the file is empty, not a gql-memory-export file"
