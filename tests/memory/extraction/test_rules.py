"""Extraction rules (seed 002 ADR-004/006): data, first match wins, checked at startup."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gql_memory.cli import app as cli
from gql_memory.config import Settings
from gql_memory.errors import ConfigurationError
from gql_memory.memory.extraction.rule_overlaps import find_overlaps
from gql_memory.memory.extraction.rules import (
    DEFAULT_RULES,
    compile_rules,
    first_match,
    output_path,
    rules_for,
)
from gql_memory.server.app import create_app
from gql_memory.store import AsyncMemoryStore
from tests.scaling import growth


def rule(rule_id: str, tool: str, content: str | None = None, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": rule_id,
        "toolPattern": tool,
        "attention": 0.5,
        "summarizer": "firstLast500",
    }
    if content is not None:
        data["contentPattern"] = content
    return data | extra


def test_the_seeds_three_rules_are_the_defaults() -> None:
    rules = rules_for(Settings())
    assert [(r.id, r.attention, r.summarizer) for r in rules] == [
        ("read-spec", 0.9, "firstLast500"),
        ("grep-error", 0.8, "matchCountSummary"),
        ("bash-git-commit", 0.7, "stdoutSummary"),
    ]
    spec = first_match(rules, "Read", "# Spec\n...", output_path("...", {"file_path": "a/spec.md"}))
    assert spec is not None and spec.id == "read-spec"
    assert first_match(rules, "Grep", "a.py:1: ERROR boom").id == "grep-error"
    assert first_match(rules, "Bash", "$ git commit -m x").id == "bash-git-commit"
    assert first_match(rules, "Bash", "$ ls") is None
    assert first_match(rules, "Write", "spec.md") is None


@pytest.mark.parametrize(
    ("output", "metadata", "matches"),
    [
        ("# Title\n...", {"file_path": "/repo/docs/spec.md"}, True),
        ("# Title\n...", {"path": "docs/tech-spec.md"}, True),
        ("/repo/docs/spec.md\n# Title\n...", None, True),  # a path header
        ("# Title\nsee spec.md\n/repo/docs/spec.md", None, False),  # lines, not the path
        ("spec.md is where the rules live\n...", None, False),
        ("# Title\n...", {"file_path": "/repo/docs/spec.md.bak"}, False),
        ("/repo/spec.md\n...", {"file_path": "/repo/README.md"}, False),  # metadata wins
    ],
)
def test_the_read_rule_matches_the_path_that_ends_in_spec_md_not_any_line(
    output: str, metadata: dict[str, Any] | None, matches: bool
) -> None:
    rules = rules_for(Settings())
    found = first_match(rules, "Read", output, output_path(output, metadata))
    assert (found is not None and found.id == "read-spec") is matches


def test_a_rule_with_a_path_pattern_never_matches_an_output_without_a_path() -> None:
    (compiled,) = compile_rules([rule("docs", "^Read", pathPattern="^docs/")])
    assert compiled.matches("Read", "text", "docs/a.md")
    assert not compiled.matches("Read", "text", "src/a.py")
    assert not compiled.matches("Read", "docs/a.md is mentioned here", None)


def test_overlapping_rules_are_a_warning_that_names_both(caplog: pytest.LogCaptureFixture) -> None:
    broad = rule("any-bash", "^Bash", attention=0.3)
    tests = rule("pytest-runs", "^Bash$", "pytest|FAILED", attention=0.9)
    reads = rule("reads", "^Read", attention=0.4)
    with caplog.at_level(logging.WARNING, logger="gql_memory.memory.extraction.rules"):
        rules_for(Settings(extraction_rules=[broad, tests, reads]))  # what startup calls
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert "'any-bash' and 'pytest-runs' overlap" in warning.getMessage()
    assert "tool 'Bash' with output 'pytest'" in warning.getMessage()


@pytest.mark.parametrize(
    ("first", "second", "example"),
    [
        (
            rule("md", "^Read", pathPattern=r"\.md$"),
            rule("docs", "(?i)read", pathPattern="docs/"),
            "docs/.md",
        ),
        (rule("err", "Grep", "(?i)error"), rule("warn", "^Grep$", "ERROR|WARN"), "ERROR"),
        (rule("mcp", "(?i)^mcp__"), rule("gh", "^mcp__github", "issue"), "issue"),
    ],
)
def test_an_overlap_comes_with_an_example_both_rules_match(
    first: dict[str, Any], second: dict[str, Any], example: str
) -> None:
    [overlap] = find_overlaps(compile_rules([first, second]))
    assert (overlap.first, overlap.second) == (first["id"], second["id"])
    assert example in str(overlap)
    a, b = compile_rules([first, second])
    assert a.matches(overlap.tool_name, overlap.output or "", overlap.path)
    assert b.matches(overlap.tool_name, overlap.output or "", overlap.path)


def test_the_default_rules_do_not_overlap(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        compile_rules(list(DEFAULT_RULES))
    assert find_overlaps(rules_for(Settings())) == []
    assert caplog.records == []


def test_rules_that_cannot_match_the_same_output_are_no_overlap() -> None:
    rules = compile_rules(
        [
            rule("bash", "^Bash"),
            rule("read", "^Read"),
            rule("grep-a", "^Grep", "^a"),
            rule("grep-b", "^Grep", "^b"),
        ]
    )
    assert find_overlaps(rules) == []


def test_first_matching_rule_wins() -> None:
    broad = rule("broad", "^Bash", attention=0.3)
    narrow = rule("narrow", "^Bash", "pytest", attention=0.9)
    assert first_match(compile_rules([narrow, broad]), "Bash", "pytest -q").id == "narrow"
    assert first_match(compile_rules([broad, narrow]), "Bash", "pytest -q").id == "broad"
    assert first_match(compile_rules([narrow, broad]), "Bash", "ls").id == "broad"


def test_rules_accept_snake_case_and_an_absent_content_pattern() -> None:
    (compiled,) = compile_rules(
        [{"id": "any", "tool_pattern": "(?i)^mcp__", "attention": 1, "summarizer": "stdoutSummary"}]
    )
    assert compiled.content_pattern is None and compiled.attention == 1.0
    assert compiled.matches("MCP__github__search", "anything at all")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([rule("no-backrefs", r"(a)\1")], "'no-backrefs': toolPattern"),
        ([rule("no-lookahead", "Bash", "git(?= commit)")], "'no-lookahead': contentPattern"),
        ([rule("too-big", "Bash", "a{1000}{1000}")], "'too-big'"),
        ([rule("unbalanced", "Bash(")], "'unbalanced'"),
        ([rule("loud", "Bash", attention=1.5)], "'loud': attention"),
        ([rule("flag", "Bash", attention=True)], "'flag': attention"),
        ([rule("who", "Bash", summarizer="llm")], "'who': unknown summarizer 'llm'"),
        ([rule("typo", "Bash", contentPatern="x")], "'typo': contentPatern"),
        ([rule("ok", "Read"), {"toolPattern": "x"}], "rule #2 (no id)"),
        ([rule("twice", "Read"), rule("twice", "Grep")], "'twice': the id is used twice"),
        (["Read"], "rule #1 (no id): a rule must be a table"),
        ("Read", "must be a list"),
    ],
)
def test_a_bad_rule_is_refused_with_its_name(rules: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        compile_rules(rules)
    assert message in str(error.value)


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    """(a+)+$ has 2^n ways to fail on n a's and a "!": a backtracking engine never returns
    here. RE2's cost grows with the output alone: 16 times the output, about 16 times the
    CPU time (a quadratic engine: 256)."""
    (compiled,) = compile_rules([rule("redos", "^Bash", "(a+)+$")])

    def matches(output: str) -> bool:
        return compiled.matches("Bash", output)

    for shape in (lambda n: "a" * n, lambda n: "a" * n + "!", lambda n: "ab" * (n // 2)):
        assert growth(matches, shape(62_500), shape(1_000_000)) < 64
    assert matches("a" * 100_000) and not matches("a" * 100_000 + "!")


def test_rules_are_compiled_once_per_rule_set() -> None:
    settings = Settings(extraction_rules=[rule("x", "^X")])
    assert rules_for(settings) is rules_for(Settings(extraction_rules=[rule("x", "^X")]))
    assert rules_for(Settings()) is rules_for(Settings())


TOML_RULES = """
working_memory_capacity = 12

[[extraction_rules]]
id = "pytest-failures"
toolPattern = "^Bash$"
contentPattern = '(?m)^FAILED '
attention = 0.85
summarizer = "stdoutSummary"

[[extraction_rules]]
id = "any-read"
tool_pattern = "^Read"
attention = 0.4
summarizer = "firstLast500"
"""

YAML_RULES = """
extraction_rules:
  - id: pytest-failures
    toolPattern: ^Bash$
    contentPattern: (?m)^FAILED
    attention: 0.85
    summarizer: stdoutSummary
  - id: any-read
    toolPattern: ^Read
    attention: 0.4
    summarizer: firstLast500
"""


@pytest.mark.parametrize(("name", "text"), [("rules.toml", TOML_RULES), ("r.yaml", YAML_RULES)])
def test_rules_come_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    monkeypatch.setenv("GQL_MEMORY_CONFIG", str(path))
    rules = rules_for(Settings())
    assert [(r.id, r.attention) for r in rules] == [("pytest-failures", 0.85), ("any-read", 0.4)]
    assert first_match(rules, "Bash", "...\nFAILED tests/test_x.py::test_y\n").id == (
        "pytest-failures"
    )


def test_rules_check_accepts_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(TOML_RULES)
    result = CliRunner().invoke(cli, ["rules", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "2 extraction rules OK" in result.output
    assert "pytest-failures" in result.output and "any-read" in result.output


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.toml", TOML_RULES.replace("(?m)^FAILED ", r"(?m)^(FAILED)\1"), "pytest-failures"),
        ("bad.yaml", YAML_RULES.replace("0.4", "4"), "'any-read': attention"),
        ("empty.toml", "working_memory_capacity = 3\n", "has no extraction_rules"),
        ("broken.toml", "[[extraction_rules]\nid = ", "not valid TOML/YAML"),
    ],
)
def test_rules_check_fails_naming_the_rule(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(cli, ["rules", "check", str(path)])
    assert result.exit_code != 0
    assert message in result.output


def test_rules_check_of_a_missing_file_fails(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["rules", "check", str(tmp_path / "nope.toml")])
    assert result.exit_code != 0 and "no such config file" in result.output


async def test_server_startup_aborts_on_a_bad_rule() -> None:
    settings = Settings(
        database_url="postgresql://nobody@127.0.0.1:1/none",
        extraction_rules=[rule("fine", "^Read"), rule("broken", "Bash", "(?<=x)y")],
    )
    app = create_app(settings)
    with pytest.raises(ConfigurationError, match="extraction rule 'broken'"):
        async with app.router.lifespan_context(app):
            pass


async def test_library_connect_aborts_on_a_bad_rule_before_touching_the_database() -> None:
    settings = Settings(extraction_rules=[rule("broken", "^Read", attention=-0.1)])
    store = AsyncMemoryStore("postgresql://nobody@127.0.0.1:1/none", settings=settings)
    with pytest.raises(ConfigurationError, match="extraction rule 'broken'"):
        await store.connect()
