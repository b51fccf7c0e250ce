"""An extraction rule once validated and compiled (rules.py makes them from data): which tool
outputs it matches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ExtractionRule:
    """A validated rule with its patterns compiled."""

    id: str
    tool_pattern: str
    content_pattern: str | None
    attention: float
    summarizer: str
    tool_regex: Any = field(repr=False, compare=False)  # re2._Regexp (no type stubs)
    content_regex: Any | None = field(repr=False, compare=False)
    path_pattern: str | None = None
    path_regex: Any | None = field(default=None, repr=False, compare=False)

    def matches(self, tool_name: str, output: str, path: str | None = None) -> bool:
        """Tool pattern found in the tool name, path pattern (if any) in the output's path
        (a rule with a path pattern never matches an output without a path) and content
        pattern (if any) in the output."""
        if self.tool_regex.search(tool_name) is None:
            return False
        if self.path_regex is not None and (path is None or not self.path_regex.search(path)):
            return False
        return self.content_regex is None or self.content_regex.search(output) is not None
