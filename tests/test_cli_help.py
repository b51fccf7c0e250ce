"""`--help` of every command reads cleanly: no type tags (`<str>`, `<path>`, `--help <bool>`);
an option that takes a value shows what it takes (PORT, DIR), a flag shows nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from gql_memory.cli import app, import_transcript, plural
from gql_memory.config import IMPORT_BATCH_SIZE

TYPE_TAG = re.compile(r"<(str|int|float|bool|path|text|integer)[^>]*>", re.I)


def command_paths(group: TyperGroup, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            yield from command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name)


COMMANDS = list(command_paths(typer.main.get_command(app)))  # type: ignore[arg-type]


def help_of(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_covered() -> None:
    names = {" ".join(path) for path in COMMANDS}
    assert {"serve", "import", "mcp", "keys create", "rules check"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "gql-memory")
def test_help_shows_no_type_tags(path: tuple[str, ...]) -> None:
    output = help_of(path)
    assert not TYPE_TAG.search(output), output
    help_line = next(line for line in output.splitlines() if "--help" in line)
    assert re.search(r"--help\s+Show this message", help_line), help_line


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "gql-memory")
def test_options_that_take_a_value_show_their_metavar(path: tuple[str, ...]) -> None:
    group = typer.main.get_command(app)
    command = group
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    output = help_of(path)
    for param in command.params:
        if not isinstance(param, TyperOption):
            continue
        option = max(param.opts, key=len)
        line = next(line for line in output.splitlines() if re.match(rf"^[│*\s]*{option}\b", line))
        shown = re.search(rf"{option}(?:\s+-\w)?\s+(\S+)", line)
        assert shown, line
        if param.is_flag:
            assert shown.group(1)[0].isupper() and shown.group(1)[1:].islower(), line  # help
        else:
            assert shown.group(1) == param.metavar, line


def test_counts_are_pluralised(tmp_path: Path) -> None:
    assert plural(1, "session") == "1 session"
    assert plural(0, "session") == "0 sessions"
    assert plural(2, "batch", "batches") == "2 batches"
    assert plural(1, "batch", "batches") == "1 batch"
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[extraction_rules]]\nid = "any-read"\ntoolPattern = "^Read"\n'
        'attention = 0.4\nsummarizer = "firstLast500"\n'
    )
    result = CliRunner().invoke(app, ["rules", "check", str(rules)])
    assert result.exit_code == 0, result.output
    assert f"{rules}: 1 extraction rule OK" in result.output


# What a command needs only when it runs: the database layers, the GraphQL schema, the HTTP
# server, pydantic's settings, the embedders. `--help` and an argument error must not pay for
# them (they cost seconds of imports; the help itself takes a few hundredths).
HEAVY = (
    "alembic",
    "asyncpg",
    "numpy",
    "openai",
    "pydantic_settings",  # (pydantic itself: typer's own parameter handling loads it)
    "sqlalchemy",
    "starlette",
    "strawberry",
    "uvicorn",
    "gql_memory.config",
    "gql_memory.db",
    "gql_memory.memory",
    "gql_memory.runtime",
    "gql_memory.server",
    "gql_memory.store",
)
ANSWERED_AT_ONCE = (
    ["--help"],
    ["serve", "--help"],
    ["import", "--help"],
    ["keys", "create", "--help"],
    ["serve", "--port", "not-a-number"],
    ["import"],  # missing argument
    ["no-such-command"],
)

MODULES_AFTER = """
import json, sys
from gql_memory.cli import app
try:
    app(sys.argv[1:], prog_name="gql-memory")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.__stdout__)
"""


@pytest.mark.parametrize("args", ANSWERED_AT_ONCE, ids=" ".join)
def test_help_and_argument_errors_import_nothing_heavy(args: list[str]) -> None:
    """Counted as import work, not time: the modules loaded by the time the command answered."""
    done = subprocess.run(
        [sys.executable, "-c", MODULES_AFTER, *args], capture_output=True, text=True, timeout=60
    )
    loaded = json.loads(done.stdout.splitlines()[-1])
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == [], heavy
    assert "Usage" in done.stdout + done.stderr  # it answered: the help, or the usage and error


def test_import_batch_default_is_the_configured_one() -> None:
    """The default is written out in cli.py (config is not imported for --help)."""
    param = next(
        p
        for p in typer.main.get_command_from_info(
            typer.models.CommandInfo(callback=import_transcript),
            pretty_exceptions_short=True,
            rich_markup_mode="markdown",
        ).params
        if p.name == "batch_size"
    )
    assert param.default == IMPORT_BATCH_SIZE
