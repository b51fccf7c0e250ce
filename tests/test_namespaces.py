"""One namespace rule (gql_memory.memory.validation.require_namespace) at every way in: the
library's stores and ``scoped``, transcript imports, the MCP bridge and the CLI refuse a
namespace no API key could be bound to, with the same ValidationError, before anything is
stored or started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gql_memory import AsyncMemoryStore, MemoryStore, ValidationError
from gql_memory.cli import app
from gql_memory.config import Settings
from gql_memory.mcp_server import run_stdio
from gql_memory.memory.importer import TranscriptImporter
from gql_memory.memory.raw import RawDialogueStore
from gql_memory.memory.validation import require_namespace

REFUSED = "is invalid: it must be 1-255 characters"
UNREACHABLE = "postgresql://127.0.0.1:9/unreachable"
INVALID = [
    "",
    " x",
    "a b",
    "ns/1",
    "é",
    "-starts-with-a-dash",
    "x" * 256,
    "tenant\n",  # a trailing newline, which a "$"-anchored pattern would let in
    "x'; DROP TABLE raw_dialogue; --",
]


@pytest.mark.parametrize("namespace", ["default", "a", "tenant-b", "org:team@x.y_z", "x" * 255])
def test_valid_namespaces_are_kept_as_they_are(namespace: str) -> None:
    assert require_namespace(namespace) == namespace


@pytest.mark.parametrize("namespace", [*INVALID, None, 7])
def test_invalid_namespaces_are_refused(namespace: Any) -> None:
    with pytest.raises(ValidationError, match=REFUSED):
        require_namespace(namespace)


@pytest.mark.parametrize("store_class", [MemoryStore, AsyncMemoryStore])
@pytest.mark.parametrize("namespace", INVALID)
def test_the_library_stores_refuse_before_starting_a_database(
    store_class: type[Any], namespace: str
) -> None:
    with pytest.raises(ValidationError, match=REFUSED):
        store_class(UNREACHABLE, namespace=namespace)


@pytest.mark.parametrize("namespace", INVALID)
async def test_scoped_refuses_on_a_connected_store(settings: Settings, namespace: str) -> None:
    async with AsyncMemoryStore(settings=settings, migrate=False) as store:
        with pytest.raises(ValidationError, match=REFUSED):
            store.scoped(namespace)
        assert store.scoped("tenant-b").namespace == "tenant-b"


@pytest.mark.parametrize("namespace", INVALID)
def test_the_importer_refuses_a_store_of_an_unchecked_namespace(namespace: str) -> None:
    raw = RawDialogueStore(None, Settings(), namespace, None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=REFUSED):
        TranscriptImporter(raw)


@pytest.mark.parametrize("namespace", ["a b", "tenant\n"])
def test_the_mcp_bridge_refuses_before_starting(namespace: str) -> None:
    with pytest.raises(ValidationError, match=REFUSED):
        run_stdio(Settings(database_url=UNREACHABLE), namespace)


@pytest.mark.parametrize("command", ["import", "mcp", "keys create"])
@pytest.mark.parametrize("namespace", ["a b", "tenant\n"])
def test_cli_commands_refuse_before_starting_a_database(
    tmp_path: Path, command: str, namespace: str
) -> None:
    turns = tmp_path / "turns.jsonl"
    turns.write_text('{"sessionId": "s", "speaker": "user", "content": "hi"}\n')
    args = {
        "import": ["import", str(turns), "--namespace", namespace],
        "mcp": ["mcp", "--namespace", namespace],
        "keys create": ["keys", "create", "--namespace", namespace, "--scopes", "read"],
    }[command]
    result = CliRunner().invoke(app, args, env={"DATABASE_URL": UNREACHABLE})
    assert result.exit_code == 2, result.output
    assert REFUSED in result.output
