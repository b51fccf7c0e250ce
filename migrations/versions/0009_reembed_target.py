"""Re-embedding records its target before it writes a vector, so that a re-run toward
another model or dimension can never continue it (and mix two vector spaces).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

EMBEDDED_TABLES = ("insights", "episodes", "raw_dialogue")


def upgrade() -> None:
    op.add_column("embedding_config", sa.Column("reembed_target", JSONB, nullable=True))
    # Side columns of runs interrupted before this migration: which model filled them is
    # unknown, so none of their vectors can be trusted; the next run starts afresh.
    for table in EMBEDDED_TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS embedding_next")


def downgrade() -> None:
    op.drop_column("embedding_config", "reembed_target")
