"""The ``JSON`` scalar's values at the boundary between GraphQL and the domain.

strawberry types a ``JSON`` field as ``NewType("JSON", object)``; the domain's metadata and
properties are ``dict[str, Any] | None``. Outputs are wrapped with ``JSON(value)`` (free at
run time); inputs pass through ``json_object``.
"""

from __future__ import annotations

from typing import Any, cast

from strawberry.scalars import JSON


def json_object(value: JSON | None) -> dict[str, Any] | None:
    """An input's JSON value, handed to the domain as it came: the domain refuses anything
    but an object (``memory.validation.require_json_object``), with the field's name."""
    return cast("dict[str, Any] | None", value)
