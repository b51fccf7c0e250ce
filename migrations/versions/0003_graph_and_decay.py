"""Memory graph (nodes, edges) and per-session event counters for event-based decay.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _namespace() -> sa.Column:
    return sa.Column("namespace", sa.String(255), nullable=False, server_default="default")


def upgrade() -> None:
    op.create_table(
        "session_state",
        _namespace(),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("event_counter", sa.BigInteger, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("namespace", "session_id"),
    )

    op.create_table(
        "nodes",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("label", sa.String(255), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("properties", postgresql.JSONB, nullable=True),
        sa.Column(
            "insight_id",
            sa.BigInteger,
            sa.ForeignKey("insights.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "episode_id",
            sa.BigInteger,
            sa.ForeignKey("episodes.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "raw_id",
            sa.BigInteger,
            sa.ForeignKey("raw_dialogue.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.UniqueConstraint("namespace", "label", "name", name="uq_nodes_ns_label_name"),
    )
    op.create_index("ix_nodes_ns_created", "nodes", ["namespace", "created_at"])
    op.create_index(
        "ix_nodes_insight",
        "nodes",
        ["insight_id"],
        postgresql_where=sa.text("insight_id IS NOT NULL"),
    )
    op.create_index(
        "ix_nodes_episode",
        "nodes",
        ["episode_id"],
        postgresql_where=sa.text("episode_id IS NOT NULL"),
    )
    op.create_index(
        "ix_nodes_raw", "nodes", ["raw_id"], postgresql_where=sa.text("raw_id IS NOT NULL")
    )

    op.create_table(
        "edges",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column(
            "source_id",
            sa.BigInteger,
            sa.ForeignKey("nodes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "target_id",
            sa.BigInteger,
            sa.ForeignKey("nodes.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("relation", sa.Text, nullable=False),
        sa.Column("weight", sa.Float, nullable=False, server_default="1.0"),
        sa.Column("properties", postgresql.JSONB, nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.UniqueConstraint(
            "namespace", "source_id", "target_id", "relation", name="uq_edges_ns_src_tgt_rel"
        ),
        sa.CheckConstraint("source_id <> target_id", name="ck_edges_no_self_loop"),
    )
    # Both directions: traversal walks out-edges by source and in-edges by target.
    op.create_index("ix_edges_ns_source", "edges", ["namespace", "source_id", "relation"])
    op.create_index("ix_edges_ns_target", "edges", ["namespace", "target_id", "relation"])


def downgrade() -> None:
    op.drop_table("edges")
    op.drop_table("nodes")
    op.drop_table("session_state")
