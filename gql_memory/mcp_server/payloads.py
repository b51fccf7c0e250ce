"""Domain objects as JSON-ready dicts for MCP results (dates ISO-8601, enums by value)."""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Any


def plain(value: Any) -> Any:
    """A dataclass, enum, datetime, list or dict turned into JSON-ready values, recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def pick(value: Any, *names: str) -> dict[str, Any]:
    """Only some fields of a domain object, JSON-ready."""
    return {name: plain(getattr(value, name)) for name in names}
