"""Consolidation (issue 44; gql_memory.memory.consolidation): when insights are the same
statement, when a session is quiet enough for a digest, the background schedule, and the
optional chat model."""

from __future__ import annotations

from pydantic import Field


class ConsolidationSettings:
    consolidation_duplicate_similarity: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="Cosine similarity from which two insights that state the same fact (or "
        "say it in the same words) are merged as duplicates; chosen on the seeded corpus of "
        "`python -m bench consolidation` with multilingual-e5-small.",
    )
    consolidation_interval_s: float = Field(
        default=3600.0,
        ge=0.0,
        description="Seconds between background consolidation passes over every namespace "
        "with new insights or newly quiet sessions (on since its precision held on the "
        "bench: no false merge or supersession); 0 switches the schedule off (consolidate on "
        "demand with `gql-memory consolidate` or the consolidate mutation).",
    )
    consolidation_max_actions: int = Field(
        default=200,
        ge=1,
        le=100_000,
        description="Actions a scheduled pass takes per namespace before it yields; the next "
        "pass resumes where it stopped.",
    )
    consolidation_digest_quiet_s: float = Field(
        default=21_600.0,
        ge=0.0,
        description="A conversation session whose last turn is at least this many seconds old "
        "gets a digest (its most central sentences), stored as an insight marked as a digest.",
    )
    consolidation_digest_min_turns: int = Field(
        default=4,
        ge=1,
        description="Sessions with fewer turns get no digest: their turns say it already.",
    )
    consolidation_digest_tokens: int = Field(
        default=120,
        ge=16,
        le=2_000,
        description="The token budget of a session digest.",
    )
    consolidation_llm_base_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible chat endpoint (e.g. http://localhost:11434/v1) "
        "that writes session digests in place of the extractive ones; unset: no model.",
    )
    consolidation_llm_model: str | None = Field(
        default=None,
        description="The chat model consolidation asks (with consolidation_llm_base_url).",
    )
    consolidation_llm_api_key: str | None = Field(
        default=None,
        description="The API key of the consolidation chat endpoint, if it needs one.",
    )
