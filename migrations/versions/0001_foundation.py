"""Foundation: pgvector, raw dialogue, working memory, stale memory.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _namespace() -> sa.Column:
    return sa.Column("namespace", sa.String(255), nullable=False, server_default="default")


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "raw_dialogue",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("speaker", sa.String(50), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("metadata", postgresql.JSONB, nullable=True),
        sa.Column(
            "timestamp", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("content_tsv", postgresql.TSVECTOR, nullable=True),
    )
    op.create_index(
        "ix_raw_dialogue_ns_session_ts", "raw_dialogue", ["namespace", "session_id", "timestamp"]
    )
    op.create_index("ix_raw_dialogue_ns_ts", "raw_dialogue", ["namespace", "timestamp"])
    op.create_index("ix_raw_dialogue_tsv", "raw_dialogue", ["content_tsv"], postgresql_using="gin")

    op.create_table(
        "working_memory",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("session_id", sa.String(255), nullable=False, server_default="default"),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column(
            "last_accessed",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.func.now(),
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("attention", sa.Float, nullable=True),
        sa.Column("mention_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_event", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("ref_kind", sa.String(16), nullable=True),
        sa.Column("ref_id", sa.BigInteger, nullable=True),
        sa.Column("provenance", postgresql.JSONB, nullable=True),
        sa.CheckConstraint(
            "importance >= 0 AND importance <= 1", name="ck_working_memory_importance"
        ),
        sa.CheckConstraint(
            "ref_kind IS NULL OR ref_kind IN ('INSIGHT', 'EPISODE', 'RAW', 'NODE')",
            name="ck_working_memory_ref_kind",
        ),
    )
    op.create_index(
        "ix_working_memory_ns_session_accessed",
        "working_memory",
        ["namespace", "session_id", "last_accessed"],
    )

    op.create_table(
        "stale_memory",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("session_id", sa.String(255), nullable=False, server_default="default"),
        sa.Column("original_id", sa.BigInteger, nullable=True),
        sa.Column("original_content", sa.Text, nullable=False),
        sa.Column("importance", sa.Float, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column(
            "archived_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("ref_kind", sa.String(16), nullable=True),
        sa.Column("ref_id", sa.BigInteger, nullable=True),
        sa.Column("provenance", postgresql.JSONB, nullable=True),
        sa.CheckConstraint(
            "reason IN ('LRU_EVICTION', 'MANUAL_ARCHIVE', 'DECAY_EVICTION')",
            name="ck_stale_memory_reason",
        ),
    )
    op.create_index("ix_stale_memory_ns_archived", "stale_memory", ["namespace", "archived_at"])
    op.create_index(
        "ix_stale_memory_ns_session_archived",
        "stale_memory",
        ["namespace", "session_id", "archived_at"],
    )


def downgrade() -> None:
    op.drop_table("stale_memory")
    op.drop_table("working_memory")
    op.drop_table("raw_dialogue")
