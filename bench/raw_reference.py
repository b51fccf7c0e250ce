"""The hot paths without HTTP or GraphQL: the service's SQL work for one request, in raw asyncpg.

What ``bench.hot_paths`` puts beside the service's numbers. Each function is one request's
transaction on one connection, one statement at a time; asyncpg prepares every statement
once per connection and reuses it. The events go to a channel nobody listens on, so the
server of the same run does not spend its CPU on them (the database writes them all the same).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

from gql_memory.config import NAMESPACE_SETTING, TSV_MAX_CHARS, Settings
from gql_memory.memory.graph.autograph import entity_names, speaker_entity

CHANNEL = "gql_memory_bench_reference"
ORIGIN = "bench"

# Names the transaction's namespace to the row-level security policies (as the server does).
SCOPE = f"SELECT set_config('{NAMESPACE_SETTING}', $1, true)"

# The session's lock first (it serializes the session's writers), then its event counter.
LOCK_AND_COUNT = """
INSERT INTO session_state (namespace, session_id, event_counter)
SELECT $1, $2, 1 FROM (SELECT pg_advisory_xact_lock(hashtextextended($3, 0))) AS locked
ON CONFLICT (namespace, session_id)
DO UPDATE SET event_counter = session_state.event_counter + 1
RETURNING event_counter
"""

DECAYED = """
SELECT w.id FROM working_memory w
LEFT JOIN session_state s ON s.namespace = w.namespace AND s.session_id = w.session_id
WHERE w.namespace = $1 AND w.session_id = $2 AND w.importance <= $3
  AND coalesce(w.attention, w.importance)
      * power($4::float8, greatest(coalesce(s.event_counter, 0) - w.last_event, 0))
      + w.mention_count * $5::float8 < $6
"""

INSERT_ITEM = """
INSERT INTO working_memory (namespace, session_id, content, importance, attention, last_event,
                            last_accessed, created_at)
VALUES ($1, $2, $3, $4, $4, $5, clock_timestamp(), clock_timestamp())
RETURNING id
"""

# Least recently accessed non-critical items first, then critical ones.
EVICTION_ORDER = """
SELECT id, count(*) OVER () AS total FROM working_memory
WHERE namespace = $1 AND session_id = $2
ORDER BY (importance > $3), last_accessed, id
"""

ARCHIVE = """
WITH moved AS (
    DELETE FROM working_memory WHERE namespace = $1 AND id = ANY($2::bigint[])
    RETURNING id, session_id, content, importance, ref_kind, ref_id, provenance, last_accessed
)
INSERT INTO stale_memory (namespace, session_id, original_id, original_content, importance,
                          reason, archived_at, ref_kind, ref_id, provenance)
SELECT $1, session_id, id, content, importance, $3, clock_timestamp(), ref_kind, ref_id,
       provenance
FROM moved ORDER BY last_accessed, id
RETURNING id, original_id
"""

NOTIFY = "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p"

INSERT_TURN = """
INSERT INTO raw_dialogue (namespace, session_id, speaker, content, "timestamp", content_tsv)
VALUES ($1, $2, $3, $4, clock_timestamp(),
        to_tsvector(CAST(CAST($5 AS text) AS regconfig), left($4, $6)))
RETURNING id, "timestamp"
"""

# The auto-graph statement (the service's LINK_TURNS_SQL for one batch): nodes for the new
# turns, NEXT from each turn's predecessor in its session, entity nodes (upserted) and the
# SPOKEN_BY / MENTIONS edges. $1 namespace, $2 turn ids, $3 entity names, $4..$6 the links.
LINK_TURNS = """
WITH new_turns AS (
    SELECT r.id, r.session_id, r."timestamp" FROM raw_dialogue r
    WHERE r.namespace = $1 AND r.id = ANY($2::bigint[])
),
turn_nodes AS (
    INSERT INTO nodes (namespace, label, name, properties, raw_id)
    SELECT $1, 'Turn', CAST(t.id AS text),
           jsonb_build_object('auto', true, 'sessionId', t.session_id), t.id
    FROM new_turns t ORDER BY t.id
    ON CONFLICT (namespace, label, name) DO UPDATE SET raw_id = EXCLUDED.raw_id
    RETURNING id, raw_id
),
predecessors AS (
    SELECT t.id AS raw_id, p.id AS previous_raw_id
    FROM new_turns t
    JOIN LATERAL (
        SELECT r.id FROM raw_dialogue r
        WHERE r.namespace = $1 AND r.session_id = t.session_id
          AND (r."timestamp", r.id) < (t."timestamp", t.id)
        ORDER BY r."timestamp" DESC, r.id DESC LIMIT 1
    ) p ON true
),
all_turn_nodes AS (
    SELECT id, raw_id FROM turn_nodes
    UNION ALL
    SELECT n.id, n.raw_id FROM nodes n
    WHERE n.namespace = $1 AND n.label = 'Turn'
      AND n.raw_id IN (SELECT previous_raw_id FROM predecessors)
),
entity_nodes AS (
    INSERT INTO nodes (namespace, label, name, properties)
    SELECT DISTINCT $1, 'Entity', e.name, '{"auto": true}'::jsonb
    FROM unnest($3::text[]) AS e(name) ORDER BY e.name
    ON CONFLICT (namespace, label, name) DO UPDATE SET name = EXCLUDED.name
    RETURNING id, name
),
links AS (
    SELECT prev.id AS source_id, cur.id AS target_id, 'NEXT' AS relation
    FROM predecessors p
    JOIN all_turn_nodes cur ON cur.raw_id = p.raw_id
    JOIN all_turn_nodes prev ON prev.raw_id = p.previous_raw_id
    UNION ALL
    SELECT tn.id, en.id, m.relation
    FROM unnest($4::bigint[], $5::text[], $6::text[]) AS m(raw_id, name, relation)
    JOIN turn_nodes tn ON tn.raw_id = m.raw_id
    JOIN entity_nodes en ON en.name = m.name
)
INSERT INTO edges (namespace, source_id, target_id, relation, properties)
SELECT DISTINCT $1, source_id, target_id, relation, '{"auto": true}'::jsonb
FROM links WHERE source_id <> target_id
ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True)
class Limits:
    """The settings the statements need (the server of the run reads the same environment)."""

    capacity: int
    critical: float
    decay_rate: float
    mention_boost: float
    delete_threshold: float
    text_search_config: str
    auto_graph: bool

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            settings.working_memory_capacity,
            settings.critical_importance,
            settings.decay_rate,
            settings.mention_boost,
            settings.decay_delete_threshold,
            settings.text_search_config,
            settings.auto_graph,
        )


def session_key(namespace: str, session_id: str) -> str:
    return f"wm\x1f{namespace}\x1f{session_id}"


def event(
    kind: str, namespace: str, session_id: str, ids: Sequence[int], archived: Sequence[int] = ()
) -> str:
    """A NOTIFY payload as the service writes it (version 1: kinds and ids, no content)."""
    data: dict[str, object] = {
        "v": 1,
        "k": kind,
        "ns": namespace,
        "t": datetime.now(UTC).isoformat(),
        "o": ORIGIN,
        "ids": list(ids),
        "s": session_id,
    }
    if archived:
        data["a"] = list(archived)
    return json.dumps(data, separators=(",", ":"))


async def count_event(
    conn: asyncpg.Connection, limits: Limits, namespace: str, session_id: str
) -> tuple[int, list[str]]:
    """Lock the session, advance its counter, archive what decayed; (counter, events)."""
    key = session_key(namespace, session_id)
    counter = await conn.fetchval(LOCK_AND_COUNT, namespace, session_id, key)
    victims = await conn.fetch(
        DECAYED,
        namespace,
        session_id,
        limits.critical,
        limits.decay_rate,
        limits.mention_boost,
        limits.delete_threshold,
    )
    events = []
    if victims:
        ids = [v["id"] for v in victims]
        rows = await conn.fetch(ARCHIVE, namespace, ids, "DECAY_EVICTION")
        events.append(_archive_event("DECAYED", namespace, session_id, rows))
    return counter, events


def _archive_event(kind: str, namespace: str, session_id: str, rows: list[asyncpg.Record]) -> str:
    return event(
        kind, namespace, session_id, [r["original_id"] for r in rows], [r["id"] for r in rows]
    )


async def add_working_memory(
    conn: asyncpg.Connection,
    limits: Limits,
    namespace: str,
    session_id: str,
    content: str,
    importance: float = 0.5,
    *,
    scoped: bool = False,
) -> tuple[int, int]:
    """One addWorkingMemory: lock and count, decay sweep, insert, LRU eviction with its
    archive, NOTIFY, in one transaction. Returns (added id, current count)."""
    async with conn.transaction():
        if scoped:
            await conn.fetchval(SCOPE, namespace)
        counter, events = await count_event(conn, limits, namespace, session_id)
        added = await conn.fetchval(
            INSERT_ITEM, namespace, session_id, content, importance, counter
        )
        events.append(event("ADDED", namespace, session_id, [added]))
        items = await conn.fetch(EVICTION_ORDER, namespace, session_id, limits.critical)
        excess = items[0]["total"] - limits.capacity
        if excess > 0:
            victims = [item["id"] for item in items[:excess]]
            rows = await conn.fetch(ARCHIVE, namespace, victims, "LRU_EVICTION")
            events.append(_archive_event("EVICTED", namespace, session_id, rows))
        await conn.execute(NOTIFY, CHANNEL, events)
    return added, len(items) - max(excess, 0)


async def store_turn(
    conn: asyncpg.Connection,
    limits: Limits,
    namespace: str,
    session_id: str,
    speaker: str,
    content: str,
    *,
    scoped: bool = False,
) -> int:
    """One storeRawDialogue without embedding: insert with its tsvector, the auto-graph
    links (when on), the session's event (lock, count, decay sweep), NOTIFY."""
    async with conn.transaction():
        if scoped:
            await conn.fetchval(SCOPE, namespace)
        turn = await conn.fetchrow(
            INSERT_TURN,
            namespace,
            session_id,
            speaker,
            content,
            limits.text_search_config,
            TSV_MAX_CHARS,
        )
        if limits.auto_graph:
            await link_turn(conn, namespace, turn["id"], speaker, content)
        _, events = await count_event(conn, limits, namespace, session_id)
        events.append(event("DIALOGUE_STORED", namespace, session_id, [turn["id"]]))
        await conn.execute(NOTIFY, CHANNEL, events)
    return int(turn["id"])


async def link_turn(
    conn: asyncpg.Connection, namespace: str, turn_id: int, speaker: str, content: str
) -> None:
    """The auto-graph statement for one turn, with the entities the service would find."""
    links = [(name, "MENTIONS") for name in entity_names(content, speaker)]
    if (name := speaker_entity(speaker)) is not None:
        links.insert(0, (name, "SPOKEN_BY"))
    await conn.execute(
        LINK_TURNS,
        namespace,
        [turn_id],
        sorted({name for name, _ in links}),
        [turn_id] * len(links),
        [name for name, _ in links],
        [relation for _, relation in links],
    )
