"""Record how vectors were embedded (query/document prefixes and input types); the lexical
embedder that was called "local" is now "hash" (the in-process e5 model took the name).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

COLUMNS = ("query_prefix", "document_prefix", "query_input_type", "document_input_type")


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column(
            "embedding_config",
            sa.Column(column, sa.Text, nullable=False, server_default=""),
        )
    op.execute(
        "UPDATE embedding_config SET provider = 'hash' "
        "WHERE provider = 'local' AND model = 'hashed-ngrams-v2'"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE embedding_config SET provider = 'local' "
        "WHERE provider = 'hash' AND model = 'hashed-ngrams-v2'"
    )
    for column in COLUMNS:
        op.drop_column("embedding_config", column)
