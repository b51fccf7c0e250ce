"""Row-level security: the server's role sees only the namespace its transaction names.

Creates the non-superuser role the server runs its requests as (``gql_memory_app`` unless
GQL_MEMORY_DATABASE_ROLE says otherwise; kept if it exists, e.g. made by a DBA), grants it
what requests need and nothing more, and puts a policy on every tenant table:
``namespace = current_setting('app.namespace')``, which the server sets per transaction.
The owner (who runs migrations and admin commands) is not subject to the policies.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

DEFAULT_ROLE = "gql_memory_app"
POLICY = "tenant_isolation"
LEXEME_STATS = "gql_memory_lexeme_stats"
TENANT_TABLES = (
    "raw_dialogue",
    "working_memory",
    "stale_memory",
    "insights",
    "episodes",
    "session_state",
    "nodes",
    "edges",
)
# Tables the server reads but never writes during requests.
READ_ONLY_TABLES = ("api_keys", "embedding_config", "alembic_version")


def _role() -> str:
    return context.config.attributes.get("database_role") or DEFAULT_ROLE


def upgrade() -> None:
    role = _role()
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
                CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
            END IF;
        END
        $$
        """
    )
    op.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
    for table in TENANT_TABLES:
        op.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{table}" TO "{role}"')
        op.execute(f'ALTER TABLE "{table}" ENABLE ROW LEVEL SECURITY')
        op.execute(
            f'CREATE POLICY {POLICY} ON "{table}" TO "{role}" '
            "USING (namespace = current_setting('app.namespace', true)) "
            "WITH CHECK (namespace = current_setting('app.namespace', true))"
        )
    for table in READ_ONLY_TABLES:
        op.execute(f'GRANT SELECT ON "{table}" TO "{role}"')
    op.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{role}"')
    # pg_stats hides the statistics of tables under row-level security; the full-text leg
    # reads how common each query lexeme is (to rank rare ones first) through this function,
    # which answers only that, for the tsvector columns of the memory tables.
    schema = op.get_bind().execute(sa.text("SELECT current_schema()")).scalar()
    op.execute(
        f"""
        CREATE FUNCTION {LEXEME_STATS}(table_name text)
        RETURNS TABLE (elems text[], freqs real[])
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, pg_temp
        AS $$
            SELECT CAST(CAST(most_common_elems AS text) AS text[]), most_common_elem_freqs
            FROM pg_stats
            WHERE schemaname = '{schema}' AND tablename = table_name
              AND tablename IN ('raw_dialogue', 'insights', 'episodes')
              AND attname = 'content_tsv'
        $$
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {LEXEME_STATS}(text) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {LEXEME_STATS}(text) TO "{role}"')
    # Under row-level security PostgreSQL only uses an index for a condition whose operator
    # is LEAKPROOF; full-text matching (tsvector @@ tsquery) is not marked so, which would
    # turn every text search into a scan of the namespace. It reveals nothing about its
    # arguments but its result, so a superuser marks it (elsewhere the server logs how to).
    op.execute(
        """
        DO $$
        BEGIN
            IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
            END IF;
        END
        $$
        """
    )


def downgrade() -> None:
    role = _role()
    op.execute(f"DROP FUNCTION IF EXISTS {LEXEME_STATS}(text)")
    for table in TENANT_TABLES:
        op.execute(f'DROP POLICY IF EXISTS {POLICY} ON "{table}"')
        op.execute(f'ALTER TABLE "{table}" DISABLE ROW LEVEL SECURITY')
        op.execute(f'REVOKE ALL ON "{table}" FROM "{role}"')
    for table in READ_ONLY_TABLES:
        op.execute(f'REVOKE ALL ON "{table}" FROM "{role}"')
    op.execute(f'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM "{role}"')
    op.execute(f'REVOKE USAGE ON SCHEMA public FROM "{role}"')
