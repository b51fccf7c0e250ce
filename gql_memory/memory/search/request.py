"""Search step 1, validation: every argument of a search checked, in the order callers see
their errors, and every default taken from the settings (the only source of defaults)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gql_memory.config import Settings
from gql_memory.errors import ValidationError
from gql_memory.memory.search.relevance import require_min_relevance, search_floor
from gql_memory.memory.search.types import Fusion, MemoryLayer, SearchRequest, SearchWeights
from gql_memory.memory.validation import (
    require_query,
    require_session_id,
    require_storable_moment,
)
from gql_memory.memory.validity import require_as_of, require_aware, require_period
from gql_memory.memory.vectors import require_top_k


def search_request(
    settings: Settings,
    query: str,
    top_k: int,
    session_id: str | None,
    layers: Sequence[MemoryLayer | str],
    weights: SearchWeights | None,
    fusion: Fusion | str | None,
    *,
    as_of: datetime | None,
    since: datetime | None,
    until: datetime | None,
    reference_time: datetime | None,
    interpret_time: bool | None,
    min_relevance: float | None,
) -> SearchRequest:
    """The validated search (see HybridSearch.search for the arguments)."""
    query = require_query(query, settings.search_max_query_words)
    reference_time = require_reference_time(reference_time)
    if reference_time is None and as_of is not None:
        reference_time = as_of  # its days are the caller's (require_as_of makes it UTC)
    as_of = require_as_of(as_of)
    since, until = require_period(since, until)
    top_k = require_top_k(top_k)
    if session_id is not None:
        session_id = require_session_id(session_id)
    chosen = require_layers(layers)
    weights = require_weights(weights, settings)
    fusion = require_fusion(fusion, settings)
    floor = require_min_relevance(min_relevance, search_floor(settings))
    return SearchRequest(
        query=query,
        top_k=top_k,
        session_id=session_id,
        layers=chosen,
        weights=weights,
        fusion=fusion,
        as_of=as_of,
        since=since,
        until=until,
        reference_time=reference_time,
        interpret_time=require_interpret_time(interpret_time, settings),
        min_relevance=floor,
    )


def require_weights(weights: SearchWeights | None, settings: Settings) -> SearchWeights:
    """Both legs' weights: those given, and the operator's for a leg left None (the settings
    are the only source of defaults)."""
    if weights is None:
        return SearchWeights(settings.search_vector_weight, settings.search_text_weight)
    weights = SearchWeights(
        settings.search_vector_weight if weights.vector is None else weights.vector,
        settings.search_text_weight if weights.text is None else weights.text,
    )
    for name in ("vector", "text"):
        value = getattr(weights, name)
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValidationError(f"weights.{name} must be a finite number >= 0")
    if weights.vector == 0 and weights.text == 0:
        raise ValidationError("weights must not both be 0")
    return weights


def require_fusion(fusion: Fusion | str | None, settings: Settings) -> Fusion:
    if fusion is None:
        return Fusion(settings.search_fusion.upper())
    try:
        return fusion if isinstance(fusion, Fusion) else Fusion(str(fusion).upper())
    except ValueError as exc:
        raise ValidationError("fusion must be DBSF or RRF") from exc


def require_layers(layers: Sequence[MemoryLayer | str]) -> list[MemoryLayer]:
    if not layers:
        raise ValidationError("layers must name at least one layer")
    try:
        chosen = [x if isinstance(x, MemoryLayer) else MemoryLayer(str(x)) for x in layers]
    except ValueError as exc:
        raise ValidationError("layers must be INSIGHT, EPISODE or RAW") from exc
    return list(dict.fromkeys(chosen))


def require_reference_time(value: Any) -> datetime | None:
    """The instant relative expressions are read against, timezone kept (a day is the
    caller's day: "yesterday" at 01:00+09:00 is the day before in Tokyo, not in UTC)."""
    if value is None:
        return None
    require_storable_moment(require_aware(value, "referenceTime"), "referenceTime")
    return value


def require_interpret_time(value: Any, settings: Settings) -> bool:
    if value is None:
        return settings.search_interpret_time
    if not isinstance(value, bool):
        raise ValidationError("interpretTime must be true or false")
    return value
