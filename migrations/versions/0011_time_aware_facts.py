"""Time-aware facts: insights, episodes and edges get a validity interval (valid_from,
valid_to) and the fact that superseded them. (Raw turns already carry when they happened:
their timestamp, which clients and imports may set.)

Nothing is deleted: superseding a fact closes it (valid_to) and links it to its successor.
Existing rows become valid from when they were stored. An edge stays unique per (source,
target, relation) among the edges valid now only, so a relation can be closed and drawn again
while its history stays.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

FACT_TABLES = ("insights", "episodes", "edges")


def upgrade() -> None:
    for table in FACT_TABLES:
        op.add_column(table, sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True))
        op.execute(f"UPDATE {table} SET valid_from = created_at")
        op.alter_column(table, "valid_from", nullable=False, server_default=sa.func.now())
        op.add_column(table, sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True))
        op.add_column(
            table,
            sa.Column(
                "superseded_by",
                sa.BigInteger,
                sa.ForeignKey(f"{table}.id", ondelete="SET NULL"),
                nullable=True,
            ),
        )
        op.create_check_constraint(
            f"ck_{table}_valid_interval", table, "valid_to IS NULL OR valid_to >= valid_from"
        )
        # who superseded whom, both ways: `supersedes` is the reverse lookup
        op.create_index(
            f"ix_{table}_superseded_by",
            table,
            ["superseded_by"],
            postgresql_where=sa.text("superseded_by IS NOT NULL"),
        )
    # listing current facts newest first stays one index range
    op.create_index(
        "ix_insights_ns_created_current",
        "insights",
        ["namespace", "created_at", "id"],
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    # traversal and the search's graph statement read an edge's far end and validity from
    # the index alone (index-only scans), now and as of an instant
    for end, far in (("source", "target"), ("target", "source")):
        op.drop_index(f"ix_edges_ns_{end}", table_name="edges")
        op.create_index(
            f"ix_edges_ns_{end}",
            "edges",
            ["namespace", f"{end}_id", "relation"],
            postgresql_include=[f"{far}_id", "valid_from", "valid_to"],
        )
    op.drop_constraint("uq_edges_ns_src_tgt_rel", "edges", type_="unique")
    op.create_index(
        "ux_edges_ns_src_tgt_rel_current",
        "edges",
        ["namespace", "source_id", "target_id", "relation"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )


def downgrade() -> None:
    # history would collide with the restored constraint: closed edges go
    op.execute("DELETE FROM edges WHERE valid_to IS NOT NULL")
    op.drop_index("ux_edges_ns_src_tgt_rel_current", table_name="edges")
    op.create_unique_constraint(
        "uq_edges_ns_src_tgt_rel", "edges", ["namespace", "source_id", "target_id", "relation"]
    )
    op.drop_index("ix_insights_ns_created_current", table_name="insights")
    for end in ("source", "target"):
        op.drop_index(f"ix_edges_ns_{end}", table_name="edges")
        op.create_index(f"ix_edges_ns_{end}", "edges", ["namespace", f"{end}_id", "relation"])
    for table in FACT_TABLES:
        op.drop_index(f"ix_{table}_superseded_by", table_name=table)
        op.drop_constraint(f"ck_{table}_valid_interval", table, type_="check")
        op.drop_column(table, "superseded_by")
        op.drop_column(table, "valid_to")
        op.drop_column(table, "valid_from")
