"""Extraction rules (seed 002 ADR-004, ADR-006): data, not code; checked once, at startup.

A rule is ``{id, toolPattern, pathPattern, contentPattern, attention, summarizer}``. Rules
are tried in order and the first whose ``toolPattern`` is found in the tool name, whose
``pathPattern`` (optional) is found in the output's path and whose ``contentPattern``
(optional) is found in the output wins. Patterns are RE2 regular expressions: matching is
linear in the input, so no pattern — ``(a+)+$`` included — can hang the server on a large
output. Constructs RE2 cannot run in linear time (backreferences, lookaround) do not compile,
and such a rule stops startup with a message naming it; rules that can match the same output
are reported as a warning naming both (rule_overlaps.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import re2
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from gql_memory.config import MAX_RULE_PATTERN_CHARS, Settings, read_config_file
from gql_memory.errors import ConfigurationError
from gql_memory.memory.extraction.rule import ExtractionRule
from gql_memory.memory.extraction.rule_overlaps import find_overlaps
from gql_memory.memory.extraction.summarizers import SUMMARIZERS

log = logging.getLogger(__name__)

# The seed's three rules (ADR-004), in RE2 syntax. "Read + spec.md" is the seed's
# `filePath.endsWith('spec.md')`: it looks at the path that was read, not at the file's lines;
# "Grep + error" is case-insensitive.
DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {
        "id": "read-spec",
        "toolPattern": "^Read",
        "pathPattern": r"spec\.md$",
        "attention": 0.9,
        "summarizer": "firstLast500",
    },
    {
        "id": "grep-error",
        "toolPattern": "^Grep",
        "contentPattern": "(?i)error",
        "attention": 0.8,
        "summarizer": "matchCountSummary",
    },
    {
        "id": "bash-git-commit",
        "toolPattern": "^Bash",
        "contentPattern": "git commit",
        "attention": 0.7,
        "summarizer": "stdoutSummary",
    },
)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # re2 would print the failure to stderr; we raise it instead


class RuleSpec(BaseModel):
    """The data form of a rule, as written in the config file (camelCase or snake_case)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
    tool_pattern: str = Field(alias="toolPattern", min_length=1, max_length=MAX_RULE_PATTERN_CHARS)
    path_pattern: str | None = Field(
        default=None, alias="pathPattern", max_length=MAX_RULE_PATTERN_CHARS
    )
    content_pattern: str | None = Field(
        default=None, alias="contentPattern", max_length=MAX_RULE_PATTERN_CHARS
    )
    attention: float = Field(ge=0.0, le=1.0)
    summarizer: str


# Where tools put the path they read: Claude Code's Read/Edit/Write send ``file_path``.
PATH_METADATA_KEYS = ("file_path", "filePath", "path")
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: a longer first line is not a path header


def output_path(output: str, metadata: dict[str, Any] | None = None) -> str | None:
    """The path a tool output came from: the metadata's ``file_path`` (or ``filePath``,
    ``path``) when given, else the output's first line when it is a bare path (one word, as
    the path header a Read prints), else None."""
    for key in PATH_METADATA_KEYS:
        value = (metadata or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    first_line, newline, _ = output[:MAX_PATH_CHARS].lstrip().partition("\n")
    if not newline and len(output) > MAX_PATH_CHARS:
        return None  # the first line runs past the bound
    words = first_line.split()
    return words[0] if len(words) == 1 else None


def _label(raw: Any, position: int) -> str:
    rule_id = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(rule_id, str) and rule_id:
        return f"extraction rule {rule_id!r}"
    return f"extraction rule #{position} (no id)"


def _compile(label: str, field: str, pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ConfigurationError(
            f"{label}: {field} {pattern!r} is not a valid RE2 pattern ({reason}); RE2 runs in "
            "linear time and has no backreferences or lookaround — simplify the pattern"
        ) from None


def compile_rule(raw: Any, position: int) -> ExtractionRule:
    """One rule from its data form; ConfigurationError (naming the rule) when it is invalid."""
    label = _label(raw, position)
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{label}: a rule must be a table/mapping, got {raw!r}")
    try:
        spec = RuleSpec.model_validate(raw)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'rule'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ConfigurationError(f"{label}: {problems}") from None
    if spec.summarizer not in SUMMARIZERS:
        raise ConfigurationError(
            f"{label}: unknown summarizer {spec.summarizer!r} "
            f"(one of {', '.join(sorted(SUMMARIZERS))})"
        )
    return ExtractionRule(
        id=spec.id,
        tool_pattern=spec.tool_pattern,
        content_pattern=spec.content_pattern,
        attention=spec.attention,
        summarizer=spec.summarizer,
        tool_regex=_compile(label, "toolPattern", spec.tool_pattern),
        path_pattern=spec.path_pattern,
        path_regex=(
            _compile(label, "pathPattern", spec.path_pattern) if spec.path_pattern else None
        ),
        content_regex=(
            _compile(label, "contentPattern", spec.content_pattern)
            if spec.content_pattern
            else None
        ),
    )


def compile_rules(raw_rules: Sequence[Any]) -> tuple[ExtractionRule, ...]:
    """Validate and compile rules in priority order; the first problem aborts, naming the rule."""
    if isinstance(raw_rules, str | bytes | dict) or not isinstance(raw_rules, Sequence):
        raise ConfigurationError("extraction_rules must be a list of rules")
    rules: list[ExtractionRule] = []
    seen: set[str] = set()
    for position, raw in enumerate(raw_rules, start=1):
        rule = compile_rule(raw, position)
        if rule.id in seen:
            raise ConfigurationError(f"extraction rule {rule.id!r}: the id is used twice")
        seen.add(rule.id)
        rules.append(rule)
    for overlap in find_overlaps(rules):
        log.warning("%s", overlap)
    return tuple(rules)


@lru_cache(maxsize=16)
def _compiled(key: str) -> tuple[ExtractionRule, ...]:
    return compile_rules(json.loads(key))


def rules_for(settings: Settings) -> tuple[ExtractionRule, ...]:
    """The settings' rules (or the defaults), compiled once per distinct rule set."""
    raw = DEFAULT_RULES if settings.extraction_rules is None else settings.extraction_rules
    try:
        key = json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"extraction_rules is not plain data: {exc}") from None
    return _compiled(key)


def load_rule_file(path: Path) -> tuple[ExtractionRule, ...]:
    """The ``extraction_rules`` of a TOML or YAML config file (``gql-memory rules check``)."""
    data = read_config_file(path)  # ConfigurationError: missing, malformed, unknown keys
    if "extraction_rules" not in data:
        raise ConfigurationError(
            f"{path} has no extraction_rules (the built-in defaults would apply)"
        )
    return compile_rules(data["extraction_rules"])


def first_match(
    rules: Sequence[ExtractionRule], tool_name: str, output: str, path: str | None = None
) -> ExtractionRule | None:
    """The first rule (in priority order) that matches, or None."""
    return next((rule for rule in rules if rule.matches(tool_name, output, path)), None)
