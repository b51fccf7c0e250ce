"""Index for listing a label's nodes newest first (`nodes(label: ...)`).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_nodes_ns_label_created ON nodes (namespace, label, created_at DESC, id DESC)"
    )


def downgrade() -> None:
    op.drop_index("ix_nodes_ns_label_created", table_name="nodes")
