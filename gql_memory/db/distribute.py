"""Distribute a migrated database over a Citus cluster by namespace (docs/scaling.md, step 5).

Run on the coordinator as the owner, with the servers stopped. What it does, each step only
where it is not done yet (a second run changes nothing):

- the global tables (``tables.GLOBAL_TABLES`` but Alembic's) become reference tables;
- every tenant table (every table with a ``namespace`` column, found in the catalog, so a
  later migration's table is taken up by the next run) is distributed by ``namespace``,
  co-located with the others; the foreign keys between tenant tables are dropped first and
  restored after, as PostgreSQL reports them;
- the schema's functions (migrations 0007, 0010, 0012, 0014) are created on the workers
  (``create_distributed_function`` without a distribution argument: calls still run on the
  coordinator, where LISTEN/NOTIFY and the advisory locks are);
- the request role may log in (the coordinator connects to the workers as it); the
  database forwards ``SET LOCAL app.namespace`` to the workers
  (``citus.propagate_set_commands = 'local'``), so row-level security holds on the shards;
  full-text matching is LEAKPROOF on the workers too (see migration 0007).

It refuses, changing nothing, on a database without Citus, without worker nodes, or not
migrated.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db.database import Database
from gql_memory.db.tables import GLOBAL_TABLES
from gql_memory.errors import ConfigurationError

log = logging.getLogger(__name__)

# The table the others are co-located with (any tenant table would do; this one is first
# in docs/scaling.md).
ANCHOR = "raw_dialogue"
NOT_REFERENCE = frozenset({"alembic_version"})  # migrations run on the coordinator only
FORWARDED_SETTING = ("citus.propagate_set_commands", "local")
LEAKPROOF_MATCH = "pg_catalog.ts_match_vq(tsvector, tsquery)"


class DistributionRefused(ConfigurationError):
    """The database cannot be distributed as it is; the message says what to do first."""


@dataclass
class Distribution:
    """What a run changed, one line per change (empty: it was all done already)."""

    changes: list[str] = field(default_factory=list)

    def did(self, change: str) -> None:
        log.info("distribute: %s", change)
        self.changes.append(change)


async def distribute(owner: Database, role: str) -> Distribution:
    """Bring the coordinator's database to the distributed layout (module doc)."""
    async with owner.write() as conn:
        await _refuse_unless_ready(conn, role)
    done = Distribution()
    async with owner.write() as conn:
        # one transaction: DDL on distributed tables then functions need Citus's one
        # connection per worker (its parallel mode refuses the mix)
        await conn.execute(text("SET LOCAL citus.multi_shard_modify_mode = 'sequential'"))
        await _reference_tables(conn, done)
        await _tenant_tables(conn, done)
        await _functions(conn, done)
        await _role_logs_in(conn, role, done)
        await _forwarded_namespace(conn, done)
    # run_command_on_workers uses connections of its own, outside that transaction
    async with owner.write() as conn:
        await _leakproof_on_workers(conn, done)
    return done


async def _refuse_unless_ready(conn: AsyncConnection, role: str) -> None:
    citus = await conn.scalar(text("SELECT extversion FROM pg_extension WHERE extname = 'citus'"))
    if citus is None:
        raise DistributionRefused(
            "this database has no Citus: install Citus on every node, add 'citus' to "
            "shared_preload_libraries, run CREATE EXTENSION citus in this database on each "
            "node, then add the workers on the coordinator with citus_add_node(); nothing "
            "was changed"
        )
    workers = await conn.scalar(
        text(
            "SELECT count(*) FROM pg_dist_node "
            "WHERE groupid <> 0 AND noderole = 'primary' AND isactive"
        )
    )
    if not workers:
        raise DistributionRefused(
            "Citus has no active worker node: add each with citus_add_node('<host>', <port>) "
            "on the coordinator (and citus_set_coordinator_host() for the coordinator "
            "itself); nothing was changed"
        )
    if await conn.scalar(text("SELECT to_regclass('alembic_version')")) is None:
        raise DistributionRefused(
            "this database is not migrated: run `gql-memory migrate` with DATABASE_URL "
            "naming the coordinator first; nothing was changed"
        )
    if not await conn.scalar(text("SELECT count(*) FROM pg_roles WHERE rolname = :r"), {"r": role}):
        raise DistributionRefused(
            f"the request role {role!r} (GQL_MEMORY_DATABASE_ROLE) does not exist: run "
            "`gql-memory migrate` with the same settings first; nothing was changed"
        )


async def _distributed(conn: AsyncConnection) -> dict[str, str]:
    """Each Citus table of the schema and its kind ('h' hash-distributed, 'n' reference)."""
    rows = await conn.execute(
        text(
            "SELECT c.relname, p.partmethod::text FROM pg_dist_partition p "
            "JOIN pg_class c ON c.oid = p.logicalrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace"
        )
    )
    return {name: method for name, method in rows.all()}


async def tenant_tables(conn: AsyncConnection) -> list[str]:
    """Every table of the schema with a ``namespace`` column, but the declared global ones."""
    rows = await conn.execute(
        text(
            "SELECT c.relname FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'namespace' "
            "AND NOT a.attisdropped "
            "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
            "AND c.relnamespace = current_schema()::regnamespace ORDER BY c.relname"
        )
    )
    return [name for name in rows.scalars() if name not in GLOBAL_TABLES]


async def _reference_tables(conn: AsyncConnection, done: Distribution) -> None:
    distributed = await _distributed(conn)
    for table in sorted(set(GLOBAL_TABLES) - NOT_REFERENCE):
        exists = await conn.scalar(text("SELECT to_regclass(:t)"), {"t": table})
        if exists is None or table in distributed:
            continue
        await conn.execute(text("SELECT create_reference_table(:t)"), {"t": table})
        done.did(f"{table}: reference table (a copy on every node)")


async def _tenant_tables(conn: AsyncConnection, done: Distribution) -> None:
    distributed = await _distributed(conn)
    tables = await tenant_tables(conn)
    pending = [t for t in tables if t not in distributed]
    if not pending:
        return
    placed = [t for t in tables if distributed.get(t) == "h"]
    anchor = ANCHOR if ANCHOR in placed else (placed[0] if placed else None)
    if anchor is None:
        anchor = ANCHOR if ANCHOR in pending else pending[0]
        pending.remove(anchor)
        pending.insert(0, anchor)
    keys = (
        await conn.execute(
            text(
                "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE contype = 'f' "
                "AND (conrelid::regclass::text = ANY(:t) OR confrelid::regclass::text = ANY(:t)) "
                "ORDER BY conrelid::regclass::text, conname"
            ),
            {"t": pending},
        )
    ).all()
    for table, name, _ in keys:
        await conn.execute(text(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"'))
    for table in pending:
        if table == anchor:
            await conn.execute(
                text("SELECT create_distributed_table(:t, 'namespace')"), {"t": table}
            )
        else:
            await conn.execute(
                text("SELECT create_distributed_table(:t, 'namespace', colocate_with => :a)"),
                {"t": table, "a": anchor},
            )
        done.did(f"{table}: distributed by namespace, co-located with {anchor}")
    for table, name, definition in keys:
        await conn.execute(text(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}'))
    if keys:
        done.did(f"{len(keys)} foreign keys between tenant tables dropped and restored")


async def _functions(conn: AsyncConnection, done: Distribution) -> None:
    """The schema's own functions (not an extension's) that the workers do not have yet."""
    missing = await conn.execute(
        text(
            "SELECT p.oid::regprocedure::text FROM pg_proc p "
            "WHERE p.pronamespace = current_schema()::regnamespace "
            "AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
            "  AND d.objid = p.oid AND d.deptype = 'e') "
            "AND NOT EXISTS (SELECT FROM pg_dist_object o "
            "  WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid) "
            "ORDER BY 1"
        )
    )
    for signature in missing.scalars().all():
        await conn.execute(text("SELECT create_distributed_function(:f)"), {"f": signature})
        done.did(f"function {signature.split('(')[0]}: created on the workers")


async def _role_logs_in(conn: AsyncConnection, role: str, done: Distribution) -> None:
    can_login = await conn.scalar(
        text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :r"), {"r": role}
    )
    if not can_login:
        await conn.execute(text(f'ALTER ROLE "{role}" LOGIN'))
        done.did(
            f"role {role}: may log in (the coordinator connects to the workers as it; let "
            "it authenticate from the coordinator: pg_hba.conf, .pgpass or "
            "citus.node_conninfo)"
        )


async def _forwarded_namespace(conn: AsyncConnection, done: Distribution) -> None:
    name, value = FORWARDED_SETTING
    current = await conn.scalar(
        text(
            "SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_database d "
            "ON d.oid = s.setdatabase WHERE d.datname = current_database() AND s.setrole = 0"
        )
    )
    if f"{name}={value}" in (current or []):
        return
    database = await conn.scalar(text("SELECT quote_ident(current_database())"))
    await conn.execute(text(f"ALTER DATABASE {database} SET {name} = '{value}'"))
    done.did(
        f"database {database}: {name} = '{value}' (SET LOCAL app.namespace reaches the "
        "workers, where the shards' row-level security policies read it)"
    )


async def _leakproof_on_workers(conn: AsyncConnection, done: Distribution) -> None:
    rows = await conn.execute(
        text(
            "SELECT nodename, nodeport, result FROM run_command_on_workers("
            f"$$SELECT proleakproof FROM pg_proc WHERE oid = '{LEAKPROOF_MATCH}'::regprocedure$$)"
        )
    )
    if all(result == "t" for _, _, result in rows.all()):
        return
    await conn.execute(
        text(
            f"SELECT * FROM run_command_on_workers($$ALTER FUNCTION {LEAKPROOF_MATCH} LEAKPROOF$$)"
        )
    )
    done.did("workers: full-text matching marked LEAKPROOF (its index serves under the policies)")
