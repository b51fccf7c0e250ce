"""Apply Alembic migrations and report whether the database is current."""

from __future__ import annotations

import functools
import logging
from importlib import resources
from pathlib import Path

import asyncpg
import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from gql_memory.config import DEFAULT_DATABASE_ROLE
from gql_memory.db.database import Database
from gql_memory.errors import ConfigurationError

log = logging.getLogger(__name__)

MIN_PGVECTOR = (0, 8)
PGVECTOR_HELP = (
    "The PostgreSQL server at DATABASE_URL does not have the pgvector extension. Install it "
    "(Debian/Ubuntu: `apt install postgresql-<major>-pgvector`; macOS: `brew install pgvector`; "
    "Docker: use the `pgvector/pgvector` image; source: https://github.com/pgvector/pgvector) "
    "and try again, or unset DATABASE_URL to use the embedded PostgreSQL, which ships it."
)


def alembic_config() -> Config:
    """Alembic configuration pointing at the migrations shipped with the package."""
    config = Config()
    location = Path(str(resources.files("gql_memory.migrations")))
    config.set_main_option("script_location", str(location))
    return config


@functools.cache
def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Connection, embedding_dim: int, database_role: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    config.attributes["embedding_dim"] = embedding_dim
    config.attributes["database_role"] = database_role
    command.upgrade(config, "head")


def pgvector_problem(available_version: str | None) -> str | None:
    """What is wrong with the server's pgvector (None: nothing), as advice for the operator."""
    if available_version is None:
        return PGVECTOR_HELP
    if tuple(int(p) for p in available_version.split(".")[:2]) < MIN_PGVECTOR:
        return (
            f"pgvector {available_version} is too old: gql_memory needs 0.8 or newer (iterative "
            "HNSW scans). Upgrade the extension package on the database server."
        )
    return None


async def ensure_pgvector(db: Database) -> None:
    """Fail with installation advice when the server lacks pgvector (0.8 or newer)."""
    async with db.read() as conn:
        version = await conn.scalar(
            text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        )
    problem = pgvector_problem(version)
    if problem:
        raise ConfigurationError(problem)


async def ensure_text_search_config(db: Database, name: str) -> None:
    """Refuse an unknown GQL_MEMORY_TEXT_SEARCH_CONFIG at startup, not on the first write."""
    async with db.read() as conn:
        known = await conn.scalar(
            text("SELECT count(*) FROM pg_ts_config WHERE cfgname = :name"), {"name": name}
        )
    if not known:
        async with db.read() as conn:
            names = await conn.execute(text("SELECT cfgname FROM pg_ts_config ORDER BY 1"))
            available = ", ".join(names.scalars())
        raise ConfigurationError(
            f"GQL_MEMORY_TEXT_SEARCH_CONFIG={name!r} is not a text-search configuration of "
            f"this PostgreSQL server; choose one of: {available}"
        )


async def upgrade(
    db: Database, embedding_dim: int, database_role: str = DEFAULT_DATABASE_ROLE
) -> None:
    """Bring the database to the newest schema (idempotent; serialized across processes).

    ``embedding_dim`` sizes the vector columns when they are first created;
    ``database_role`` is the role row-level security is granted to (migration 0007).
    """
    await ensure_pgvector(db)
    try:
        async with db.engine.begin() as conn:
            # Several workers may start at once: one migrates, the others wait and find it done.
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('gql_memory:migrate'))"))
            # schema changes on large tables (index builds) may outlast the statement timeout
            await conn.execute(text("SET LOCAL statement_timeout = 0"))
            await conn.run_sync(_upgrade, embedding_dim, database_role)
    except sqlalchemy.exc.DBAPIError as exc:
        cause = getattr(exc.orig, "__cause__", None) or exc.orig
        if not isinstance(cause, asyncpg.InsufficientPrivilegeError):
            raise
        raise ConfigurationError(
            f"Migrating the database was refused: {cause}. The DATABASE_URL user must own "
            f"the schema, and to create the role {database_role!r} (row-level security) it "
            f'needs CREATEROLE — or a DBA creates it first: CREATE ROLE "{database_role}" '
            "NOLOGIN NOSUPERUSER NOBYPASSRLS; (docs/operations.md: Row-level security). "
            "Nothing was changed."
        ) from exc


async def current_revision(db: Database) -> str | None:
    """The applied migration, or None on an empty database (a plain read, no Alembic setup)."""
    async with db.read() as conn:
        exists = await conn.scalar(text("SELECT to_regclass('alembic_version') IS NOT NULL"))
        if not exists:
            return None
        return await conn.scalar(text("SELECT version_num FROM alembic_version"))


async def is_current(db: Database) -> bool:
    return await current_revision(db) == head_revision()
