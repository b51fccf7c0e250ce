"""Semantic memory: embedding configuration, insights, episodes, raw dialogue embeddings.

The vector dimension is fixed per database: it comes from the caller (gql-memory passes the
configured provider's dimension) and is recorded in embedding_config.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

from gql_memory.db.indexes import hnsw_index_ddl, hnsw_index_name

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _dim() -> int:
    dim = op.get_context().config.attributes.get("embedding_dim")
    if dim is None:
        from gql_memory.config import Settings
        from gql_memory.embeddings import configured_dim

        dim = configured_dim(Settings())
    return int(dim)


def _namespace() -> sa.Column:
    return sa.Column("namespace", sa.String(255), nullable=False, server_default="default")


def upgrade() -> None:
    dim = _dim()
    op.create_table(
        "embedding_config",
        sa.Column("id", sa.SmallInteger, primary_key=True, server_default="1"),
        sa.Column("provider", sa.Text, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.CheckConstraint("id = 1", name="ck_embedding_config_single_row"),
    )
    op.execute(
        sa.text(
            "INSERT INTO embedding_config (id, provider, model, dim) "
            "VALUES (1, 'unset', 'unset', :dim)"
        ).bindparams(dim=dim)
    )

    op.create_table(
        "insights",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.Column(
            "source_ids",
            postgresql.ARRAY(sa.BigInteger),
            nullable=False,
            server_default=sa.text("'{}'::bigint[]"),
        ),
        sa.Column("metadata", postgresql.JSONB, nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("content_tsv", postgresql.TSVECTOR, nullable=True),
    )
    op.create_index("ix_insights_ns_created", "insights", ["namespace", "created_at"])
    op.create_index("ix_insights_tsv", "insights", ["content_tsv"], postgresql_using="gin")
    op.execute(hnsw_index_ddl("insights"))

    op.create_table(
        "episodes",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        _namespace(),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("reward", sa.Float, nullable=False),
        sa.Column("reflection", sa.Text, nullable=False),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.Column("content_tsv", postgresql.TSVECTOR, nullable=True),
        sa.CheckConstraint("reward >= -1 AND reward <= 1", name="ck_episodes_reward"),
    )
    op.create_index("ix_episodes_ns_created", "episodes", ["namespace", "created_at"])
    op.create_index("ix_episodes_tsv", "episodes", ["content_tsv"], postgresql_using="gin")
    op.execute(hnsw_index_ddl("episodes"))

    op.add_column("raw_dialogue", sa.Column("embedding", Vector(dim), nullable=True))
    op.execute(hnsw_index_ddl("raw_dialogue"))


def downgrade() -> None:
    op.drop_index(hnsw_index_name("raw_dialogue"), table_name="raw_dialogue")
    op.drop_column("raw_dialogue", "embedding")
    op.drop_table("episodes")
    op.drop_table("insights")
    op.drop_table("embedding_config")
