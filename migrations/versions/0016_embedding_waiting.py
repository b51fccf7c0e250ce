"""Rows stored while the embedder was down wait for their vector, and say so.

A write never loses its row because the embedding provider fails or hangs: the row is stored
without its vector and marked ``embedding_waiting``; a background worker (one per database)
embeds the waiting rows once the provider answers again, and ``gql-memory reembed --missing``
does it on demand (memory/waiting.py). Insights and episodes could not be stored without a
vector before: their ``embedding`` becomes nullable. A raw turn's NULL vector already meant
"too long" or "raw embedding off"; the mark tells a waiting one apart. Each table gets a
partial index of its waiting rows, so that finding them never scans the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLES = ("raw_dialogue", "insights", "episodes")


def _one_connection_per_node() -> None:
    """On Citus, these DDL run over one connection per worker: a migration after this one in
    the same transaction may create functions (0014's downgrade does), which Citus refuses
    after a parallel operation on a distributed table."""
    citus = (
        op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'").scalar()
    )
    if citus:
        op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")


def upgrade() -> None:
    _one_connection_per_node()
    for table in TABLES:
        op.add_column(
            table,
            sa.Column("embedding_waiting", sa.Boolean, nullable=False, server_default=sa.false()),
        )
        op.create_index(
            f"ix_{table}_embedding_waiting",
            table,
            ["namespace", "id"],
            postgresql_where=sa.text("embedding_waiting"),
        )
    op.alter_column("insights", "embedding", nullable=True)
    op.alter_column("episodes", "embedding", nullable=True)


def downgrade() -> None:
    _one_connection_per_node()
    # a row still waiting has no vector to keep under NOT NULL: it goes with the mark
    for table in ("insights", "episodes"):
        op.execute(f"DELETE FROM {table} WHERE embedding IS NULL")
        op.alter_column(table, "embedding", nullable=False)
    for table in TABLES:
        op.drop_index(f"ix_{table}_embedding_waiting", table_name=table)
        op.drop_column(table, "embedding_waiting")
