"""Tenant keys: every tenant table is keyed by namespace first, so a tenant-sharding engine
(Citus, distributed by ``namespace``) can place each namespace's rows, and every key over
them, on one shard.

- Primary keys become (namespace, id) (session_state's already was (namespace, session_id)).
  Ids keep their sequences: they stay globally unique, and clients keep naming rows by id.
- Unique constraints already led with namespace (nodes (namespace, label, name); edges
  unique among current ones; raw turns' import keys); they stay.
- Foreign keys run from (namespace, x) to (namespace, id): a node's insight, episode and raw
  turn, an edge's two nodes, a fact's successor. An edge still goes with either of its nodes
  (ON DELETE CASCADE). The links that PostgreSQL used to clear (ON DELETE SET NULL) have no
  action now: Citus refuses SET NULL in a foreign key that holds the distribution column,
  whatever columns it names (PostgreSQL 15's ``SET NULL (insight_id)`` included), so erasing
  a memory detaches what referred to it first, in the same transaction (memory/erasure.py).
- The indexes behind those keys lead with namespace: a node's insight, episode and raw turn,
  a fact's successor.

A reference across namespaces could not be made through the API (every write checks its ids
in its own namespace, and row-level security hides other namespaces), but the old keys did
not forbid one. Before the new keys are checked, any such reference is cleared (a node's
link, a fact's successor) and an edge between namespaces is deleted, as if its far end had
been deleted: no namespace ever saw it whole.

The SQL functions of migrations 0010 and 0012 already pin every statement to their ``ns``
argument (tests/db/test_statement_routing.py checks the statements inside them), so none is
redefined; the row-level security policies of 0007 are untouched.

Downgrade restores the keys of migration 0012 exactly (names, columns, actions).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

from typing import NamedTuple

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

ID_TABLES = (
    "raw_dialogue",
    "working_memory",
    "stale_memory",
    "insights",
    "episodes",
    "nodes",
    "edges",
)
FACT_TABLES = ("insights", "episodes", "edges")


class ForeignKey(NamedTuple):
    """A foreign key as migration 0012 left it (``before``) and as this one makes it. (Not a
    dataclass: Alembic loads a migration without registering its module.)"""

    table: str
    column: str
    referenced: str
    name: str
    cascade: bool = False  # ON DELETE CASCADE, before and after; else SET NULL before, none after

    @property
    def name_before(self) -> str:
        return f"{self.table}_{self.column}_fkey"

    @property
    def action_before(self) -> str:
        return " ON DELETE CASCADE" if self.cascade else " ON DELETE SET NULL"

    @property
    def action(self) -> str:
        return " ON DELETE CASCADE" if self.cascade else ""


FOREIGN_KEYS = (
    ForeignKey("nodes", "insight_id", "insights", "fk_nodes_ns_insight"),
    ForeignKey("nodes", "episode_id", "episodes", "fk_nodes_ns_episode"),
    ForeignKey("nodes", "raw_id", "raw_dialogue", "fk_nodes_ns_raw"),
    ForeignKey("edges", "source_id", "nodes", "fk_edges_ns_source", cascade=True),
    ForeignKey("edges", "target_id", "nodes", "fk_edges_ns_target", cascade=True),
    *(
        ForeignKey(table, "superseded_by", table, f"fk_{table}_ns_superseded_by")
        for table in FACT_TABLES
    ),
)
# (table, column, index before, index after): partial indexes on a reference
REFERENCE_INDEXES = (
    ("nodes", "insight_id", "ix_nodes_insight", "ix_nodes_ns_insight"),
    ("nodes", "episode_id", "ix_nodes_episode", "ix_nodes_ns_episode"),
    ("nodes", "raw_id", "ix_nodes_raw", "ix_nodes_ns_raw"),
    *(
        (table, "superseded_by", f"ix_{table}_superseded_by", f"ix_{table}_ns_superseded_by")
        for table in FACT_TABLES
    ),
)


def _clear_references_across_namespaces() -> None:
    for key in FOREIGN_KEYS:
        # what the old key's action would have done, had the far end been deleted
        action = (
            f"DELETE FROM {key.table} t USING {key.referenced} r"
            if key.cascade
            else f"UPDATE {key.table} t SET {key.column} = NULL FROM {key.referenced} r"
        )
        op.execute(f"{action} WHERE r.id = t.{key.column} AND r.namespace <> t.namespace")


def upgrade() -> None:
    _clear_references_across_namespaces()
    for key in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {key.table} DROP CONSTRAINT {key.name_before}")
    for table in ID_TABLES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY (namespace, id)"
        )
    for table, column, before, after in REFERENCE_INDEXES:
        op.execute(f"DROP INDEX {before}")
        op.execute(
            f"CREATE INDEX {after} ON {table} (namespace, {column}) WHERE {column} IS NOT NULL"
        )
    for key in FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE {key.table} ADD CONSTRAINT {key.name} "
            f"FOREIGN KEY (namespace, {key.column}) "
            f"REFERENCES {key.referenced} (namespace, id){key.action}"
        )


def downgrade() -> None:
    for key in FOREIGN_KEYS:
        op.execute(f"ALTER TABLE {key.table} DROP CONSTRAINT {key.name}")
    for table, column, before, after in REFERENCE_INDEXES:
        op.execute(f"DROP INDEX {after}")
        op.execute(f"CREATE INDEX {before} ON {table} ({column}) WHERE {column} IS NOT NULL")
    for table in ID_TABLES:
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY (id)"
        )
    for key in FOREIGN_KEYS:
        op.execute(
            f"ALTER TABLE {key.table} ADD CONSTRAINT {key.name_before} FOREIGN KEY ({key.column}) "
            f"REFERENCES {key.referenced} (id){key.action_before}"
        )
