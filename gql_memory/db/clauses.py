"""Small SQLAlchemy Core expressions the memory layers share (see the SQL convention in
CONTRIBUTING.md: Core for single-table CRUD, ``text()`` for the statements Core cannot say
cleanly)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Text, any_, bindparam, cast
from sqlalchemy.dialects.postgresql import ARRAY, JSONB


def any_of(column: ColumnElement[Any], values: Iterable[Any]) -> ColumnElement[bool]:
    """``column = ANY($n)``: the values bound as one array, so the statement (and the plan
    PostgreSQL caches for it) is the same however many there are, unlike ``IN (...)``."""
    return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))


def jsonb(value: dict[str, Any] | None) -> ColumnElement[Any]:
    """A JSON object bound as text and cast to jsonb; None stays SQL NULL (the JSONB type
    would bind None as the JSON value ``null``)."""
    return cast(bindparam(None, None if value is None else json.dumps(value), type_=Text), JSONB)
