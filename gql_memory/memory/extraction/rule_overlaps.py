"""Extraction rules that can match the same tool output (seed 002 ADR-004: "warn on
overlapping patterns at startup").

First match wins, so where two rules overlap the later one silently loses. RE2 cannot intersect
two expressions, so this looks for a witness: it derives sample strings from each pattern (its
literals, the first member of a class, the fewest repetitions, one sample per alternative, and
pairs of samples joined) and reports an overlap only when a sample really matches both rules.
Every reported overlap is real and comes with its example; an
overlap the samples miss goes unreported.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gql_memory.memory.extraction.rule import ExtractionRule

try:  # the stdlib's regex parser reads RE2's common syntax; it is private, so it is optional
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - a Python without them only loses the warning
    sre = sre_parse = None

MAX_SAMPLES = 32  # samples kept per pattern (alternatives multiply)
DIMENSIONS = ("tool", "path", "content")


@dataclass(frozen=True)
class Overlap:
    """Two rules that match one example; ``first`` wins there."""

    first: str
    second: str
    tool_name: str
    path: str | None  # None: neither rule looks at the path
    output: str | None  # None: neither rule looks at the output

    def __str__(self) -> str:
        where = f"tool {self.tool_name!r}"
        if self.path is not None:
            where += f", path {self.path!r}"
        where += " with any output" if self.output is None else f" with output {self.output!r}"
        return (
            f"extraction rules {self.first!r} and {self.second!r} overlap: {where} matches both, "
            f"and {self.first!r} wins there (first match); reorder or narrow them if "
            f"{self.second!r} should apply"
        )


def find_overlaps(rules: Sequence[ExtractionRule]) -> list[Overlap]:
    """Every pair of rules (in priority order) for which a matching example was found."""
    found = []
    for index, first in enumerate(rules):
        for second in rules[index + 1 :]:
            overlap = _overlap(first, second)
            if overlap is not None:
                found.append(overlap)
    return found


def _overlap(first: ExtractionRule, second: ExtractionRule) -> Overlap | None:
    witnesses = []
    for dimension in DIMENSIONS:
        witness = _shared_match(_part(first, dimension), _part(second, dimension))
        if witness is None:
            return None
        witnesses.append(witness)
    tool_name, path, output = witnesses
    path_given = first.path_regex is not None or second.path_regex is not None
    output_given = first.content_regex is not None or second.content_regex is not None
    return Overlap(
        first.id,
        second.id,
        tool_name,
        path if path_given else None,
        output if output_given else None,
    )


def _part(rule: ExtractionRule, dimension: str) -> tuple[str | None, Any | None]:
    pattern: str | None = getattr(rule, f"{dimension}_pattern")
    return pattern, getattr(rule, f"{dimension}_regex")


def _shared_match(
    first: tuple[str | None, Any | None], second: tuple[str | None, Any | None]
) -> str | None:
    """A string both (pattern, regex) pairs match (an absent pattern matches anything)."""
    regexes = [regex for _, regex in (first, second) if regex is not None]
    sampled = [samples(pattern) for pattern, regex in (first, second) if regex and pattern]
    candidates = [""] if not regexes else [s for some in sampled for s in some]
    if len(sampled) == 2:  # one sample of each, joined: "docs/" and ".md" give "docs/.md"
        pairs = itertools.product(sampled[0][:8], sampled[1][:8])
        candidates.extend(joined for a, b in pairs for joined in (a + b, b + a))
    return next((c for c in candidates if all(r.search(c) for r in regexes)), None)


def samples(pattern: str) -> list[str]:
    """Strings built from the pattern that are likely (not certain) to match it."""
    if sre_parse is None:
        return []
    try:
        return _sequence(list(sre_parse.parse(pattern)))
    except Exception:  # syntax only RE2 knows, or a construct not sampled: no samples
        return []


def _sequence(items: Iterable[tuple[Any, Any]]) -> list[str]:
    result = [""]
    for op, value in items:
        options = _item(op, value)
        result = [
            a + b for a, b in itertools.islice(itertools.product(result, options), MAX_SAMPLES)
        ]
    return result


def _item(op: Any, value: Any) -> list[str]:
    if op is sre.LITERAL:
        return [chr(value)]
    if op is sre.NOT_LITERAL:
        return ["a" if value != ord("a") else "b"]
    if op is sre.ANY:
        return ["a"]
    if op is sre.IN:
        return [_member(value)]
    if op is sre.AT:
        return [""]
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, _, body = value
        once = _sequence(body)
        return [s * max(low, 0) for s in once] if low else ["", *once]
    if op is sre.SUBPATTERN:
        return _sequence(value[-1])
    if op is sre.BRANCH:
        return [s for branch in value[1] for s in _sequence(branch)][:MAX_SAMPLES]
    raise ValueError(f"not sampled: {op}")


_CATEGORY_SAMPLES = {"DIGIT": "0", "NOT_DIGIT": "a", "WORD": "a", "NOT_WORD": " "}


def _member(items: list[tuple[Any, Any]]) -> str:
    """One character of a class (a guess for a negated class; the caller verifies)."""
    if items and items[0][0] is sre.NEGATE:
        return "a"
    for op, value in items:
        if op is sre.LITERAL:
            return chr(value)
        if op is sre.RANGE:
            return chr(value[0])
        if op is sre.CATEGORY:
            name = str(value).removeprefix("CATEGORY_")
            return _CATEGORY_SAMPLES.get(name, " ")
    raise ValueError("empty class")
