"""`--help` of every command reads cleanly: no type tags (`<str>`, `<path>`, `--help <bool>`);
an option that takes a value shows what it takes (PORT, DIR), a flag shows nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from gql_memory.cli import app, plural

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
