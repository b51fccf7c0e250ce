"""What is embedded for a raw turn (its recipe), and the turn's vector.

A turn is stored as it was said; what the vector leg compares with a question is a document
built from it: the whole turn (a long one in chunks, embeddings.windows), after the end of the
turn before it in its session within a budget of the model's tokens (contextual document
embedding: "Yes, it was amazing!" carries its subject) when the two are a short exchange,
and, when asked, the turn alone too, the two vectors averaged. The recipe is part of the
stored embedding signature (memory/embedding_config.py): vectors of two recipes are never
mixed in one database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gql_memory.config import Settings
from gql_memory.embeddings import EmbeddingProvider, TextRole, Vector
from gql_memory.embeddings.windows import TokenCounter, ending


@dataclass(frozen=True)
class TurnRecipe:
    """How a raw turn's vector is made: after the previous turn's last ``context_tokens``
    tokens (0: the turn alone), with ``short_only`` only when the turn and the previous one
    are both at most that long (otherwise alone), and with ``pooled_alone`` averaged with the
    turn alone."""

    context_tokens: int = 96
    pooled_alone: bool = False
    short_only: bool = True

    def __post_init__(self) -> None:
        if not self.context_tokens:  # the turn alone: nothing to pool, no context to give
            object.__setattr__(self, "pooled_alone", False)
            object.__setattr__(self, "short_only", False)

    @classmethod
    def from_settings(cls, settings: Settings) -> TurnRecipe:
        context = settings.embed_raw_context_tokens if settings.embed_raw_context else 0
        return cls(context, settings.embed_raw_alone, settings.embed_raw_context_short_only)

    def describe(self) -> str:
        if not self.context_tokens:
            return "raw turns embedded alone"
        described = (
            f"raw turns embedded after the previous turn's last {self.context_tokens} tokens"
        )
        if self.short_only:
            described = (
                f"raw turns embedded after the previous turn when both are at most "
                f"{self.context_tokens} tokens long, else alone"
            )
        return described + (", averaged with the turn alone" if self.pooled_alone else "")

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TurnRecipe:
        # recorded before short_only existed: context for every turn
        return cls(
            int(value["context_tokens"]),
            bool(value["pooled_alone"]),
            bool(value.get("short_only", False)),
        )


def turn_text(speaker: str, content: str) -> str:
    """A turn as the search shows it: 'speaker: content'."""
    return f"{speaker}: {content}"


def turn_document(
    previous: str | None, current: str, tokens: TokenCounter, recipe: TurnRecipe
) -> str:
    """The text embedded for a turn: the end of the previous turn of its session within
    ``recipe.context_tokens`` of the model's tokens (the words closest to this turn), then
    the whole turn. The context is a budgeted addition, never a reason to cut the turn: a
    turn longer than the model's window is embedded in overlapping chunks
    (embeddings.windows).

    With ``recipe.short_only`` the context is given only to a short exchange: a turn and a
    previous turn both within the budget. A short reply ("Yes, it was amazing!") needs its
    subject; a long turn has its own, which a preceding question would drag toward itself,
    and the last tokens of a long answer are an arbitrary fragment of it (LongMemEval's
    assistant turns, measured in docs/benchmarks-retrieval.md)."""
    budget = recipe.context_tokens
    if not previous or not budget:
        return current
    if recipe.short_only and (
        tokens.count_tokens(previous) > budget or tokens.count_tokens(current) > budget
    ):
        return current
    context = ending(previous, tokens, budget)
    return f"{context}\n{current}" if context else current


async def turn_vectors(
    embedder: EmbeddingProvider, documents: Sequence[str], turns: Sequence[str]
) -> list[Vector]:
    """The vector of each raw turn: its document (the turn in its context) and ``turns`` (the
    turn alone), embedded both and averaged (the direction of their sum: what cosine
    similarity sees). The context carries what a short turn is about ("Yes, it was
    amazing!"); the turn alone keeps its own words from being outweighed by its context's.
    A turn whose document is itself (no context, or GQL_MEMORY_EMBED_RAW_ALONE off: the
    caller passes the documents twice) is embedded once. Measured in
    docs/benchmarks-retrieval.md: a better key than either alone for the vector leg, no gain
    in the hybrid once sessionShare and speakerBoost are on; hence off by default."""
    alone = [i for i, (d, t) in enumerate(zip(documents, turns, strict=True)) if d != t]
    vectors = await embedder.embed([*documents, *(turns[i] for i in alone)], role=TextRole.DOCUMENT)
    pooled = list(vectors[: len(documents)])
    for i, vector in zip(alone, vectors[len(documents) :], strict=True):
        pooled[i] = [(a + b) / 2 for a, b in zip(pooled[i], vector, strict=True)]
    return pooled
