"""The recipe of a raw turn's embedded document is part of the embedding signature: vectors of
turns embedded alone and of turns embedded after their context are not comparable, so a
database records which recipe its vectors were made with, and a server configured with
another refuses to start until `gql-memory reembed` has re-embedded them
(memory/turn_embedding.py, memory/embedding_config.py).

A database migrated from before holds turns embedded by the recipe of the defaults then in
force, which this records: the turn after the previous turn's last 96 tokens, not pooled.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "embedding_config",
        sa.Column(
            "raw_turn_recipe",
            JSONB,
            nullable=False,
            server_default=sa.text("""'{"context_tokens": 96, "pooled_alone": false}'::jsonb"""),
        ),
    )


def downgrade() -> None:
    op.drop_column("embedding_config", "raw_turn_recipe")
