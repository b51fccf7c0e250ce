"""Settings: the one place where environment variables and the config file are read.

Every constant of the specification lives here with its meaning, so that behaviour is
tuned in one place and never by bare literals scattered across modules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

CONFIG_FILE_ENV = "GQL_MEMORY_CONFIG"

# --- API keys (see gql_memory.auth) ----------------------------------------------------------
API_KEY_PREFIX = "gqlm_"
"""Every key starts with this, so leaked keys are easy to recognise (and to redact in logs)."""
API_KEY_RANDOM_BYTES = 32
"""256 random bits per key: a plain SHA-256 at rest is then as good as a slow password hash."""
API_KEY_DISPLAY_CHARS = 12
"""Leading characters of a key stored in clear for `keys list` (prefix + 7 random chars)."""


class Settings(BaseSettings):
    """Runtime configuration of gql_memory (env vars ``GQL_MEMORY_*`` or the config file)."""

    model_config = SettingsConfigDict(
        env_prefix="GQL_MEMORY_",
        extra="ignore",
        populate_by_name=True,
    )

    # --- database -------------------------------------------------------------------------
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "database_url"),
        description="PostgreSQL URL; unset means: start the embedded PostgreSQL.",
    )
    data_dir: Path | None = Field(
        default=None,
        description="Where the embedded PostgreSQL keeps its files (default: see db.embedded).",
    )
    db_pool_size: int = Field(default=10, ge=1, le=200)
    db_max_overflow: int = Field(default=10, ge=0, le=200)
    statement_timeout_ms: int = Field(
        default=30_000, ge=0, description="Per-statement timeout in PostgreSQL (0 = none)."
    )
    db_connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="Give up connecting after this long: an unreachable or frozen database "
        "fails requests with SERVICE_UNAVAILABLE instead of hanging them.",
    )

    # --- working memory (seeds 000/001, ADR-003) -------------------------------------------
    working_memory_capacity: int = Field(
        default=10, ge=1, le=10_000, description="Items kept per (namespace, session)."
    )
    critical_importance: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description="Items with importance above this are protected from LRU eviction.",
    )

    # --- pagination -----------------------------------------------------------------------
    default_page_size: int = Field(default=100, ge=1)
    max_page_size: int = Field(default=1000, ge=1)

    # --- server ---------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
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
    graphiql: bool = Field(default=True, description="Serve the GraphiQL IDE at /graphql.")
    introspection: bool = Field(default=True, description="Allow schema introspection.")
    max_query_depth: int = Field(default=12, ge=1)
    max_query_tokens: int = Field(default=2000, ge=10)
    max_aliases: int = Field(default=30, ge=1)
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Largest accepted request body (raw dialogue content can be large).",
    )
    shutdown_timeout_s: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="On SIGTERM, in-flight requests get this long to finish before the stop.",
    )
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = Field(
        default="json", description="json: one JSON object per line (request id, duration...)."
    )

    # --- embeddings and search (later layers read these) ----------------------------------
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url")
    )
    embedding_provider: Literal["openai", "local"] | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_dim: int | None = Field(default=None, ge=8, le=16000)
    text_search_config: str = Field(
        default="english", pattern=r"^[a-z_][a-z0-9_]*$", description="PostgreSQL FTS config."
    )
    embed_raw_dialogue: bool = True

    @field_validator("database_url")
    @classmethod
    def _asyncpg_url(cls, value: str | None) -> str | None:
        """Accept the usual ``postgres://`` spellings and use the asyncpg driver."""
        if not value:
            return None
        for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
            if value.startswith(prefix):
                return "postgresql+asyncpg://" + value[len(prefix) :]
        raise ValueError("DATABASE_URL must start with postgresql:// (or postgres://)")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Precedence: explicit arguments, environment, then the config file (TOML or YAML)."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            path = Path(config_file)
            if not path.is_file():
                raise FileNotFoundError(f"{CONFIG_FILE_ENV} points to a missing file: {path}")
            if path.suffix in (".yaml", ".yml"):
                sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
            else:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields changed (validated like the originals)."""
        data = self.model_dump()
        data.update({k: v for k, v in changes.items() if v is not None})
        return Settings.model_validate(data)
