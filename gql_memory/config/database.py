"""The database: which PostgreSQL (or the embedded one), the role requests run as with
row-level security, the connection pool, read replicas and the timeouts of each."""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator

# The role requests run as under row-level security (migration 0007) unless database_role
# names another.
DEFAULT_DATABASE_ROLE = "gql_memory_app"
# The setting each transaction of the server names its namespace in; the policies read it.
NAMESPACE_SETTING = "app.namespace"


class DatabaseSettings:
    """Settings of the database connection (part of ``Settings``)."""

    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL", "database_url"),
        description="PostgreSQL URL; unset means: start the embedded PostgreSQL.",
    )
    data_dir: Path | None = Field(
        default=None,
        description="Where the embedded PostgreSQL keeps its files (default: see db.embedded).",
    )
    app_database_url: str | None = Field(
        default=None,
        description="The URL the server's requests connect with (a login that is, or is a "
        "member of, database_role); unset: DATABASE_URL, or the embedded server's own "
        "login for that role. Migrations and admin commands always use DATABASE_URL.",
    )
    read_database_url: str | None = Field(
        default=None,
        description="Read replicas (streaming hot standbys of DATABASE_URL): one PostgreSQL "
        "URL or a comma-separated list, balanced round-robin. Queries and library and MCP "
        "reads go there; mutations, LISTEN and migrations stay on the primary. Unset: "
        "everything on the primary.",
    )
    replica_max_lag_s: float = Field(
        default=5.0,
        gt=0.0,
        le=3600.0,
        description="A replica further behind the primary than this is skipped (its reads go "
        "to the primary) until it catches up. While the primary is down, replicas serve "
        "whatever their lag.",
    )
    read_after_lsn_wait_s: float = Field(
        default=0.25,
        ge=0.0,
        le=30.0,
        description="A read that must see a commit position (X-Read-After-LSN, "
        "extensions.readAfterLsn, the library's own last write) waits up to this long for "
        "a replica to replay it, then reads from the primary.",
    )
    replica_check_interval_s: float = Field(
        default=1.0,
        gt=0.0,
        le=60.0,
        description="How often each server process checks the primary and every replica "
        "(reachable, replay position, lag); a primary found down refuses writes at once "
        "with SERVICE_UNAVAILABLE until a check finds it back.",
    )
    database_role: str = Field(
        default=DEFAULT_DATABASE_ROLE,
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description="The non-superuser role requests run as; migrations create it (unless it "
        "exists) and put its row-level security policies on every tenant table.",
    )
    db_pool_size: int = Field(default=10, ge=1, le=200)
    db_max_overflow: int = Field(default=10, ge=0, le=200)
    namespace_concurrency: int = Field(
        default=0,
        ge=0,
        le=400,
        description="Database transactions one namespace may run at once per server process "
        "(0: half the pool, pool size + overflow); a tenant's further requests queue behind "
        "its own, not in front of other tenants'.",
    )
    statement_timeout_ms: int = Field(
        default=30_000, ge=0, description="Per-statement timeout in PostgreSQL (0 = none)."
    )
    db_pool_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="A request waits this long for a pooled connection, then fails with "
        "SERVICE_UNAVAILABLE.",
    )
    db_connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="Give up connecting after this long: an unreachable or frozen database "
        "fails requests with SERVICE_UNAVAILABLE instead of hanging them.",
    )

    @field_validator("database_url", "app_database_url")
    @classmethod
    def _asyncpg_url(cls, value: str | None) -> str | None:
        """Accept the usual ``postgres://`` spellings and use the asyncpg driver."""
        if not value:
            return None
        return _asyncpg_url(value)

    @field_validator("read_database_url")
    @classmethod
    def _asyncpg_urls(cls, value: str | None) -> str | None:
        """Each URL of the comma-separated list, as for DATABASE_URL."""
        urls = [url.strip() for url in (value or "").split(",") if url.strip()]
        setting = "each URL of GQL_MEMORY_READ_DATABASE_URL"
        return ",".join(_asyncpg_url(url, setting) for url in urls) or None

    @property
    def read_database_urls(self) -> list[str]:
        """The read replicas' URLs (empty: every read on the primary)."""
        return self.read_database_url.split(",") if self.read_database_url else []

    @property
    def namespace_slots(self) -> int:
        """The effective per-namespace transaction limit (see namespace_concurrency)."""
        return self.namespace_concurrency or max(1, (self.db_pool_size + self.db_max_overflow) // 2)


def _asyncpg_url(value: str, setting: str = "DATABASE_URL") -> str:
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if value.startswith(prefix):
            return "postgresql+asyncpg://" + value[len(prefix) :]
    raise ValueError(f"{setting} must start with postgresql:// (or postgres://)")
