"""Insights stored once per import key (kept in their metadata as ``import_key``): the
insights table has no key column, so an import looks the keys up first and adds only the
missing ones (the lookup is a read of its own: two imports of one file at once could both
add an insight)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from gql_memory.db.clauses import any_of
from gql_memory.db.tables import insights
from gql_memory.memory.importer import IMPORT_KEY
from gql_memory.memory.insights import InsightInput, Insights


@dataclass(frozen=True)
class KeyedInsight:
    key: str
    insight: InsightInput  # its metadata holds IMPORT_KEY: key


async def present_keys(store: Insights, keys: Sequence[str]) -> set[str]:
    """The import keys of ``keys`` that a still valid insight of the namespace carries (a key
    whose insight was closed, e.g. a mem0 memory changed and then changed back, is added
    again)."""
    if not keys:
        return set()
    key = insights.c.metadata[IMPORT_KEY].astext
    async with store.db.read() as conn:
        found = await conn.scalars(
            select(key).where(
                insights.c.namespace == store.namespace,
                insights.c.valid_to.is_(None),
                any_of(key, list(keys)),
            )
        )
        return set(found)


async def add_insights_once(store: Insights, items: Sequence[KeyedInsight]) -> int:
    """Add the insights whose key is not stored yet (one transaction); how many were added."""
    present = await present_keys(store, [i.key for i in items])
    fresh = [i.insight for i in items if i.key not in present]
    return len(await store.add_many(fresh))
