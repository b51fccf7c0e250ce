"""Working memory (seeds 000/001, ADR-003): capacity, the critical items LRU eviction
spares, and the event-based decay of attention."""

from __future__ import annotations

from pydantic import Field


class WorkingMemorySettings:
    """Settings of working memory and its decay (part of ``Settings``)."""

    working_memory_capacity: int = Field(
        default=10, ge=1, le=10_000, description="Items kept per (namespace, session)."
    )
    critical_importance: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description="Items with importance above this are protected from LRU eviction.",
    )

    # event-based decay (ADR-003): attention = base * decay_rate^eventsElapsed + mentions * boost
    decay: bool = Field(
        default=True,
        description="ADR-003's rollback switch: off, attention never decays (base + mentions) "
        "and nothing is evicted by decay; only capacity (LRU) evicts.",
    )
    decay_rate: float = Field(
        default=0.85, gt=0.0, le=1.0, description="Attention kept per session event."
    )
    mention_boost: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Attention added per access (mention)."
    )
    attention_floor: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Surviving items report at least this."
    )
    decay_delete_threshold: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Non-critical items whose raw attention falls below this are evicted.",
    )
