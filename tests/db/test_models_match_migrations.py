"""The SQLAlchemy metadata of gql_memory.db.tables describes exactly the schema the migrations
build, keys and indexes included.

Two checks, because Alembic's comparison alone is blind to part of it:

- ``alembic.autogenerate.compare_metadata`` between the metadata and the migrated database is
  clean (tables, columns, types, nullability, server defaults, indexes' columns, unique
  constraints, foreign keys). Nothing is filtered out: Alembic ignores its own version table
  and does not look at functions, policies or grants, which the metadata does not describe.
- Alembic does not compare primary keys, check constraints, nor an index's method, operator
  class, INCLUDE columns or WHERE clause (a composite primary key or a partial index could
  drift unseen). So the metadata is also created on an empty database (``create_all``) and
  PostgreSQL's own rendering of both schemas is compared: every column, constraint and index
  definition. The metadata leaves the vector dimension open (it is fixed per database at
  its first migration): the copy that is created gets the migrated database's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from pgvector.sqlalchemy import Vector
from sqlalchemy import Connection, MetaData, text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, admin_url
from gql_memory.db.tables import metadata
from tests.conftest import _admin

SCHEMA_SQL = {
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped AND c.relname <> 'alembic_version'
    """,
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace AND contype IN ('p', 'u', 'f', 'c', 'x')
          AND conrelid::regclass::text <> 'alembic_version'
    """,
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename <> 'alembic_version'
    """,
}


def _differences(connection: Connection) -> list[Any]:
    return compare_metadata(
        MigrationContext.configure(connection, opts={"compare_server_default": True}), metadata
    )


async def _schema(conn: Any) -> dict[str, set[tuple[Any, ...]]]:
    schema = {}
    for part, sql in SCHEMA_SQL.items():
        rows = await conn.execute(text(sql))
        schema[part] = {tuple(row) for row in rows}
    return schema


@pytest_asyncio.fixture
async def from_metadata(embedded_pg: EmbeddedPostgres) -> AsyncIterator[Database]:
    """An empty database, made by ``metadata.create_all`` alone."""
    name = "t_schema_from_metadata"
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await _admin(embedded_pg, f'CREATE DATABASE "{name}"')
    sized = MetaData()
    for table in metadata.sorted_tables:
        copy = table.to_metadata(sized)
        if "embedding" in copy.c:
            copy.c.embedding.type = Vector(Settings().hash_embedding_dim)  # the template's
    db = Database.from_url(admin_url(embedded_pg.server, name), Settings())
    async with db.engine.begin() as conn:
        await conn.execute(text("CREATE EXTENSION vector"))
        await conn.run_sync(sized.create_all)
    yield db
    await db.dispose()
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_alembic_finds_nothing_to_change(db: Database) -> None:
    async with db.engine.connect() as conn:
        differences = await conn.run_sync(_differences)
    assert differences == []


async def test_the_metadata_builds_the_schema_the_migrations_build(
    db: Database, from_metadata: Database
) -> None:
    async with db.read() as conn:
        migrated = await _schema(conn)
    async with from_metadata.read() as conn:
        modelled = await _schema(conn)
    assert migrated["indexes"], "nothing compared"
    for part in SCHEMA_SQL:
        assert sorted(migrated[part] - modelled[part]) == [], f"{part}: only the migrations'"
        assert sorted(modelled[part] - migrated[part]) == [], f"{part}: only the metadata's"
