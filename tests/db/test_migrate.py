"""Migrations: idempotent, current, and a clear word when pgvector is missing or too old."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, admin_url
from gql_memory.db.migrate import (
    current_revision,
    ensure_pgvector,
    head_revision,
    is_current,
    pgvector_problem,
    upgrade,
)
from gql_memory.errors import ConfigurationError
from tests.conftest import _admin


def test_a_server_without_pgvector_is_told_how_to_install_it() -> None:
    problem = pgvector_problem(None)
    assert problem is not None
    assert "does not have the pgvector extension" in problem
    assert "apt install postgresql-<major>-pgvector" in problem
    assert "unset DATABASE_URL" in problem


def test_an_old_pgvector_is_refused_and_a_current_one_accepted() -> None:
    assert "0.7.4 is too old" in (pgvector_problem("0.7.4") or "")
    assert pgvector_problem("0.8.0") is None
    assert pgvector_problem("1.0.1") is None


async def test_upgrade_is_idempotent_and_current(db: Database) -> None:
    await ensure_pgvector(db)  # the embedded server ships pgvector 0.8
    await upgrade(db, 384)
    await upgrade(db, 384)
    assert await current_revision(db) == head_revision()
    assert await is_current(db)


async def test_an_unknown_text_search_configuration_is_refused_at_startup(db: Database) -> None:
    import pytest

    from gql_memory.db.migrate import ensure_text_search_config
    from gql_memory.errors import ConfigurationError

    await ensure_text_search_config(db, "german")
    with pytest.raises(ConfigurationError, match="'germn' is not a text-search configuration"):
        await ensure_text_search_config(db, "germn")


async def test_an_owner_that_cannot_create_the_role_is_told_what_a_dba_must_do(
    embedded_pg: EmbeddedPostgres,
) -> None:
    """External databases: the DATABASE_URL user owns its database but lacks CREATEROLE; the
    row-level security role does not exist. One clear error, and nothing is changed."""
    name = "t_limited_owner"
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await _admin(
        embedded_pg,
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'limited_owner') "
        "THEN CREATE ROLE limited_owner LOGIN NOCREATEROLE; END IF; END $$",
    )
    await _admin(embedded_pg, f'CREATE DATABASE "{name}" OWNER limited_owner')
    superuser = Database.from_url(admin_url(embedded_pg.server, name), Settings())
    async with superuser.write() as conn:  # what a DBA does for pgvector
        await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    await superuser.dispose()
    url = make_url(admin_url(embedded_pg.server, name)).set(username="limited_owner")
    owner = Database.from_url(url.render_as_string(hide_password=False), Settings())
    try:
        with pytest.raises(ConfigurationError, match="needs CREATEROLE") as refused:
            await upgrade(owner, 384, "gqlm_role_nobody_made")
        assert 'CREATE ROLE "gqlm_role_nobody_made"' in str(refused.value)
        assert await current_revision(owner) is None  # the whole upgrade rolled back
    finally:
        await owner.dispose()
        await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
