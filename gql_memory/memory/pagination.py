"""Keyset pagination over (timestamp, id), newest first. Cursors are opaque strings."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from gql_memory.errors import ValidationError

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a newest-first listing."""

    items: list[T]
    cursors: list[str]
    has_next_page: bool
    has_previous_page: bool

    @property
    def end_cursor(self) -> str | None:
        return self.cursors[-1] if self.cursors else None

    @property
    def start_cursor(self) -> str | None:
        return self.cursors[0] if self.cursors else None


def encode_cursor(moment: datetime, row_id: int) -> str:
    raw = f"{moment.isoformat()}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, row_id = base64.urlsafe_b64decode(padded.encode()).decode().split("|")
        when, number = datetime.fromisoformat(moment).astimezone(UTC), int(row_id)
    except (ValueError, UnicodeDecodeError, OverflowError) as exc:
        raise ValidationError("after is not a valid cursor") from exc
    if not 0 < number < 2**63:
        raise ValidationError("after is not a valid cursor")
    return when, number
