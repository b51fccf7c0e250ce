"""Summarizers of the extraction pipeline (SPEC §3.8): a tool output becomes a short item.

Each summarizer reads a bounded part of the output (at most ``scan_chars`` characters, and
usually only a small window at each end), so a huge output costs little. Cuts are made only
at "safe" boundaries (whitespace or JSON/code punctuation), never inside a token: a secret is
either kept whole, where the redaction gate recognises it, or dropped whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from gql_memory.config import (
    FIRST_LAST_CHARS,
    MATCH_SUMMARY_FILES,
    MATCH_SUMMARY_SAMPLES,
    STDOUT_HEAD_LINES,
    STDOUT_LINE_CHARS,
    STDOUT_TAIL_LINES,
)

Summarizer = Callable[[str, int], str]
"""(output, scan_chars) -> summary."""

# Characters that never occur inside a secret token (base64, hex, JWT, URL, e-mail), so a cut
# next to one of them cannot leave half a secret behind.
_SAFE_CUT = frozenset(" \t\r\n\f\v,;\"'`<>()[]{}|")


def _omitted(count: int, unit: str) -> str:
    return f"\n… [{count} {unit} omitted] …\n"


def safe_head(text: str, limit: int) -> str:
    """The longest prefix of at most ``limit`` characters that does not end inside a token."""
    if len(text) <= limit:
        return text
    if text[limit] in _SAFE_CUT:
        return text[:limit]
    for i in range(limit - 1, -1, -1):
        if text[i] in _SAFE_CUT:
            return text[: i + 1]
    return ""


def safe_tail(text: str, limit: int) -> str:
    """The longest suffix of at most ``limit`` characters that does not start inside a token."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    if text[start - 1] in _SAFE_CUT:
        return text[start:]
    for i in range(start, len(text)):
        if text[i] in _SAFE_CUT:
            return text[i:]
    return ""


def first_last_500(output: str, scan_chars: int) -> str:
    """The first and the last 500 characters (the whole output when it is that short)."""
    if len(output) <= 2 * FIRST_LAST_CHARS:
        return output
    head = safe_head(output, FIRST_LAST_CHARS)
    tail = safe_tail(output, FIRST_LAST_CHARS)
    return head + _omitted(len(output) - len(head) - len(tail), "characters") + tail


def _file_of(line: str) -> str | None:
    """The file name of a grep line ``file:line:text`` or ``file:text``, if it has one."""
    colon = line.find(":")
    if colon <= 0:
        return None
    name = line[:colon]
    if any(c.isspace() for c in name):
        return None
    rest = line[colon + 1 :]
    line_number = rest.split(":", 1)[0]
    # "error: text" is a match without a file; "src/a.py:..." and "Makefile:12:..." have one.
    if "/" in name or "." in name or (line_number.isdigit() and ":" in rest):
        return name
    return None


def match_count_summary(output: str, scan_chars: int) -> str:
    """Grep output -> the number of matching lines, the distinct files, and a few samples."""
    scanned = output[:scan_chars]
    # A cut in the middle of the last line would count half a match: drop the partial line.
    if len(output) > scan_chars and "\n" in scanned:
        scanned = scanned[: scanned.rindex("\n")]
    files: Counter[str] = Counter()
    matches = 0
    samples: list[str] = []
    for line in scanned.splitlines():
        if not line.strip() or line == "--":
            continue
        matches += 1
        name = _file_of(line)
        if name is not None:
            files[name] += 1
        if len(samples) < MATCH_SUMMARY_SAMPLES:
            samples.append(_line(line))
    header = f"{matches} matching lines in {len(files)} files"
    if len(scanned) < len(output):
        header += f" (counted in the first {len(scanned)} of {len(output)} characters)"
    parts = [header]
    if files:
        listed = [f"{name} ({count})" for name, count in files.most_common(MATCH_SUMMARY_FILES)]
        more = len(files) - len(listed)
        parts.append("files: " + ", ".join(listed) + (f", … and {more} more" if more else ""))
    if samples:
        parts.append("first matches:\n" + "\n".join(samples))
    return "\n".join(parts)


def _line(line: str, length: int | None = None) -> str:
    """One line, cut (at a safe boundary) to the line limit; ``length`` is its full length."""
    length = len(line) if length is None else length
    if length <= STDOUT_LINE_CHARS:
        return line
    return safe_head(line, STDOUT_LINE_CHARS) + f" … [{length} characters]"


def _lines_from_start(text: str, count: int) -> list[str]:
    """The first ``count`` lines, each read only up to the line limit."""
    lines: list[str] = []
    pos = 0
    while len(lines) < count and pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        lines.append(_line(text[pos : min(end, pos + STDOUT_LINE_CHARS + 1)], end - pos))
        pos = end + 1
    return lines


def _lines_from_end(text: str, count: int) -> list[str]:
    """The last ``count`` lines, in order, each read only up to the line limit."""
    lines: list[str] = []
    end = len(text) - 1 if text.endswith("\n") else len(text)
    while len(lines) < count and end >= 0:
        start = text.rfind("\n", 0, end) + 1
        lines.append(_line(text[start : min(end, start + STDOUT_LINE_CHARS + 1)], end - start))
        end = start - 1
    return lines[::-1]


def stdout_summary(output: str, scan_chars: int) -> str:
    """A bounded head and tail of stdout: 20 lines each, each line at most 200 characters.

    Only the kept lines are copied (up to the line limit each); the rest is merely counted.
    """
    keep = STDOUT_HEAD_LINES + STDOUT_TAIL_LINES
    total_lines = output.count("\n") + (0 if output.endswith("\n") else 1)
    if total_lines <= keep:
        return "\n".join(_lines_from_start(output, keep))
    head = _lines_from_start(output, STDOUT_HEAD_LINES)
    tail = _lines_from_end(output, STDOUT_TAIL_LINES)
    return (
        f"[stdout: {total_lines} lines, {len(output)} characters]\n"
        + "\n".join(head)
        + _omitted(total_lines - len(head) - len(tail), "lines")
        + "\n".join(tail)
    )


SUMMARIZERS: dict[str, Summarizer] = {
    "firstLast500": first_last_500,
    "matchCountSummary": match_count_summary,
    "stdoutSummary": stdout_summary,
}


def summarize(name: str, output: str, scan_chars: int) -> str:
    """Apply the named summarizer (names are validated when the rules are loaded)."""
    return SUMMARIZERS[name](output, scan_chars)
