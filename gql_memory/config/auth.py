"""Authentication: the shape of API keys (gql_memory.keys), whether requests need one,
and how long a verified key is trusted."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

API_KEY_PREFIX = "gqlm_"
"""Every key starts with this, so leaked keys are easy to recognise (and to redact in logs)."""
API_KEY_RANDOM_BYTES = 32
"""256 random bits per key: a plain SHA-256 at rest is then as good as a slow password hash."""
API_KEY_DISPLAY_CHARS = 12
"""Leading characters of a key stored in clear for `keys list` (prefix + 7 random chars)."""


class AuthSettings:
    """Settings of API-key authentication (part of ``Settings``)."""

    auth: Literal["required", "optional"] | None = Field(
        default=None,
        description="API-key auth; default optional on a loopback address, required otherwise.",
    )
    insecure: bool = Field(
        default=False,
        description="Operator's explicit consent to serve without required auth off loopback "
        "(`serve --insecure`); also lifts the loopback Host check for anonymous callers.",
    )
    api_key_cache_ttl_s: float = Field(
        default=5.0,
        ge=0.0,
        le=300.0,
        description="How long a verified (or refused) API key is trusted without asking the "
        "database again; a revoked key stops working within this time.",
    )
    api_key_cache_size: int = Field(default=10_000, ge=1, description="Keys kept in the cache.")
