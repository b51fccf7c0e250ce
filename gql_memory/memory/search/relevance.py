"""A search hit's calibrated relevance: how likely, in [0, 1], it is to answer the query.

Fused scores rank the hits of one search; they say nothing across searches (the best hit of a
memory that knows nothing about the query still gets the best fused score), nor how far
apart two hits are. Relevance does, in two parts (``Calibration``), fitted per embedding
model on the dev splits (docs/benchmarks-retrieval.md, "Knowing when nothing is relevant"
and "Relevance per hit"):

- whether the namespace holds what answers the query, and this hit with it: a logistic model
  of the hit's cosine, its BM25 text score saturated to [0, 1) as ``s / (s + 5)``, and the
  best cosine any memory of the namespace reached for the query (a query whose best match is
  weak is asked of a memory that does not hold its answer). Its negatives are the hits of
  each question asked of another conversation;
- which of the search's hits it is: a logistic model of the hit's distance to the best
  cosine, its share of the best text score, its cosine, text signal and rank, fitted on the
  evidence against the other hits of the same question, taken relative to the search's best.

So "I am allergic to peanuts." no longer shares the relevance of "My cat is called Miso." for
"What is my cat called?" because both live in a memory that matches the question well.
Cosine scales differ between models, so a calibration belongs to one embedding model; with a
model that has none, relevance is the plain similarity (cosine and text signal combined) and
the default floor is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gql_memory.config import Settings
from gql_memory.errors import ValidationError

TEXT_SATURATION = 5.0  # a BM25 score of 5 counts as half the text signal

# What each part of the model reads (``features``)
QUERY_FEATURES = ("cosine", "text", "best_cosine")
HIT_FEATURES = ("cosine", "cosine_margin", "text", "text_share", "rank")


@dataclass(frozen=True)
class Logistic:
    """A logistic model: its bias and a weight per feature name (a missing one is 0)."""

    bias: float
    weights: dict[str, float]

    def probability(self, values: dict[str, float]) -> float:
        z = self.bias + sum(w * values[name] for name, w in self.weights.items())
        if z < -60:
            return 0.0
        return 1.0 / (1.0 + math.exp(-min(z, 60.0)))


@dataclass(frozen=True)
class Calibration:
    """Relevance in two parts, multiplied.

    ``query``: the chance that the hit answers the query, read from the hit's cosine and text
    signal and from the best cosine the namespace reached (a memory without the answer
    matches weakly everywhere). Fitted with the hits of each question asked of another
    memory as negatives, it tells a memory that holds the answer from one that does not.

    ``hit``: the chance that this hit, rather than the others of the same search, is the
    answer, read from its distance to the best cosine, its share of the best text score and
    its rank. Fitted on the hits of each question asked of its own memory (evidence against
    the rest), it tells the answer from the other memories of the namespace. It enters as a
    ratio to the best such chance among the search's hits: the best hit keeps its ``query``
    chance, a hit far less likely than the best gets a small share of its own.

    ``floor``: the context's default minRelevance, chosen with them on the dev splits."""

    query: Logistic
    hit: Logistic
    floor: float


# Fitted on the dev splits with the turn vectors of memory.raw's defaults (bench/
# relevance_fit.py, cross-validated by conversation / question; docs/benchmarks-retrieval.md,
# "Relevance per hit"): ``query`` 2026-11-26 on LoCoMo (760 questions), ``hit`` 2026-11-28 on
# LoCoMo and LongMemEval-S.
CALIBRATIONS: dict[str, Calibration] = {
    "multilingual-e5-small": Calibration(
        query=Logistic(-122.031, {"cosine": 38.014, "text": 4.19, "best_cosine": 105.532}),
        hit=Logistic(
            -5.577,
            {
                "cosine": 1.389,
                "cosine_margin": 22.324,
                "text": 0.971,
                "text_share": 0.971,
                "rank": 3.440,
            },
        ),
        floor=0.005,
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
) -> dict[str, float]:
    """The numbers the model reads (QUERY_FEATURES, HIT_FEATURES): the hit's cosine and how
    far below the namespace's best cosine for the query it is, the best cosine itself; its
    text signal and its share of the best text score among the search's candidates; and
    1/rank in its search."""
    text = text_score if text_score and text_score > 0 else 0.0
    share = text / best_text_score if best_text_score and best_text_score > 0 else 0.0
    return {
        "cosine": cosine,
        "cosine_margin": cosine - best_cosine,
        "best_cosine": best_cosine,
        "text": text_signal(text),
        "text_share": min(share, 1.0),
        "rank": 1.0 / max(rank, 1),
    }


@dataclass(frozen=True)
class Rated:
    """A hit as the model reads it: its chance by ``query`` and by ``hit``."""

    query: float
    hit: float


def rate(
    cosine: float | None,
    text_score: float | None,
    best_cosine: float | None,
    calibration: Calibration | None,
    *,
    best_text_score: float | None = None,
    rank: int = 1,
) -> Rated | None:
    """The two chances of a hit (None without a calibration, a cosine or a best cosine)."""
    if calibration is None or cosine is None or best_cosine is None:
        return None
    values = features(cosine, text_score, best_cosine, best_text_score, rank)
    return Rated(calibration.query.probability(values), calibration.hit.probability(values))


def relevance(
    cosine: float | None,
    text_score: float | None,
    best_cosine: float | None,
    calibration: Calibration | None,
    *,
    best_text_score: float | None = None,
    rank: int = 1,
) -> float:
    """The relevance of a hit rated alone (a lesson; the best of its search): its ``query``
    chance; without a calibration, the plain similarity (see the module's docstring)."""
    rated = rate(
        cosine, text_score, best_cosine, calibration, best_text_score=best_text_score, rank=rank
    )
    if rated is None:
        return plain_relevance(cosine, text_score)
    return rated.query


def plain_relevance(cosine: float | None, text_score: float | None) -> float:
    """Relevance without a calibration (or without a cosine): the cosine and the text signal
    combined, 1 - (1 - cosine) x (1 - s / (s + 5))."""
    similarity = max(0.0, min(1.0, cosine or 0.0))
    return 1.0 - (1.0 - similarity) * (1.0 - text_signal(text_score))


def relevances(rated: list[Rated | None], plain: list[float]) -> list[float]:
    """The relevance of each hit of one search: its ``query`` chance times its ``hit`` chance
    over the best ``hit`` chance of the search (``plain`` where a hit could not be rated)."""
    best = max((r.hit for r in rated if r is not None), default=0.0)
    return [
        p if r is None else r.query * (r.hit / best if best > 0 else 1.0)
        for r, p in zip(rated, plain, strict=True)
    ]


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
