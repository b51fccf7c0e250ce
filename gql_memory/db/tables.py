"""Table definitions (SQLAlchemy Core). Migrations in migrations/ create exactly these
(tests/db/test_models_match_migrations.py compares the two).

Tenant tables hold one namespace's memories. Each is keyed by ``namespace`` first: its primary
key is (namespace, id), every unique constraint starts with namespace, and every foreign key
runs from (namespace, x) to (namespace, id) of a table of the same namespace (migration 0013).
So a tenant-sharding engine (Citus, distributed by namespace) can place a namespace's rows on
one shard and keep every key there. Ids stay globally unique (one sequence per table): clients
name a row by its id alone, the server adds the namespace of the request.
"""

from __future__ import annotations

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

from gql_memory.db.indexes import hnsw_index

metadata = MetaData()

ARCHIVE_REASONS = ("LRU_EVICTION", "MANUAL_ARCHIVE", "DECAY_EVICTION")
REF_KINDS = ("INSIGHT", "EPISODE", "RAW", "NODE")
SUPERSESSION_REASONS = ("caller", "merged", "updated")
API_KEY_SCOPES = ("read", "write", "admin")

# A statement that deliberately reads every namespace (an operator's command over the whole
# database, never a request) carries this comment: a distributed engine runs it on every
# shard. tests/db/test_statement_routing.py holds every other statement to one namespace.
ALL_NAMESPACES = "/* all namespaces */"


def _namespace() -> Column[str]:
    return Column("namespace", String(255), nullable=False, server_default="default")


def _id() -> Column[int]:
    """A row's id: from the table's sequence, globally unique, second in the primary key."""
    return Column("id", BigInteger, nullable=False, autoincrement=True)


def _tenant_key(table: str) -> PrimaryKeyConstraint:
    return PrimaryKeyConstraint("namespace", "id", name=f"{table}_pkey")


def _waiting_index(table: str) -> Index:
    """The rows stored while the embedder was down, for the worker that embeds them (0016)."""
    return Index(
        f"ix_{table}_embedding_waiting",
        "namespace",
        "id",
        postgresql_where=text("embedding_waiting"),
    )


def _validity(table: str) -> list[Column[object] | CheckConstraint | ForeignKeyConstraint | Index]:
    """Time-aware facts (migration 0011): valid in [valid_from, valid_to), NULL = still valid,
    and the fact of the same namespace that superseded this one."""
    return [
        Column("valid_from", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("valid_to", DateTime(timezone=True), nullable=True),
        Column("superseded_by", BigInteger, nullable=True),
        # why it was closed (0017): caller, or consolidation's merged / updated
        Column("supersession_reason", Text, nullable=True),
        CheckConstraint(
            "valid_to IS NULL OR valid_to >= valid_from", name=f"ck_{table}_valid_interval"
        ),
        CheckConstraint(
            "supersession_reason IS NULL OR supersession_reason IN ('caller', 'merged', 'updated')",
            name=f"ck_{table}_supersession_reason",
        ),
        # no ON DELETE action: deleting a fact detaches its predecessors first (Citus refuses
        # SET NULL in a key that holds the distribution column)
        ForeignKeyConstraint(
            ["namespace", "superseded_by"],
            [f"{table}.namespace", f"{table}.id"],
            name=f"fk_{table}_ns_superseded_by",
        ),
        # who superseded whom, both ways: `supersedes` is the reverse lookup
        Index(
            f"ix_{table}_ns_superseded_by",
            "namespace",
            "superseded_by",
            postgresql_where=text("superseded_by IS NOT NULL"),
        ),
    ]


raw_dialogue = Table(
    "raw_dialogue",
    metadata,
    _id(),
    _namespace(),
    Column("session_id", String(255), nullable=False),
    Column("speaker", String(50), nullable=False),
    Column("content", Text, nullable=False),
    Column("metadata", JSONB, nullable=True),
    Column("timestamp", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    Column("embedding", Vector(), nullable=True),
    # stored while the embedder was down: the vector is still to come (migration 0016)
    Column("embedding_waiting", Boolean, nullable=False, server_default=false()),
    # set by transcript imports only: unique per namespace, so no import stores a turn twice
    Column("import_key", Text, nullable=True),
    _tenant_key("raw_dialogue"),
    Index("ix_raw_dialogue_ns_session_ts", "namespace", "session_id", "timestamp"),
    Index("ix_raw_dialogue_ns_ts", "namespace", "timestamp"),
    Index("ix_raw_dialogue_tsv", "content_tsv", postgresql_using="gin"),
    hnsw_index("raw_dialogue"),
    _waiting_index("raw_dialogue"),
    Index(
        "ux_raw_dialogue_import_key",
        "namespace",
        "import_key",
        unique=True,
        postgresql_where=text("import_key IS NOT NULL"),
    ),
)

working_memory = Table(
    "working_memory",
    metadata,
    _id(),
    _namespace(),
    Column("session_id", String(255), nullable=False, server_default="default"),
    Column("content", Text, nullable=False),
    Column("importance", Float, nullable=False),
    Column("last_accessed", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("attention", Float, nullable=True),
    Column("mention_count", Integer, nullable=False, server_default="0"),
    Column("last_event", BigInteger, nullable=False, server_default="0"),
    Column("ref_kind", String(16), nullable=True),
    Column("ref_id", BigInteger, nullable=True),
    Column("provenance", JSONB, nullable=True),
    _tenant_key("working_memory"),
    CheckConstraint("importance >= 0 AND importance <= 1", name="ck_working_memory_importance"),
    CheckConstraint(
        "ref_kind IS NULL OR ref_kind IN ('INSIGHT', 'EPISODE', 'RAW', 'NODE')",
        name="ck_working_memory_ref_kind",
    ),
    Index("ix_working_memory_ns_session_accessed", "namespace", "session_id", "last_accessed"),
)

stale_memory = Table(
    "stale_memory",
    metadata,
    _id(),
    _namespace(),
    Column("session_id", String(255), nullable=False, server_default="default"),
    Column("original_id", BigInteger, nullable=True),
    Column("original_content", Text, nullable=False),
    Column("importance", Float, nullable=False),
    Column("reason", String(32), nullable=False),
    Column("archived_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("ref_kind", String(16), nullable=True),
    Column("ref_id", BigInteger, nullable=True),
    Column("provenance", JSONB, nullable=True),
    _tenant_key("stale_memory"),
    CheckConstraint(
        "reason IN ('LRU_EVICTION', 'MANUAL_ARCHIVE', 'DECAY_EVICTION')",
        name="ck_stale_memory_reason",
    ),
    Index("ix_stale_memory_ns_archived", "namespace", "archived_at"),
    Index("ix_stale_memory_ns_session_archived", "namespace", "session_id", "archived_at"),
)

# Semantic layers (migration 0002). The vector dimension is fixed per database and recorded
# in embedding_config; the Core definitions leave it open.
embedding_config = Table(
    "embedding_config",
    metadata,
    Column("id", SmallInteger, primary_key=True, server_default="1"),
    Column("provider", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("dim", Integer, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # how the two sides were marked (migration 0006): part of what makes vectors comparable
    Column("query_prefix", Text, nullable=False, server_default=""),
    Column("document_prefix", Text, nullable=False, server_default=""),
    Column("query_input_type", Text, nullable=False, server_default=""),
    Column("document_input_type", Text, nullable=False, server_default=""),
    # a re-embed in progress: the signature it embeds with (migration 0009), else NULL
    Column("reembed_target", JSONB, nullable=True),
    # how a raw turn's document is made (migration 0015, memory/turn_embedding.py)
    Column(
        "raw_turn_recipe",
        JSONB,
        nullable=False,
        server_default=text("""'{"context_tokens": 96, "pooled_alone": false}'::jsonb"""),
    ),
    CheckConstraint("id = 1", name="ck_embedding_config_single_row"),
)

insights = Table(
    "insights",
    metadata,
    _id(),
    _namespace(),
    Column("content", Text, nullable=False),
    Column("embedding", Vector(), nullable=True),  # NULL: waiting (0016)
    Column("embedding_waiting", Boolean, nullable=False, server_default=false()),
    Column("source_ids", ARRAY(BigInteger), nullable=False, server_default="{}"),
    Column("metadata", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    Column("digest_of", String(255), nullable=True),  # a session's digest (0017)
    *_validity("insights"),
    _tenant_key("insights"),
    Index("ix_insights_ns_created", "namespace", "created_at"),
    # listing current facts newest first stays one index range
    Index(
        "ix_insights_ns_created_current",
        "namespace",
        "created_at",
        "id",
        postgresql_where=text("valid_to IS NULL"),
    ),
    Index("ix_insights_tsv", "content_tsv", postgresql_using="gin"),
    hnsw_index("insights"),
    _waiting_index("insights"),
    Index(
        "ix_insights_ns_digest_of",
        "namespace",
        "digest_of",
        postgresql_where=text("digest_of IS NOT NULL"),
    ),
)

episodes = Table(
    "episodes",
    metadata,
    _id(),
    _namespace(),
    Column("query", Text, nullable=False),
    Column("reward", Float, nullable=False),
    Column("reflection", Text, nullable=False),
    Column("embedding", Vector(), nullable=True),  # NULL: waiting (0016)
    Column("embedding_waiting", Boolean, nullable=False, server_default=false()),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    *_validity("episodes"),
    _tenant_key("episodes"),
    CheckConstraint("reward >= -1 AND reward <= 1", name="ck_episodes_reward"),
    Index("ix_episodes_ns_created", "namespace", "created_at"),
    Index("ix_episodes_tsv", "content_tsv", postgresql_using="gin"),
    hnsw_index("episodes"),
    _waiting_index("episodes"),
)

# Graph and decay (migration 0003).
session_state = Table(
    "session_state",
    metadata,
    _namespace(),
    Column("session_id", String(255), nullable=False),
    Column("event_counter", BigInteger, nullable=False, server_default="0"),
    PrimaryKeyConstraint("namespace", "session_id", name="session_state_pkey"),
)

nodes = Table(
    "nodes",
    metadata,
    _id(),
    _namespace(),
    Column("label", String(255), nullable=False),
    Column("name", Text, nullable=False),
    Column("properties", JSONB, nullable=True),
    Column("insight_id", BigInteger, nullable=True),
    Column("episode_id", BigInteger, nullable=True),
    Column("raw_id", BigInteger, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # an automatic entity merged into another by consolidation is its alias (0017)
    Column("merged_into", BigInteger, nullable=True),
    _tenant_key("nodes"),
    UniqueConstraint("namespace", "label", "name", name="uq_nodes_ns_label_name"),
    # the memory a node stands for, in its namespace; no ON DELETE action: erasing the memory
    # detaches its nodes first (Citus refuses SET NULL in a key that holds the distribution
    # column)
    ForeignKeyConstraint(
        ["namespace", "insight_id"],
        ["insights.namespace", "insights.id"],
        name="fk_nodes_ns_insight",
    ),
    ForeignKeyConstraint(
        ["namespace", "episode_id"],
        ["episodes.namespace", "episodes.id"],
        name="fk_nodes_ns_episode",
    ),
    ForeignKeyConstraint(
        ["namespace", "raw_id"],
        ["raw_dialogue.namespace", "raw_dialogue.id"],
        name="fk_nodes_ns_raw",
    ),
    Index("ix_nodes_ns_created", "namespace", "created_at"),
    Index(
        "ix_nodes_ns_label_created",
        "namespace",
        "label",
        text("created_at DESC"),
        text("id DESC"),
    ),
    Index(
        "ix_nodes_ns_insight",
        "namespace",
        "insight_id",
        postgresql_where=text("insight_id IS NOT NULL"),
    ),
    Index(
        "ix_nodes_ns_episode",
        "namespace",
        "episode_id",
        postgresql_where=text("episode_id IS NOT NULL"),
    ),
    Index("ix_nodes_ns_raw", "namespace", "raw_id", postgresql_where=text("raw_id IS NOT NULL")),
    ForeignKeyConstraint(
        ["namespace", "merged_into"],
        ["nodes.namespace", "nodes.id"],
        name="fk_nodes_ns_merged_into",
    ),
    Index(
        "ix_nodes_ns_merged_into",
        "namespace",
        "merged_into",
        postgresql_where=text("merged_into IS NOT NULL"),
    ),
)

edges = Table(
    "edges",
    metadata,
    _id(),
    _namespace(),
    Column("source_id", BigInteger, nullable=False),
    Column("target_id", BigInteger, nullable=False),
    Column("relation", Text, nullable=False),
    Column("weight", Float, nullable=False, server_default="1.0"),
    Column("properties", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    *_validity("edges"),
    _tenant_key("edges"),
    CheckConstraint("source_id <> target_id", name="ck_edges_no_self_loop"),
    # deleting a node deletes its edges
    ForeignKeyConstraint(
        ["namespace", "source_id"],
        ["nodes.namespace", "nodes.id"],
        name="fk_edges_ns_source",
        ondelete="CASCADE",
    ),
    ForeignKeyConstraint(
        ["namespace", "target_id"],
        ["nodes.namespace", "nodes.id"],
        name="fk_edges_ns_target",
        ondelete="CASCADE",
    ),
    # traversal and the search's graph statement read an edge's far end and validity from
    # the index alone (index-only scans), now and as of an instant; both directions
    Index(
        "ix_edges_ns_source",
        "namespace",
        "source_id",
        "relation",
        postgresql_include=["target_id", "valid_from", "valid_to"],
    ),
    Index(
        "ix_edges_ns_target",
        "namespace",
        "target_id",
        "relation",
        postgresql_include=["source_id", "valid_from", "valid_to"],
    ),
    # unique among the edges valid now: a relation can be closed and drawn again
    Index(
        "ux_edges_ns_src_tgt_rel_current",
        "namespace",
        "source_id",
        "target_id",
        "relation",
        unique=True,
        postgresql_where=text("valid_to IS NULL"),
    ),
)

# Consolidation (migration 0017): the journal of its actions, each with what stood before it
# (``changes``, enough to undo it exactly), and where the scheduled pass left off.
CONSOLIDATION_KINDS = ("merge", "supersede", "digest", "entity_merge")
consolidation_actions = Table(
    "consolidation_actions",
    metadata,
    _id(),
    _namespace(),
    Column("kind", String(32), nullable=False),
    Column("target_id", BigInteger, nullable=True),
    Column("ids", ARRAY(BigInteger), nullable=False, server_default="{}"),
    Column("reason", Text, nullable=False),
    Column("evidence", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("changes", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("undone_at", DateTime(timezone=True), nullable=True),
    _tenant_key("consolidation_actions"),
    CheckConstraint(
        "kind IN ('merge', 'supersede', 'digest', 'entity_merge')",
        name="ck_consolidation_actions_kind",
    ),
    Index("ix_consolidation_actions_ns_created", "namespace", text("id DESC")),
)

consolidation_cursors = Table(
    "consolidation_cursors",
    metadata,
    _namespace(),
    Column("insight_id", BigInteger, nullable=False, server_default="0"),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("namespace", name="consolidation_cursors_pkey"),
)

# API keys are not memory: they span namespaces (each key is bound to one) and only the
# server and the `keys` commands read them. The key itself is never stored, only its hash.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("namespace", String(255), nullable=False),
    Column("name", String(255), nullable=True),
    Column("key_hash", String(64), nullable=False),
    Column("key_prefix", String(16), nullable=False),
    Column("scopes", ARRAY(Text), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(
        "cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write', 'admin']::text[]",
        name="ck_api_keys_scopes",
    ),
    Index("ux_api_keys_key_hash", "key_hash", unique=True),
)

TENANT_TABLES = frozenset(
    {
        "raw_dialogue",
        "working_memory",
        "stale_memory",
        "insights",
        "episodes",
        "session_state",
        "nodes",
        "edges",
        "consolidation_actions",
        "consolidation_cursors",
    }
)
# The tables that are no tenant's, and why: a distributed engine keeps one copy of each on
# every node (Citus reference tables), or, for the schema version, on the coordinator only.
GLOBAL_TABLES = {
    "api_keys": "the key registry: a key is looked up by its hash before its namespace is known",
    "embedding_config": "how every vector of the database was embedded (one row)",
    "alembic_version": "the schema version (Alembic's)",
}
