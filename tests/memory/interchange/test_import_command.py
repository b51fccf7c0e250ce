"""`gql-memory import FILE --namespace NS [--format mem0|mcp-memory|letta]`: each format by
content or by name, one summary line; a bad file is one error line and exit 2, before any
database is started."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gql_memory.cli import app
from gql_memory.memory.interchange.foreign import ForeignFormat, detect_foreign
from tests.memory.interchange.conftest import LETTA, MCP_MEMORY, MEM0

UNREACHABLE = {"DATABASE_URL": "postgresql://127.0.0.1:9/unreachable"}


def test_each_format_is_detected_by_content(tmp_path: Path) -> None:
    assert detect_foreign(MEM0) is ForeignFormat.MEM0
    assert detect_foreign(MCP_MEMORY) is ForeignFormat.MCP_MEMORY
    assert detect_foreign(LETTA) is ForeignFormat.LETTA
    renamed = tmp_path / "memory.json"  # the reference's file under another name
    renamed.write_bytes(MCP_MEMORY.read_bytes())
    assert detect_foreign(renamed) is ForeignFormat.MCP_MEMORY
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text('{"sessionId": "s", "speaker": "user", "content": "hi"}\n')
    assert detect_foreign(transcript) is None


def test_the_command_imports_each_format_once(database_url: str) -> None:
    env = {"DATABASE_URL": database_url, "GQL_MEMORY_EMBEDDING_PROVIDER": "hash"}
    runner = CliRunner()
    expected = {
        MEM0: "imported 6 of 6 memories into namespace 'imported' from mem0",
        MCP_MEMORY: "imported 6 of 6 entities, 7 of 7 observations, 4 of 4 relations",
        LETTA: "imported 13 of 13 messages, 12 of 12 memory blocks",
    }
    for path, summary in expected.items():
        done = runner.invoke(app, ["import", str(path), "--namespace", "imported"], env=env)
        assert done.exit_code == 0, done.output
        assert summary in done.output
    again = runner.invoke(
        app, ["import", str(MEM0), "--namespace", "imported", "--format", "mem0"], env=env
    )
    assert "imported 0 of 6 memories" in again.output


@pytest.mark.parametrize(
    ("content", "fmt", "error"),
    [
        ('{"results": [{"id": "a"}]}', "auto", "error: line 1: memory is required"),
        ('{"type":"entity","name":"A","entityType":"t"}\n{', "auto", "error: line 2: not valid"),
        ('{"agents": [{"name": 5}], "blocks": []}', "auto", "error: line 1: agent name must"),
        ('{"sessionId": "s", "speaker": "u", "content": "hi"}', "letta", "error: line 1: an"),
    ],
)
def test_a_bad_file_is_one_error_line_before_any_database(
    tmp_path: Path, content: str, fmt: str, error: str
) -> None:
    path = tmp_path / "file.json"
    path.write_text(content)
    result = CliRunner().invoke(app, ["import", str(path), "--format", fmt], env=UNREACHABLE)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(error), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
