"""Migrations: idempotent, current, and a clear word when pgvector is missing or too old."""

from __future__ import annotations

from gql_memory.db import Database
from gql_memory.db.migrate import (
    current_revision,
    ensure_pgvector,
    head_revision,
    is_current,
    pgvector_problem,
    upgrade,
)


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
