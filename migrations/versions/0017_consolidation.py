"""Consolidation (issue 44): a journal of what it did, so that every action can be undone.

- ``supersession_reason`` on insights, episodes and edges says why a fact was closed:
  ``caller`` (a caller superseded or invalidated it; every closure made before this migration
  was one), ``merged`` (consolidation merged a duplicate into another fact) or ``updated``
  (consolidation found a newer fact of the same subject and attribute).
- ``insights.digest_of`` marks an insight as the digest of a conversation session (its id).
- ``nodes.merged_into`` makes an automatic entity an alias of another one: its edges moved to
  that entity, and new mentions of its name link there. Undoing the merge clears it.
- ``consolidation_actions`` is the journal: one row per action with the ids it touched, its
  reason and evidence, and ``changes``, what stood before it (enough to restore it exactly).
- ``consolidation_cursors`` holds where the scheduled pass of a namespace left off.

Both tables are tenant tables: keyed by namespace first, under the row-level security policy
of migration 0007, granted to the request role; on a distributed database (Citus) they are
distributed by namespace with the others at once. The automatic entity upsert of migration 0010
returns the entity an alias stands for.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

FACT_TABLES = ("insights", "episodes", "edges")
REASONS = "('caller', 'merged', 'updated')"
NEW_TABLES = ("consolidation_actions", "consolidation_cursors")
DEFAULT_ROLE = "gql_memory_app"
POLICY = "tenant_isolation"

ENTITY_NODES = """
CREATE OR REPLACE FUNCTION gql_memory_entity_nodes(ns text, names text[])
RETURNS TABLE (id bigint, name text)
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    INSERT INTO nodes AS n (namespace, label, name, properties)
    SELECT DISTINCT ns, 'Entity', e.name, CAST('{"auto": true}' AS jsonb)
    FROM unnest(names) AS e(name) ORDER BY e.name
    ON CONFLICT (namespace, label, name) DO UPDATE SET name = EXCLUDED.name
    RETURNING RETURNED, n.name
$$
"""


def _role() -> str:
    return str(context.config.attributes.get("database_role") or DEFAULT_ROLE)


def _one_connection_per_node() -> None:
    """On Citus, these DDL run over one connection per worker (see migration 0016)."""
    citus = (
        op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar()
    )
    if citus:
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")


def upgrade() -> None:
    _one_connection_per_node()
    for table in FACT_TABLES:
        op.add_column(table, sa.Column("supersession_reason", sa.Text, nullable=True))
        op.execute(f"UPDATE {table} SET supersession_reason = 'caller' WHERE valid_to IS NOT NULL")
        op.create_check_constraint(
            f"ck_{table}_supersession_reason",
            table,
            f"supersession_reason IS NULL OR supersession_reason IN {REASONS}",
        )
    op.add_column("insights", sa.Column("digest_of", sa.String(255), nullable=True))
    op.create_index(
        "ix_insights_ns_digest_of",
        "insights",
        ["namespace", "digest_of"],
        postgresql_where=sa.text("digest_of IS NOT NULL"),
    )
    op.add_column("nodes", sa.Column("merged_into", sa.BigInteger, nullable=True))
    op.create_foreign_key(
        "fk_nodes_ns_merged_into",
        "nodes",
        "nodes",
        ["namespace", "merged_into"],
        ["namespace", "id"],
    )
    op.create_index(
        "ix_nodes_ns_merged_into",
        "nodes",
        ["namespace", "merged_into"],
        postgresql_where=sa.text("merged_into IS NOT NULL"),
    )
    op.create_table(
        "consolidation_actions",
        sa.Column("id", sa.BigInteger, nullable=False, autoincrement=True),
        sa.Column("namespace", sa.String(255), nullable=False, server_default="default"),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("target_id", sa.BigInteger, nullable=True),
        sa.Column("ids", ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("evidence", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("changes", JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("undone_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("namespace", "id", name="consolidation_actions_pkey"),
        sa.CheckConstraint(
            "kind IN ('merge', 'supersede', 'digest', 'entity_merge')",
            name="ck_consolidation_actions_kind",
        ),
    )
    op.create_index(
        "ix_consolidation_actions_ns_created",
        "consolidation_actions",
        ["namespace", sa.text("id DESC")],
    )
    op.create_table(
        "consolidation_cursors",
        sa.Column("namespace", sa.String(255), nullable=False, server_default="default"),
        sa.Column("insight_id", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("namespace", name="consolidation_cursors_pkey"),
    )
    role = _role()
    for table in NEW_TABLES:
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO "{role}"')
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" TO "{role}" '
            "USING (namespace = current_setting('app.namespace', true)) "
            "WITH CHECK (namespace = current_setting('app.namespace', true))"
        )
    op.execute(f'GRANT USAGE, SELECT ON SEQUENCE consolidation_actions_id_seq TO "{role}"')
    op.execute(ENTITY_NODES.replace("RETURNED", "coalesce(n.merged_into, n.id)"))
    _distribute_like_the_others()


def _distribute_like_the_others() -> None:
    """On a database `gql-memory distribute` already laid out, the new tenant tables join the
    layout at once: distributed by namespace, co-located with raw_dialogue."""
    bind = op.get_bind()
    if not bind.exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar():
        return
    distributed = bind.exec_driver_sql(
        "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'raw_dialogue'::regclass"
    ).scalar()
    if distributed:
        for table in NEW_TABLES:
            op.execute(
                f"SELECT create_distributed_table('{table}', 'namespace', "
                "colocate_with => 'raw_dialogue')"
            )


def downgrade() -> None:
    _one_connection_per_node()
    op.execute(ENTITY_NODES.replace("RETURNED", "n.id"))
    for table in reversed(NEW_TABLES):
        op.drop_table(table)
    op.drop_index("ix_nodes_ns_merged_into", table_name="nodes")
    op.drop_constraint("fk_nodes_ns_merged_into", "nodes", type_="foreignkey")
    op.drop_column("nodes", "merged_into")
    op.drop_index("ix_insights_ns_digest_of", table_name="insights")
    op.drop_column("insights", "digest_of")
    for table in FACT_TABLES:
        op.drop_constraint(f"ck_{table}_supersession_reason", table, type_="check")
        op.drop_column(table, "supersession_reason")
