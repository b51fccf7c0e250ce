"""The two write functions name their namespace with ``SET LOCAL``, which Citus forwards.

``gql_memory_add_working`` and ``gql_memory_store_turns`` (migrations 0010, 0012) named their
namespace to the row-level security policies with ``set_config('app.namespace', ns, true)``.
On a Citus coordinator the statements inside them run on the worker that holds the
namespace, where the policies are evaluated; Citus forwards ``SET LOCAL`` of a setting to the
workers a transaction uses (with ``citus.propagate_set_commands = 'local'``, which
``gql-memory distribute`` sets), never a ``set_config()`` call. The effect on one PostgreSQL is
the same: the setting holds until the transaction ends. (The server's own transactions name
their namespace with ``SET LOCAL`` too: gql_memory/db/engine.py, ``begin``.)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

FUNCTIONS = ("gql_memory_add_working", "gql_memory_store_turns")
SET_CONFIG = "PERFORM set_config('app.namespace', ns, true);"
SET_LOCAL = "EXECUTE format('SET LOCAL app.namespace = %L', ns);"


def _rewrite(old: str, new: str) -> None:
    """Each function's definition as PostgreSQL holds it, with ``old`` replaced by ``new``
    (CREATE OR REPLACE: its grants, and on Citus its propagation, stay)."""
    bind = op.get_bind()
    for name in FUNCTIONS:
        definition = bind.execute(
            sa.text(
                "SELECT pg_get_functiondef(p.oid) FROM pg_proc p "
                "WHERE p.proname = :name AND p.pronamespace = current_schema()::regnamespace"
            ),
            {"name": name},
        ).scalar_one()
        if definition.count(old) != 1:
            raise RuntimeError(f"migration 0014: expected one {old!r} in {name}")
        bind.exec_driver_sql(definition.replace(old, new))


def upgrade() -> None:
    _rewrite(SET_CONFIG, SET_LOCAL)


def downgrade() -> None:
    _rewrite(SET_LOCAL, SET_CONFIG)
