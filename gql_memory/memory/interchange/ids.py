"""The ids of an import (interchange/load.py): a file's ids are names within the file only.

Every row of the file gets a new id from its table's own sequence, and every id a record names
is replaced by the id of the row it names here, through a map kept in a temporary table of the
import's transaction (kind, old id -> new id), so memory stays constant however large the file.

- A reference with a foreign key (a node's memory, an edge's nodes, a supersession) that names
  no record of the file is an error naming its line.
- A historical reference without a key (an insight's source turns, what a working-memory item
  refers to, the original of an archived item) that names no record of the file gets a fresh
  id from the table's sequence, which no row has or will have.

So no id of a file ever reaches a row of another namespace. Supersession links may name a
later record of their kind: they are kept aside and set once every row of the kind is in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    exists,
    insert,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db.clauses import any_of
from gql_memory.memory.interchange.format import (
    BY_NAME,
    REF_KIND_RECORDS,
    Field,
    Kind,
    LineError,
    Record,
)

# The transaction's own id map and the supersessions to resolve once every row is in.
_scratch = MetaData()
ID_MAP = Table(
    "interchange_ids",
    _scratch,
    Column("kind", Text, primary_key=True),
    Column("old_id", BigInteger, primary_key=True),
    Column("new_id", BigInteger, nullable=False),
    Column("added", Integer, nullable=False),  # 1: a row this import added
    Index("interchange_ids_new", "kind", "new_id"),  # --merge: rows this import added
    prefixes=["TEMPORARY"],
    postgresql_on_commit="DROP",
)
PENDING = Table(
    "interchange_pending",
    _scratch,
    Column("kind", Text, nullable=False),
    Column("row_id", BigInteger, nullable=False),
    Column("old_target", BigInteger, nullable=False),
    Column("line", Integer, nullable=False),
    prefixes=["TEMPORARY"],
    postgresql_on_commit="DROP",
)


class IdMap:
    """The file's ids and what they stand for here, within the import's transaction."""

    def __init__(self, conn: AsyncConnection, namespace: str) -> None:
        self.conn = conn
        self.namespace = namespace

    async def create(self) -> None:
        """The map's tables, dropped when the transaction ends."""
        await self.conn.run_sync(lambda sync: _scratch.create_all(sync, checkfirst=False))

    async def allocate(self, table: Table, count: int) -> list[int]:
        """``count`` new ids from ``table``'s own sequence, ascending (rows keep their order)."""
        if not count:
            return []
        found = await self.conn.scalars(
            text("SELECT nextval(pg_get_serial_sequence(:t, 'id')) FROM generate_series(1, :n)"),
            {"t": table.name, "n": count},
        )
        return sorted(found)

    async def refuse_repeated_ids(self, kind: Kind, batch: list[Record]) -> None:
        """A record's id must be new to the file (this batch and every one before it)."""
        seen: dict[int, int] = {}
        for record in batch:
            first = seen.setdefault(record.values["id"], record.line)
            if first != record.line:
                raise LineError(
                    record.line, f"{kind.name} id {record.values['id']} repeats line {first}"
                )
        known = await self.mapped(kind.name, list(seen))
        for record in batch:
            if record.values["id"] in known:
                raise LineError(
                    record.line, f"{kind.name} id {record.values['id']} repeats an earlier record"
                )

    async def mapped(self, kind: str, old_ids: Iterable[int]) -> dict[int, int]:
        """The file's ids of ``kind`` known so far, old id -> new id."""
        wanted = sorted(set(old_ids))
        if not wanted:
            return {}
        found = await self.conn.execute(
            select(ID_MAP.c.old_id, ID_MAP.c.new_id).where(
                ID_MAP.c.kind == kind, any_of(ID_MAP.c.old_id, wanted)
            )
        )
        return {old: new for old, new in found}

    async def remember(
        self, kind: Kind, batch: list[Record], ids: dict[int, int], added: set[int]
    ) -> None:
        """The batch's ids, old -> new; ``added``: the records (by ``id()``) stored as new
        rows, not matched to a row the namespace held (--merge)."""
        await self.conn.execute(
            insert(ID_MAP),
            [
                {
                    "kind": kind.name,
                    "old_id": r.values["id"],
                    "new_id": ids[r.values["id"]],
                    "added": int(id(r) in added),
                }
                for r in batch
            ],
        )

    async def added_by_this_import(self, kind: Kind, new_ids: list[int]) -> set[int]:
        """Which of these rows of ``kind``'s table this import added (for --merge's
        matching: a file's two equal records stay two rows)."""
        if not new_ids:
            return set()
        found = await self.conn.scalars(
            select(ID_MAP.c.new_id).where(
                ID_MAP.c.kind == kind.name, ID_MAP.c.added == 1, any_of(ID_MAP.c.new_id, new_ids)
            )
        )
        return set(found)

    async def remap_references(self, kind: Kind, batch: list[Record]) -> None:
        """Every id a record names, replaced by the id of the row it names here (module doc);
        a deferred one is kept aside as ``_<column>`` for ``defer``."""
        for f in kind.fields:
            if f.ref is None:
                continue
            if f.deferred:  # resolved at the end; kept aside meanwhile
                for record in batch:
                    record.values[f"_{f.column}"] = record.values[f.column]
                continue
            wanted: dict[str, set[int]] = {}
            for record in batch:
                target = _target_kind(f, record)
                for old in _ids_of(record.values[f.column]):
                    wanted.setdefault(target, set()).add(old)
            for target, olds in wanted.items():
                mapped = await self.mapped(target, olds)
                missing = sorted(olds - set(mapped))
                if missing and not f.loose:
                    line = next(
                        r.line
                        for r in batch
                        if _target_kind(f, r) == target
                        and set(_ids_of(r.values[f.column])) & set(missing)
                    )
                    raise LineError(
                        line, f"{f.name} {missing[0]} names no {target} record of the file"
                    )
                if missing:  # a memory since gone: a fresh id, which no row has
                    mapped |= await self._fresh(target, missing)
                for record in batch:
                    if _target_kind(f, record) != target:
                        continue
                    value = record.values[f.column]
                    if isinstance(value, list):
                        record.values[f.column] = [mapped[v] for v in value]
                    elif value is not None:
                        record.values[f.column] = mapped[value]

    async def _fresh(self, kind: str, olds: list[int]) -> dict[int, int]:
        new_ids = await self.allocate(BY_NAME[kind].table, len(olds))
        fresh = dict(zip(olds, new_ids, strict=True))
        await self.conn.execute(
            insert(ID_MAP),
            [{"kind": kind, "old_id": o, "new_id": n, "added": 0} for o, n in fresh.items()],
        )
        return fresh

    async def defer(self, kind: Kind, stored: list[Record], ids: dict[int, int]) -> None:
        """The deferred references of the rows just stored (by their new ids), for
        ``resolve_deferred``."""
        deferred = [
            {
                "kind": kind.name,
                "row_id": ids[r.values["id"]],
                "old_target": old,
                "line": r.line,
            }
            for r in stored
            for f in kind.fields
            if f.deferred and (old := r.values.get(f"_{f.column}")) is not None
        ]
        if deferred:
            await self.conn.execute(insert(PENDING), deferred)

    async def resolve_deferred(self, kind: Kind) -> None:
        """Supersession links, once every row of the kind is in: the file's ids remapped; one
        that names no record of the file is an error naming its line."""
        table = kind.table
        for f in kind.fields:
            if not f.deferred:
                continue
            unresolved = (
                await self.conn.execute(
                    select(PENDING.c.line, PENDING.c.old_target)
                    .where(
                        PENDING.c.kind == kind.name,
                        ~exists().where(
                            ID_MAP.c.kind == kind.name, ID_MAP.c.old_id == PENDING.c.old_target
                        ),
                    )
                    .order_by(PENDING.c.line)
                    .limit(1)
                )
            ).first()
            if unresolved is not None:
                raise LineError(
                    unresolved.line,
                    f"{f.name} {unresolved.old_target} names no {kind.name} record of the file",
                )
            await self.conn.execute(
                text(
                    f"UPDATE {table.name} t SET {f.column} = m.new_id "
                    "FROM interchange_pending p JOIN interchange_ids m "
                    "  ON m.kind = p.kind AND m.old_id = p.old_target "
                    "WHERE p.kind = :kind AND t.namespace = :ns AND t.id = p.row_id"
                ),
                {"kind": kind.name, "ns": self.namespace},
            )


def _target_kind(f: Field, record: Record) -> str:
    """The record kind a reference names (``refKind`` picks it for working and stale)."""
    if f.ref == "refKind":
        return REF_KIND_RECORDS.get(record.values.get("ref_kind") or "", "")
    assert f.ref is not None
    return f.ref


def _ids_of(value: Any) -> list[int]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]
