"""Time-aware facts: when an insight, episode or edge is valid, and superseding one.

A fact is valid in [valid_from, valid_to); valid_to is NULL while it holds. Superseding closes
facts (valid_to = the successor's valid_from) and links them to it; nothing is deleted. No
fact starts in the future and none is closed at a future instant, so "valid now" is exactly
``valid_to IS NULL``, and a read as of an instant sees the facts valid then.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Label, Table, func, select, update
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.db.clauses import any_of
from gql_memory.db.tables import edges, episodes, insights
from gql_memory.errors import ValidationError
from gql_memory.memory.validation import in_utc, require_id, require_storable_moment

FACT_TABLES: dict[str, Table] = {"insights": insights, "episodes": episodes, "edges": edges}
MAX_SUPERSEDES = 100
VALIDITY_COLUMNS = "valid_from, valid_to, superseded_by"


def require_aware(value: Any, field: str) -> datetime:
    """A date-time with a timezone (a naive one would be read in the server's zone), in UTC;
    one that UTC cannot hold is BAD_USER_INPUT (see ``in_utc``)."""
    if not isinstance(value, datetime):
        raise ValidationError(f"{field} must be a date-time")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{field} must carry a timezone (e.g. 2026-01-31T09:00:00Z)")
    return in_utc(value, field)


def _not_future(value: datetime, field: str) -> datetime:
    if value > datetime.now(UTC):
        raise ValidationError(f"{field} must not be in the future")
    return value


def require_instant(value: Any, field: str) -> datetime:
    """An instant to store (a fact's validFrom, the instant it is closed at): timezone-aware,
    no later than now, and one PostgreSQL stores as itself (see ``require_storable_moment``)."""
    return _not_future(require_storable_moment(require_aware(value, field), field), field)


def require_as_of(value: Any) -> datetime | None:
    """The instant of an as-of read, or None for now. A future instant is refused: what is
    valid then is not known yet."""
    return None if value is None else _not_future(require_aware(value, "asOf"), "asOf")


def require_period(
    since: datetime | None, until: datetime | None
) -> tuple[datetime | None, datetime | None]:
    """A period to limit a search to: either end may be open; since no later than until."""
    since = None if since is None else require_aware(since, "since")
    until = None if until is None else require_aware(until, "until")
    if since is not None and until is not None and since > until:
        raise ValidationError("since must not be later than until")
    return since, until


def valid_sql(alias: str, as_of: bool) -> str:
    """The SQL condition that row ``alias`` of a fact table (insights, episodes, edges) is
    valid now (no fact is closed in the future, so: not closed), or at :as_of."""
    if not as_of:
        return f"{alias}.valid_to IS NULL"
    return (
        f"{alias}.valid_from <= :as_of AND ({alias}.valid_to IS NULL OR {alias}.valid_to > :as_of)"
    )


def supersedes_column(facts: Table, namespace: str) -> Label[Any]:
    """The facts a row of ``facts`` superseded, oldest first: the reverse of superseded_by,
    as a ``supersedes`` column of a select from ``facts`` in ``namespace``. The subquery
    names the namespace itself (not the outer row's): on Citus a subquery pinned only to the
    outer row's namespace runs on every shard."""
    predecessor = facts.alias("p")
    return (
        select(func.array_agg(aggregate_order_by(predecessor.c.id, predecessor.c.id)))
        .where(
            predecessor.c.namespace == namespace,
            predecessor.c.superseded_by == facts.c.id,
        )
        .scalar_subquery()
        .label("supersedes")
    )


def require_supersedes(values: Sequence[Any] | None) -> list[int]:
    ids = sorted({require_id(v, "supersedes") for v in values or ()})
    if len(ids) > MAX_SUPERSEDES:
        raise ValidationError(f"supersedes must hold at most {MAX_SUPERSEDES} ids")
    return ids


async def close_facts(
    conn: AsyncConnection,
    table: str,
    namespace: str,
    ids: Sequence[int],
    at: datetime | None,
    successor: int | None = None,
) -> list[int]:
    """Close the facts ``ids`` of ``table`` at ``at`` (default: now), linked to ``successor``,
    inside the caller's transaction. Every fact must exist in the namespace, be valid still,
    and have begun before ``at``; otherwise BAD_USER_INPUT and nothing is closed."""
    facts = FACT_TABLES[table]
    if not ids:
        return []
    these = (facts.c.namespace == namespace, any_of(facts.c.id, ids))
    rows = (
        await conn.execute(
            # FOR UPDATE: two writers superseding one fact serialise; the second finds it closed
            select(facts.c.id, facts.c.valid_from, facts.c.valid_to)
            .where(*these)
            .order_by(facts.c.id)
            .with_for_update()
        )
    ).all()
    found = {row.id: row for row in rows}
    noun = table.rstrip("s")
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValidationError(f"Unknown {noun} ids in supersedes: {_shown(missing)}")
    closed = [i for i in ids if found[i].valid_to is not None]
    if closed:
        raise ValidationError(
            f"Already superseded or invalidated (a closed fact stays closed): {_shown(closed)}"
        )
    moment = at or await conn.scalar(select(func.now()))
    early = [i for i in ids if found[i].valid_from > moment]
    if early:
        raise ValidationError(
            f"Cannot close a fact before it became valid ({noun} {_shown(early)})"
        )
    await conn.execute(
        update(facts)
        .where(*these)
        .values(valid_to=moment, superseded_by=successor, supersession_reason="caller")
    )
    return list(ids)


async def superseding(
    conn: AsyncConnection, table: str, namespace: str, ids: Sequence[int]
) -> dict[int, list[int]]:
    """For each fact of ``ids``, the facts it superseded (the reverse of superseded_by)."""
    facts = FACT_TABLES[table]
    result: dict[int, list[int]] = {i: [] for i in ids}
    if not ids:
        return result
    rows = await conn.execute(
        select(facts.c.superseded_by, facts.c.id)
        .where(facts.c.namespace == namespace, any_of(facts.c.superseded_by, ids))
        .order_by(facts.c.id)
    )
    for successor, predecessor in rows:
        result[successor].append(predecessor)
    return result


def _shown(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids[:10]) + (" ..." if len(ids) > 10 else "")
