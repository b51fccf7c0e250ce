"""The config file and settings as an operator meets them: a bad file or value is one line
naming it and exit status 2, never a traceback, a hang or a silently ignored key."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gql_memory.cli import app
from gql_memory.config import MAX_CONFIG_FILE_BYTES, Settings, read_config_file
from gql_memory.errors import ConfigurationError

GQL_MEMORY = Path(sys.executable).parent / "gql-memory"
Write = Callable[[str, str], Path]
# Guards against a hang (the bug under test), not a performance bound: a refused file takes
# well under a second.
HANG_GUARD_S = 120

# "Billion laughs": 9 levels of 9 aliases, ~400 bytes that stand for 9**9 list items.
ALIAS_BOMB = "\n".join(
    [
        'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)),
        f"extraction_rules: [{','.join(['*a7'] * 9)}]",
    ]
)


@dataclass(frozen=True)
class Ran:
    """How a command ended: exit status and what it printed."""

    code: int
    stdout: str
    stderr: str


def _limit_memory() -> None:
    """Let a regression fail with MemoryError rather than take the machine's memory."""
    limit = 4 * 1024**3
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def gql_memory(*args: str, **env: str) -> Ran:
    """The command as a real process: for inputs that could hang it (or exhaust memory)."""
    inherited = os.environ.items()
    clean = {k: v for k, v in inherited if not k.startswith("GQL_MEMORY_") and k != "DATABASE_URL"}
    done = subprocess.run(
        [str(GQL_MEMORY), *args],
        capture_output=True,
        text=True,
        env=clean | env,
        timeout=HANG_GUARD_S,
        preexec_fn=_limit_memory,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def cli(*args: str, **env: str) -> Ran:
    """The command in this process (faster), with the same clean environment."""
    unset = {k: None for k in os.environ if k.startswith("GQL_MEMORY_") or k == "DATABASE_URL"}
    result = CliRunner().invoke(app, list(args), env=unset | env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def export_schema(tmp_path: Path, run: Callable[..., Ran] = cli, **env: str) -> Ran:
    """`export-schema` needs no database, but reads the settings like every command."""
    return run("export-schema", "--output", str(tmp_path / "schema.graphql"), **env)


def assert_one_line_error(ran: Ran, *parts: str) -> str:
    """Exit status 2 and one line on stderr naming every part; no traceback."""
    assert ran.code == 2, ran
    assert "Traceback" not in ran.stdout + ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    (line,) = lines
    assert line.startswith("error: ")
    for part in parts:
        assert part in line, line
    return line


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """Writes a file of the test's own directory."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


# --- YAML alias bombs (finding 10) ------------------------------------------------------------


def test_an_alias_bomb_config_file_is_refused_not_expanded(tmp_path: Path, write: Write) -> None:
    bomb = write("bomb.yaml", ALIAS_BOMB)
    done = export_schema(tmp_path, gql_memory, GQL_MEMORY_CONFIG=str(bomb))
    assert_one_line_error(done, f"GQL_MEMORY_CONFIG {bomb}", "anchors and aliases", "line 1")


def test_an_alias_bomb_rule_file_is_refused_not_expanded(write: Write) -> None:
    bomb = write("rules.yaml", ALIAS_BOMB)
    done = gql_memory("rules", "check", str(bomb))
    assert_one_line_error(done, str(bomb), "anchors and aliases")


def test_settings_with_an_alias_bomb_raise_a_configuration_error(
    write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GQL_MEMORY_CONFIG", str(write("bomb.yaml", ALIAS_BOMB)))
    with pytest.raises(ConfigurationError, match="anchors and aliases"):
        Settings()


def test_a_yaml_merge_key_is_refused_too(write: Write) -> None:
    path = write("merge.yaml", "base: &base {port: 1}\nserver:\n  <<: *base\n")
    with pytest.raises(ConfigurationError, match="anchors and aliases"):
        read_config_file(path)


def test_a_config_file_over_the_size_limit_is_refused_unread(write: Write) -> None:
    path = write("huge.toml", "# padding\n" * (MAX_CONFIG_FILE_BYTES // 10 + 1))
    with pytest.raises(ConfigurationError, match="larger than 1 MiB"):
        read_config_file(path)


# --- unknown keys (finding 11) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("gql-memory.toml", "working_memory_capacty = 12\n"),
        ("gql-memory.yaml", "working_memory_capacty: 12\n"),
    ],
)
def test_a_misspelt_setting_is_refused_with_a_suggestion(
    tmp_path: Path, write: Write, name: str, text: str
) -> None:
    path = write(name, text)
    done = export_schema(tmp_path, GQL_MEMORY_CONFIG=str(path))
    line = assert_one_line_error(done, "unknown setting 'working_memory_capacty'")
    assert line.endswith(
        f"GQL_MEMORY_CONFIG {path}: unknown setting 'working_memory_capacty' "
        "(did you mean 'working_memory_capacity'?)"
    )


def test_settings_with_a_misspelt_key_raise_a_configuration_error(
    write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GQL_MEMORY_CONFIG", str(write("c.toml", "hots = '0.0.0.0'\n")))
    with pytest.raises(ConfigurationError, match=r"unknown setting 'hots' \(did you mean 'host'"):
        Settings()


def test_an_env_var_name_in_the_file_points_to_the_file_spelling(write: Write) -> None:
    path = write("c.toml", "GQL_MEMORY_PORT = 9000\n")
    with pytest.raises(ConfigurationError, match=r"'gql_memory_port' \(did you mean 'port'\?\)"):
        read_config_file(path)


def test_every_setting_and_alias_is_a_known_key(
    write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(
        "ok.toml",
        'working_memory_capacity = 12\nDATABASE_URL = "postgres://u@h/db"\n'
        'openai_api_key = "sk-test"\nPROMETHEUS_MULTIPROC_DIR = "/tmp/m"\nPort = 9000\n',
    )
    monkeypatch.setenv("GQL_MEMORY_CONFIG", str(path))
    settings = Settings()
    assert settings.working_memory_capacity == 12 and settings.port == 9000
    assert settings.database_url == "postgresql+asyncpg://u@h/db"
    assert settings.openai_api_key == "sk-test"
    assert settings.prometheus_multiproc_dir == Path("/tmp/m")


def test_rules_check_refuses_a_misspelt_setting_beside_the_rules(write: Write) -> None:
    path = write(
        "rules.toml",
        "extraction_rules = []\nworking_memory_capacty = 3\n",
    )
    done = cli("rules", "check", str(path))
    assert_one_line_error(done, "'working_memory_capacty'", "'working_memory_capacity'")


# --- invalid values and unusable files (finding 12) -----------------------------------------


def test_a_bad_value_in_the_file_is_one_line_naming_setting_value_and_rule(
    tmp_path: Path, write: Write
) -> None:
    path = write("gql-memory.toml", "working_memory_capacity = -3\n")
    done = export_schema(tmp_path, gql_memory, GQL_MEMORY_CONFIG=str(path))
    line = assert_one_line_error(done)
    assert line == (
        f"error: working_memory_capacity (GQL_MEMORY_CONFIG {path}): -3 is invalid: "
        "it should be greater than or equal to 1"
    )


def test_a_bad_value_in_the_environment_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    done = export_schema(tmp_path, gql_memory, GQL_MEMORY_DB_POOL_SIZE="lots")
    assert_one_line_error(
        done,
        "db_pool_size (GQL_MEMORY_DB_POOL_SIZE): 'lots' is invalid: it should be a valid integer",
    )


def test_a_bad_choice_names_the_allowed_values(tmp_path: Path) -> None:
    done = export_schema(tmp_path, GQL_MEMORY_SEARCH_FUSION="best")
    assert_one_line_error(done, "search_fusion", "'best' is invalid", "'dbsf' or 'rrf'")


def test_a_bad_database_url_is_shown_without_its_password(tmp_path: Path) -> None:
    done = export_schema(tmp_path, DATABASE_URL="mysql://admin:hunter2@db/memory")
    line = assert_one_line_error(done, "database_url (DATABASE_URL)", "postgresql://")
    assert "hunter2" not in line and "mysql://admin:***@db/memory" in line


def test_a_bad_command_line_value_is_one_line_too() -> None:
    done = cli("serve", "--port", "70000")
    assert_one_line_error(done, "port (command line): 70000 is invalid")


@pytest.mark.parametrize(
    "command",
    [
        ("serve",),
        ("migrate",),
        ("reembed",),
        ("import", "transcript.jsonl"),
        ("keys", "list"),
        ("keys", "create", "--namespace", "a", "--scopes", "read"),
        ("keys", "revoke", "1"),
        ("mcp",),
    ],
)
def test_every_command_reports_a_bad_value_before_touching_the_database(
    write: Write, command: tuple[str, ...]
) -> None:
    path = write("gql-memory.yaml", "db_pool_size: 0\n")
    # An unreachable database: a command that got past its settings would fail differently.
    unreachable = "postgresql://nobody@127.0.0.1:1/x"
    done = cli(*command, GQL_MEMORY_CONFIG=str(path), DATABASE_URL=unreachable)
    assert_one_line_error(done, "db_pool_size", "0 is invalid")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (None, None, "no such config file"),
        ("broken.toml", "port = \n", "is not valid TOML/YAML"),
        ("broken.yaml", "port: [1\n", "is not valid TOML/YAML"),
        ("list.yaml", "- port\n", "must hold settings"),
        ("binary.toml", "\udcff", "not UTF-8"),
    ],
)
def test_an_unusable_config_file_is_one_line(
    tmp_path: Path, name: str | None, text: str | None, message: str
) -> None:
    path = tmp_path / (name or "missing.toml")
    if text is not None:
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    done = export_schema(tmp_path, GQL_MEMORY_CONFIG=str(path))
    assert_one_line_error(done, f"GQL_MEMORY_CONFIG {path}", message)
