"""Table definitions (SQLAlchemy Core). Migrations in migrations/ create exactly these."""

from __future__ import annotations

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR

metadata = MetaData()

ARCHIVE_REASONS = ("LRU_EVICTION", "MANUAL_ARCHIVE", "DECAY_EVICTION")
REF_KINDS = ("INSIGHT", "EPISODE", "RAW", "NODE")
API_KEY_SCOPES = ("read", "write", "admin")


def _namespace() -> Column[str]:
    return Column("namespace", String(255), nullable=False, server_default="default")


raw_dialogue = Table(
    "raw_dialogue",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _namespace(),
    Column("session_id", String(255), nullable=False),
    Column("speaker", String(50), nullable=False),
    Column("content", Text, nullable=False),
    Column("metadata", JSONB, nullable=True),
    Column("timestamp", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    Column("embedding", Vector(), nullable=True),
    # set by transcript imports only: unique per namespace, so no import stores a turn twice
    Column("import_key", Text, nullable=True),
    Index("ix_raw_dialogue_ns_session_ts", "namespace", "session_id", "timestamp"),
    Index("ix_raw_dialogue_ns_ts", "namespace", "timestamp"),
    Index("ix_raw_dialogue_tsv", "content_tsv", postgresql_using="gin"),
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
    Column("id", BigInteger, primary_key=True, autoincrement=True),
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
    Column("id", BigInteger, primary_key=True, autoincrement=True),
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
    Column("id", SmallInteger, primary_key=True),
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
)

insights = Table(
    "insights",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _namespace(),
    Column("content", Text, nullable=False),
    Column("embedding", Vector(), nullable=False),
    Column("source_ids", ARRAY(BigInteger), nullable=False, server_default="{}"),
    Column("metadata", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    # time-aware facts (migration 0011): valid in [valid_from, valid_to), NULL = still valid
    Column("valid_from", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("valid_to", DateTime(timezone=True), nullable=True),
    Column("superseded_by", BigInteger, nullable=True),
)

episodes = Table(
    "episodes",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _namespace(),
    Column("query", Text, nullable=False),
    Column("reward", Float, nullable=False),
    Column("reflection", Text, nullable=False),
    Column("embedding", Vector(), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("content_tsv", TSVECTOR, nullable=True),
    # time-aware facts (migration 0011): valid in [valid_from, valid_to), NULL = still valid
    Column("valid_from", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("valid_to", DateTime(timezone=True), nullable=True),
    Column("superseded_by", BigInteger, nullable=True),
)

# Graph and decay (migration 0003).
session_state = Table(
    "session_state",
    metadata,
    _namespace(),
    Column("session_id", String(255), primary_key=True),
    Column("event_counter", BigInteger, nullable=False, server_default="0"),
)

nodes = Table(
    "nodes",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _namespace(),
    Column("label", String(255), nullable=False),
    Column("name", Text, nullable=False),
    Column("properties", JSONB, nullable=True),
    Column("insight_id", BigInteger, nullable=True),
    Column("episode_id", BigInteger, nullable=True),
    Column("raw_id", BigInteger, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

edges = Table(
    "edges",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    _namespace(),
    Column("source_id", BigInteger, nullable=False),
    Column("target_id", BigInteger, nullable=False),
    Column("relation", Text, nullable=False),
    Column("weight", Float, nullable=False, server_default="1.0"),
    Column("properties", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # time-aware facts (migration 0011): valid in [valid_from, valid_to), NULL = still valid
    Column("valid_from", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("valid_to", DateTime(timezone=True), nullable=True),
    Column("superseded_by", BigInteger, nullable=True),
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
