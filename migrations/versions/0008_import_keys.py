"""Exact imports: the import key of a turn is a column with a unique index per namespace, so
concurrent imports of one file cannot store a turn twice (INSERT ... ON CONFLICT DO NOTHING).

Keys already stored (metadata.import_key) are copied into the column. Turns imported without
an id were keyed by their position in their session, so a turn inserted into a file shifted
every later key; they are re-keyed by what they say and how often the same speaker said the
same thing before in that session (gql_memory.memory.importer). Rows that earlier concurrent
imports stored twice keep the key on their first copy only; the copies stay (nothing is
deleted) and can be found with ``metadata->>'import_duplicate_of'``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _digest(*parts: str) -> str:
    """SQL for importer._key: the first 32 hex digits of sha256 of the parts joined by 0x1f."""
    joined = " || chr(31) || ".join(parts)
    return f"left(encode(sha256(convert_to({joined}, 'UTF8')), 'hex'), 32)"


def upgrade() -> None:
    op.add_column("raw_dialogue", sa.Column("import_key", sa.Text, nullable=True))
    op.execute(
        "UPDATE raw_dialogue SET import_key = metadata->>'import_key' WHERE metadata ? 'import_key'"
    )
    # Position keys: _key("turn", session, position, speaker, content), position counted
    # within the session in file order (which is id order for an imported session).
    legacy = _digest("'turn'", "session_id", "position::text", "speaker", "content")
    said = _digest("'said'", "session_id", "speaker", "content", "occurrence::text")
    op.execute(
        f"""
        WITH keyed AS (
            SELECT namespace, session_id, import_key, min(id) AS first_id
            FROM raw_dialogue
            WHERE import_key IS NOT NULL AND import_key NOT LIKE 'locomo:%'
            GROUP BY namespace, session_id, import_key
        ), imported AS (
            -- copies a past concurrent import stored share their original's position
            SELECT k.namespace, k.session_id, k.import_key, k.first_id, r.speaker, r.content,
                   row_number() OVER (
                       PARTITION BY k.namespace, k.session_id ORDER BY k.first_id
                   ) AS position
            FROM keyed k JOIN raw_dialogue r ON r.id = k.first_id
        ), positional AS (
            SELECT * FROM imported WHERE import_key = {legacy}
        ), rekeyed AS (
            SELECT namespace, import_key AS legacy_key, {said} AS key
            FROM (
                SELECT *, row_number() OVER (
                           PARTITION BY namespace, session_id, speaker, content ORDER BY first_id
                       ) AS occurrence
                FROM positional
            ) counted
        )
        UPDATE raw_dialogue r
        SET import_key = rekeyed.key,
            metadata = jsonb_set(r.metadata, '{{import_key}}', to_jsonb(rekeyed.key))
        FROM rekeyed
        WHERE r.namespace = rekeyed.namespace AND r.import_key = rekeyed.legacy_key
        """
    )
    op.execute(
        """
        WITH copies AS (
            SELECT id, first_value(id) OVER (
                       PARTITION BY namespace, import_key ORDER BY id
                   ) AS original
            FROM raw_dialogue WHERE import_key IS NOT NULL
        )
        UPDATE raw_dialogue r
        SET import_key = NULL,
            metadata = r.metadata || jsonb_build_object('import_duplicate_of', copies.original)
        FROM copies
        WHERE r.id = copies.id AND copies.id <> copies.original
        """
    )
    op.create_index(
        "ux_raw_dialogue_import_key",
        "raw_dialogue",
        ["namespace", "import_key"],
        unique=True,
        postgresql_where=sa.text("import_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ux_raw_dialogue_import_key", table_name="raw_dialogue")
    op.drop_column("raw_dialogue", "import_key")
