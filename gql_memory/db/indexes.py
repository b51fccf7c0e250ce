"""The HNSW index of an embedded table: one definition for the migration that first builds it
(0002), the table metadata and the re-embed that rebuilds it.

Migration 0002 runs this DDL, so its text is part of the schema history: change it only with
a migration of its own (an upgraded database must keep matching a new one).
"""

from __future__ import annotations

from sqlalchemy import Index

HNSW_M = 16  # links per node of the graph
HNSW_EF_CONSTRUCTION = 64  # candidate list size while building
HNSW_OPCLASS = "vector_cosine_ops"  # every search ranks by cosine distance (<=>)


def hnsw_index_name(table: str) -> str:
    return f"ix_{table}_embedding_hnsw"


def hnsw_index_ddl(table: str) -> str:
    """CREATE INDEX of ``table``'s HNSW index on its embedding column (``table`` is one of
    the embedded tables the code names, never input)."""
    return (
        f"CREATE INDEX {hnsw_index_name(table)} ON {table} USING hnsw (embedding {HNSW_OPCLASS}) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
    )


def hnsw_index(table: str) -> Index:
    """The same index for the table metadata (tests/db/test_models_match_migrations.py)."""
    return Index(
        hnsw_index_name(table),
        "embedding",
        postgresql_using="hnsw",
        postgresql_with={"m": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION},
        postgresql_ops={"embedding": HNSW_OPCLASS},
    )
