"""The HNSW index DDL is the text migration 0002 has always run: the re-embed rebuilds the
index with it, so a re-embedded or upgraded database matches a new one (whose schema
tests/db/test_models_match_migrations.py compares with the metadata)."""

from __future__ import annotations

import pytest

from gql_memory.db.indexes import hnsw_index_ddl


@pytest.mark.parametrize("table", ["insights", "episodes", "raw_dialogue"])
def test_the_ddl_is_byte_identical_to_migration_0002s(table: str) -> None:
    assert hnsw_index_ddl(table) == (
        f"CREATE INDEX ix_{table}_embedding_hnsw ON {table} USING hnsw "
        "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )
