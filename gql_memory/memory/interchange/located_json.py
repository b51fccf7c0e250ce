"""JSON documents read with the line each record starts on, for errors that name it."""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import Any

from gql_memory.errors import ValidationError
from gql_memory.memory.importer import _json, _text_of

_SPACE = " \t\n\r"


def invalid(where: str, message: str) -> ValidationError:
    return ValidationError(f"{where}: {message}")


def read_text(path: Path) -> str:
    """The file as UTF-8 text (undecodable bytes name their line)."""
    return _text_of(path)


def parse_json(text: str, where: str | None = None) -> Any:
    """json.loads refusing NaN and Infinity. A record's failure names ``where`` (its line);
    a whole document's (no ``where``) names the line JSON's error names."""
    if where is None:
        return _json(text, "line 1", document=True)
    return _json(text, where)


class LineIndex:
    """Character offsets of ``text`` to line numbers."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def item_lines(text: str, path: tuple[str, ...]) -> list[Any]:
    """The line each item of the list at ``path`` starts on, in a document known to be valid
    JSON. ``path`` names object keys, and ``*`` for every item of a list: ``("agents", "*",
    "messages", "*")`` gives one list of lines per agent. A path that is not there gives []."""
    index = LineIndex(text)
    decoder = json.JSONDecoder()

    def skip(position: int) -> int:
        while position < len(text) and text[position] in _SPACE:
            position += 1
        return position

    def walk(position: int, rest: tuple[str, ...]) -> tuple[Any, int]:
        """(lines found in the value at ``position``, where the value ends)."""
        position = skip(position)
        if not rest:
            return index.line(position), decoder.raw_decode(text, position)[1]
        opener = text[position]
        if rest[0] == "*" and opener == "[":
            found: list[Any] = []
            position = skip(position + 1)
            while text[position] != "]":
                lines, position = walk(position, rest[1:])
                found.append(lines)
                position = skip(position)
                if text[position] == ",":
                    position = skip(position + 1)
            return found, position + 1
        if rest[0] != "*" and opener == "{":
            result: Any = []
            position = skip(position + 1)
            while text[position] != "}":
                key, position = decoder.raw_decode(text, position)
                position = skip(skip(position) + 1)  # past ":"
                if key == rest[0]:
                    result, position = walk(position, rest[1:])
                else:
                    position = decoder.raw_decode(text, position)[1]
                position = skip(position)
                if text[position] == ",":
                    position = skip(position + 1)
            return result, position + 1
        return [], decoder.raw_decode(text, position)[1]

    return walk(0, path)[0]
