"""The two write functions name their namespace with a ``SET LOCAL`` that Citus forwards.

``gql_memory_add_working`` and ``gql_memory_store_turns`` (migrations 0010, 0012) named their
namespace to the row-level security policies with ``set_config('app.namespace', ns, true)``.
On a Citus coordinator the statements inside them run on the worker that holds the
namespace, where the shards' policies are evaluated. Citus forwards ``SET LOCAL`` of a
setting to the workers a transaction uses (with ``citus.propagate_set_commands = 'local'``,
which ``gql-memory distribute`` sets), never a ``set_config()`` call; and, measured on Citus
14, only a ``SET LOCAL`` it sees inside a transaction block or a nested query: the one of a
function called as a single autocommit statement is not forwarded, the same run from a
function that statement calls (``PERFORM gql_memory_name_namespace(ns)``) is. On one
PostgreSQL the effect is the same as before: the setting holds until the transaction ends.
(The server's own transactions name their namespace with ``SET LOCAL`` in their opening
block: gql_memory/db/engine.py, ``begin``.)

The evictions choose their victims in a statement of their own, then archive them: Citus
pushes a query over a distributed table down to the worker whole, functions included, so
``gql_memory_archive(ns, ARRAY(SELECT ... FROM working_memory ...))`` ran the archive on the
worker, where its own statements over distributed tables failed ("the backend has already
been assigned a transaction id"). ``gql_memory_sweep`` becomes PL/pgSQL for that. And the
archive returns its rows column by column: a whole-row ``RETURNING s`` comes back from a
shard as the shard's row type, which the coordinator cannot cast to ``stale_memory``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import context, op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

DEFAULT_ROLE = "gql_memory_app"
# 0010 by its path (see 0012 for why)
_spec = importlib.util.spec_from_file_location(
    "gql_memory_migration_0010", Path(__file__).with_name("0010_one_statement_writes.py")
)
assert _spec is not None and _spec.loader is not None
_0010 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_0010)

NAMING = ("gql_memory_add_working", "gql_memory_store_turns")
SET_CONFIG = "PERFORM set_config('app.namespace', ns, true);"
NAMED = "PERFORM gql_memory_name_namespace(ns);"
ADD = "gql_memory_add_working"
ADD_DECLARE = "    total int;\nBEGIN"
ADD_DECLARE_VICTIMS = "    total int;\n    victims bigint[];\nBEGIN"
ADD_EVICT = """    SELECT coalesce(array_agg(a.original_id ORDER BY a.id), '{}'),
           coalesce(array_agg(a.id ORDER BY a.id), '{}')
    INTO evicted_ids, evicted_archived_ids
    FROM gql_memory_archive(
        ns,
        ARRAY(SELECT w.id FROM working_memory w
              WHERE w.namespace = ns AND w.session_id = sid
              ORDER BY (w.importance > critical), w.last_accessed, w.id
              LIMIT greatest(total - capacity, 0)),
        'LRU_EVICTION', channel, origin) a;"""
ADD_EVICT_APART = """    victims := ARRAY(SELECT w.id FROM working_memory w
                     WHERE w.namespace = ns AND w.session_id = sid
                     ORDER BY (w.importance > critical), w.last_accessed, w.id
                     LIMIT greatest(total - capacity, 0));
    SELECT coalesce(array_agg(a.original_id ORDER BY a.id), '{}'),
           coalesce(array_agg(a.id ORDER BY a.id), '{}')
    INTO evicted_ids, evicted_archived_ids
    FROM gql_memory_archive(ns, victims, 'LRU_EVICTION', channel, origin) a;"""
ARCHIVE = "gql_memory_archive"
ARCHIVE_ROWS = """        RETURNING s AS stale
    )
    SELECT array_agg(a.stale ORDER BY (a.stale).id) INTO moved_rows FROM archived a;"""
ARCHIVE_COLUMNS = """        RETURNING s.*
    )
    SELECT array_agg(CAST(ROW(a.*) AS stale_memory) ORDER BY a.id) INTO moved_rows
    FROM archived a;"""
SWEEP_APART = """
CREATE OR REPLACE FUNCTION gql_memory_sweep(ns text, sid text, critical float8,
                                            decay_rate float8, mention_boost float8,
                                            delete_threshold float8, channel text, origin text)
RETURNS SETOF stale_memory
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    victims bigint[];
BEGIN
    victims := ARRAY(SELECT w.id FROM working_memory w
                     LEFT JOIN session_state s
                       ON s.namespace = w.namespace AND s.session_id = w.session_id
                     WHERE w.namespace = ns AND w.session_id = sid AND w.importance <= critical
                       AND gql_memory_raw_attention(coalesce(w.attention, w.importance),
                                                    decay_rate,
                                                    coalesce(s.event_counter, 0) - w.last_event,
                                                    w.mention_count, mention_boost)
                           < delete_threshold);
    RETURN QUERY SELECT a.* FROM gql_memory_archive(ns, victims, 'DECAY_EVICTION', channel,
                                                    origin) a;
END
$$
"""
NAME_NAMESPACE = """
CREATE FUNCTION gql_memory_name_namespace(ns text) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('SET LOCAL app.namespace = %L', ns);
END
$$
"""


def _rewrite(names: tuple[str, ...], old: str, new: str) -> None:
    """Each function's definition as PostgreSQL holds it, with ``old`` replaced by ``new``
    (CREATE OR REPLACE: its grants, and on Citus its propagation, stay)."""
    bind = op.get_bind()
    for name in names:
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
    role = context.config.attributes.get("database_role") or DEFAULT_ROLE
    op.get_bind().exec_driver_sql(NAME_NAMESPACE)
    op.execute("REVOKE ALL ON FUNCTION gql_memory_name_namespace(text) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION gql_memory_name_namespace(text) TO "{role}"')
    _rewrite(NAMING, SET_CONFIG, NAMED)
    _rewrite((ADD,), ADD_DECLARE, ADD_DECLARE_VICTIMS)
    _rewrite((ADD,), ADD_EVICT, ADD_EVICT_APART)
    _rewrite((ARCHIVE,), ARCHIVE_ROWS, ARCHIVE_COLUMNS)
    op.get_bind().exec_driver_sql(SWEEP_APART)


def downgrade() -> None:
    op.get_bind().exec_driver_sql(
        _0010.SWEEP.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    )
    _rewrite((ARCHIVE,), ARCHIVE_COLUMNS, ARCHIVE_ROWS)
    _rewrite((ADD,), ADD_EVICT_APART, ADD_EVICT)
    _rewrite((ADD,), ADD_DECLARE_VICTIMS, ADD_DECLARE)
    _rewrite(NAMING, NAMED, SET_CONFIG)
    op.execute("DROP FUNCTION gql_memory_name_namespace(text)")
