"""A search hit's calibrated relevance: the chance, in [0, 1], that it answers the query.

Fused scores rank the hits of one search; they say nothing across searches (the best hit of a
memory that knows nothing about the query still gets the best fused score). Relevance does:
a logistic model of three absolute signals, fitted on the LoCoMo dev split
(docs/benchmarks-retrieval.md, "Knowing when nothing is relevant"):

- the hit's cosine similarity with the query (the embedding model's own scale);
- the hit's BM25 text score, saturated to [0, 1) as ``s / (s + 5)``;
- the best cosine any memory of the namespace reached for the query: a query whose best match
  is weak is asked of a memory that does not hold its answer.

The fit's positives are the evidence turns among the top 10 hits of a question asked of its
own conversation; its negatives are the top 10 hits of the same question asked of another
conversation. Cosine scales differ between models, so a calibration belongs to one embedding
model; with a model that has none, relevance is the plain similarity (cosine and text signal
combined) and the default floor is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gql_memory.config import Settings
from gql_memory.errors import ValidationError

TEXT_SATURATION = 5.0  # a BM25 score of 5 counts as half the text signal

# What the model reads of a hit, in this order (``features``)
FEATURES = ("cosine", "cosine_margin", "text", "text_share", "best_cosine", "rank")


@dataclass(frozen=True)
class Calibration:
    """Weights of the logistic model (one per name of FEATURES; a missing one is 0), its
    bias, and the context's floor chosen with them on the dev splits."""

    bias: float
    weights: dict[str, float]
    floor: float

    def z(self, values: Sequence[float]) -> float:
        return self.bias + sum(
            self.weights.get(name, 0.0) * value
            for name, value in zip(FEATURES, values, strict=True)
        )


# Fitted 2026-11-26 on the LoCoMo dev split (760 questions, 5 conversations) with the turn
# vectors of memory.raw's defaults (the turn after the end of the previous one); see
# docs/benchmarks-retrieval.md and bench/locomo_recall.py.
CALIBRATIONS: dict[str, Calibration] = {
    "multilingual-e5-small": Calibration(
        bias=-122.031,
        weights={"cosine": 38.014, "text": 4.19, "best_cosine": 105.532},
        floor=0.02,
    ),
}


def calibration_for(model: str) -> Calibration | None:
    """The calibration of an embedding model, by its name (a provider's model name may carry
    its publisher: "intfloat/multilingual-e5-small")."""
    return CALIBRATIONS.get(model.rsplit("/", 1)[-1].lower())


def text_signal(text_score: float | None) -> float:
    return 0.0 if not text_score or text_score <= 0 else text_score / (text_score + TEXT_SATURATION)


def features(
    cosine: float,
    text_score: float | None,
    best_cosine: float,
    best_text_score: float | None,
    rank: int,
) -> tuple[float, ...]:
    """The numbers the model reads of a hit (FEATURES): its cosine and how far below the best
    cosine of the namespace it is; its text signal and its share of the best text score among
    the search's candidates; the namespace's best cosine (a query whose best match is weak is
    asked of a memory that lacks its answer); and 1/rank in its search."""
    text = text_score if text_score and text_score > 0 else 0.0
    share = text / best_text_score if best_text_score and best_text_score > 0 else 0.0
    return (
        cosine,
        cosine - best_cosine,
        text_signal(text),
        min(share, 1.0),
        best_cosine,
        1.0 / max(rank, 1),
    )


def relevance(
    cosine: float | None,
    text_score: float | None,
    best_cosine: float | None,
    calibration: Calibration | None,
    *,
    best_text_score: float | None = None,
    rank: int = 1,
) -> float:
    """The hit's relevance in [0, 1] (see the module's docstring)."""
    text = text_signal(text_score)
    if calibration is None or cosine is None or best_cosine is None:
        similarity = max(0.0, min(1.0, cosine or 0.0))
        return 1.0 - (1.0 - similarity) * (1.0 - text)
    z = calibration.z(features(cosine, text_score, best_cosine, best_text_score, rank))
    if z < -60:
        return 0.0
    return 1.0 / (1.0 + math.exp(-z))


def require_min_relevance(value: float | None, default: float) -> float:
    """The floor a search or context applies: the call's, else ``default``."""
    if value is None:
        return default
    # the range check also refuses nan and inf (and an int too large for a float)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValidationError("minRelevance must be a number from 0 to 1")
    return float(value) + 0.0  # -0.0 is 0


def search_floor(settings: Settings) -> float:
    """search's default floor: the operator's (GQL_MEMORY_SEARCH_MIN_RELEVANCE, 0: every hit as
    ranked). A search is a ranking: it returns topK hits unless asked to leave some out."""
    return settings.search_min_relevance


def context_floor(settings: Settings, calibration: Calibration | None) -> float:
    """context's default floor: the operator's (GQL_MEMORY_CONTEXT_MIN_RELEVANCE), else the
    model's calibrated floor (0 without a calibration). A context spends an agent's tokens:
    what a memory without the answer would offer is left out."""
    if settings.context_min_relevance is not None:
        return settings.context_min_relevance
    return calibration.floor if calibration is not None else 0.0
