"""Input checks shared by every layer. Messages are part of the API: callers see them."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from gql_memory.config import MAX_QUERY_CHARS
from gql_memory.errors import ValidationError

MAX_JSON_DEPTH = 32
MAX_JSON_BYTES = 1024 * 1024
# asyncpg stores Python's datetime.min / datetime.max as -infinity / infinity (and reads them
# back without an offset): stored moments stay a day inside them.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def check_storable(value: str, field: str) -> str:
    """PostgreSQL text cannot hold NUL and UTF-8 cannot hold lone surrogates: refuse both."""
    if "\x00" in value:
        raise ValidationError(f"{field} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{field} contains invalid Unicode (lone surrogate)") from exc
    return value


def in_utc(moment: datetime, field: str) -> datetime:
    """An aware ``moment`` in UTC. One that UTC cannot hold (0001-01-01T00:00+14:00 is in year
    0, 9999-12-31T23:59-14:00 in year 10000) is the caller's error, not the driver's."""
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ValidationError(f"{field} is out of range") from exc


def require_storable_moment(moment: datetime, field: str) -> datetime:
    """An aware moment to store: in UTC and a day inside Python's own range (see EARLIEST)."""
    utc = in_utc(moment, field)
    if not EARLIEST <= utc <= LATEST:
        raise ValidationError(f"{field} must be between 0001-01-02 and 9999-12-30 (UTC)")
    return utc


def require_text(value: Any, field: str, *, max_length: int | None = None) -> str:
    """A non-empty string (not just whitespace), storable, and at most ``max_length`` chars."""
    if value is None:
        raise ValidationError(f"{field} is required")
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise ValidationError(f"{field} must not be empty")
    if max_length is not None and len(value) > max_length:
        raise ValidationError(f"{field} must be at most {max_length} characters")
    return check_storable(value, field)


# A word as the query-size limit counts it: what a text-search parser splits at least.
_WORD = re.compile(r"\w+")


def require_query(value: Any, max_words: int) -> str:
    """A search query: text of at most MAX_QUERY_CHARS characters and ``max_words`` distinct
    words (the text leg's work grows with them; GQL_MEMORY_SEARCH_MAX_QUERY_WORDS)."""
    query = require_text(value, "query", max_length=MAX_QUERY_CHARS)
    words = len({word.casefold() for word in _WORD.findall(query)})
    if words > max_words:
        raise ValidationError(
            f"query has {words} distinct words; at most {max_words} are searched "
            "(GQL_MEMORY_SEARCH_MAX_QUERY_WORDS): ask with the words that matter"
        )
    return query


def require_session_id(value: Any) -> str:
    return require_text(value, "sessionId", max_length=255)


def require_importance(value: Any, field: str = "Importance") -> float:
    """The seed's messages: 'Importance must be >= 0.0' / 'Importance must be <= 1.0'."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{field} must be a number")
    value = float(value)
    if math.isnan(value):
        raise ValidationError(f"{field} must be a number")
    if value < 0.0:
        raise ValidationError(f"{field} must be >= 0.0")
    if value > 1.0:
        raise ValidationError(f"{field} must be <= 1.0")
    return value


def require_json_object(value: Any, field: str) -> dict[str, Any] | None:
    """None, or a JSON object that PostgreSQL's jsonb can store (no NUL, finite numbers)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationError(f"{field} must be a JSON object")
    _check_tree(value, field, 0)
    try:
        encoded = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field} must be JSON with finite numbers") from exc
    if len(encoded.encode("utf-8")) > MAX_JSON_BYTES:
        raise ValidationError(f"{field} must be at most {MAX_JSON_BYTES} bytes of JSON")
    return value


def _check_tree(value: Any, field: str, depth: int) -> None:
    """Bounded depth, string keys, and every string storable in jsonb.

    jsonb refuses NUL and lone surrogates (as "\\u0000" / "\\ud800" escapes) with an error
    that would otherwise surface as an internal one; fuzzing found the surrogate case.
    """
    if depth > MAX_JSON_DEPTH:
        raise ValidationError(f"{field} is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, str):
        check_storable(value, field)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{field} keys must be strings")
            check_storable(key, field)
            _check_tree(item, field, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_tree(item, field, depth + 1)


_ID = re.compile(r"[0-9]{1,19}")


def require_id(value: Any, field: str = "id") -> int:
    """Database ids are positive 64-bit integers; GraphQL sends them as strings. Only plain
    ASCII digits: no sign, spaces, underscores or other scripts' digits ("1_0", " 1", "١")."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _ID.fullmatch(value):
        number = int(value)
    else:
        raise ValidationError(f"{field} must be a numeric id")
    if not 0 < number < 2**63:
        raise ValidationError(f"{field} must be a positive 64-bit integer")
    return number


def require_page_size(first: Any, default: int, maximum: int) -> int:
    if first is None:
        return default
    if isinstance(first, bool) or not isinstance(first, int):
        raise ValidationError("first must be an integer")
    if not 1 <= first <= maximum:
        raise ValidationError(f"first must be between 1 and {maximum}")
    return first


# One rule for every way in: API keys, the library (stores and ``scoped``), transcript
# imports, the MCP bridge, the CLI. Matched whole: "$" alone would let a trailing newline in.
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,254}")


def require_namespace(value: Any) -> str:
    """A namespace every entry point accepts (so data never lands where no key can read it)."""
    if not isinstance(value, str) or not NAMESPACE_PATTERN.fullmatch(value):
        raise ValidationError(
            f"namespace {str(value)[:60]!r} is invalid: it must be 1-255 characters, letters, "
            "digits and . _ : @ - (starting with a letter or digit)"
        )
    return value
