"""The hot writes in one statement: server-side functions do what adding to working memory
and storing turns did in five to eight round trips, and return what the response needs.

- ``gql_memory_add_working``: lock and count the session's event, sweep decayed items,
  insert, evict over capacity to stale memory, NOTIFY.
- ``gql_memory_store_turns``: insert the turns (skipping import keys already stored), graph
  them (``gql_memory_link_turns``), lock and count each session's events and sweep it, NOTIFY.

They are the only copy of that work: the Python paths that lock, count, sweep, archive or
graph turns call the same functions. They run as their caller (SECURITY INVOKER), so
row-level security applies to every row they touch; the two entry points name their
namespace to the policies themselves (``set_config(..., true)``, which ends with the
transaction), so each can run as one autocommit statement.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import context, op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

DEFAULT_ROLE = "gql_memory_app"

# Every writer of a session (namespace, session id) holds this transaction-scoped advisory
# lock: insert-count-evict-archive is atomic with respect to the session's other writers.
LOCK_KEY = """
CREATE FUNCTION gql_memory_session_lock_key(ns text, sid text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN hashtextextended('wm' || chr(31) || ns || chr(31) || sid, 0)
"""

# Raw attention (seed 002): base * decay_rate ^ eventsElapsed + mentions * mention_boost.
# Inlined by the planner wherever it is used (searches, context, the sweep).
RAW_ATTENTION = """
CREATE FUNCTION gql_memory_raw_attention(base float8, decay_rate float8, elapsed bigint,
                                         mentions int, mention_boost float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN base * power(decay_rate, greatest(elapsed, 0)) + mentions * mention_boost
"""

# NOTIFY payloads of gql_memory.memory.events (version 1): kinds and ids, never content.
# Ids go out in chunks so that a payload stays far below PostgreSQL's 8000-byte limit.
NOTIFY = """
CREATE FUNCTION gql_memory_notify(channel text, kind text, ns text, sid text, origin text,
                                  ids bigint[], archived bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    chunk constant int := 100;
    total int := coalesce(cardinality(ids), 0);
    head text;
    i int := 1;
BEGIN
    IF channel IS NULL OR total = 0 THEN
        RETURN;
    END IF;
    -- built as text: this runs twice per add, and jsonb would cost several times more
    head := '{"v":1,"k":"' || kind || '","ns":' || to_json(ns) || ',"t":"'
            || to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
            || '+00:00","o":' || to_json(origin)
            || CASE WHEN sid IS NULL THEN '' ELSE ',"s":' || to_json(sid) END;
    WHILE i <= total LOOP
        PERFORM pg_notify(channel, head || ',"ids":' || array_to_json(ids[i:i + chunk - 1])
            || CASE WHEN cardinality(archived) > 0
                    THEN ',"a":' || array_to_json(archived[i:i + chunk - 1]) ELSE '' END
            || '}');
        i := i + chunk;
    END LOOP;
END
$$
"""

# Moves working-memory rows to stale memory (oldest access first) and reports them: one
# event per session, EVICTED / ARCHIVED / DECAYED by reason.
ARCHIVE = """
CREATE FUNCTION gql_memory_archive(ns text, victims bigint[], reason text,
                                   channel text, origin text)
RETURNS SETOF stale_memory
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    moved_rows stale_memory[];
    sid text;
BEGIN
    IF coalesce(cardinality(victims), 0) = 0 THEN
        RETURN;
    END IF;
    WITH moved AS (
        DELETE FROM working_memory w
        WHERE w.namespace = ns AND w.id = ANY(victims)
        RETURNING w.id, w.session_id, w.content, w.importance, w.ref_kind, w.ref_id,
                  w.provenance, w.last_accessed
    ), archived AS (
        INSERT INTO stale_memory AS s (namespace, session_id, original_id, original_content,
                                       importance, reason, archived_at, ref_kind, ref_id,
                                       provenance)
        SELECT ns, m.session_id, m.id, m.content, m.importance, gql_memory_archive.reason,
               clock_timestamp(), m.ref_kind, m.ref_id, m.provenance
        FROM moved m
        ORDER BY m.last_accessed, m.id
        RETURNING s AS stale
    )
    SELECT array_agg(a.stale ORDER BY (a.stale).id) INTO moved_rows FROM archived a;
    FOR sid IN SELECT DISTINCT r.session_id FROM unnest(moved_rows) r ORDER BY 1 LOOP
        PERFORM gql_memory_notify(
            channel,
            CASE reason WHEN 'LRU_EVICTION' THEN 'EVICTED'
                        WHEN 'DECAY_EVICTION' THEN 'DECAYED'
                        ELSE 'ARCHIVED' END,
            ns, sid, origin,
            ARRAY(SELECT r.original_id FROM unnest(moved_rows) r
                  WHERE r.session_id = sid ORDER BY r.id),
            ARRAY(SELECT r.id FROM unnest(moved_rows) r WHERE r.session_id = sid ORDER BY r.id));
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(moved_rows);
END
$$
"""

# A write event of a session: its lock, then its counter advanced by n; the new value.
COUNT_EVENT = """
CREATE FUNCTION gql_memory_count_event(ns text, sid text, n bigint) RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    counter bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(gql_memory_session_lock_key(ns, sid));
    INSERT INTO session_state AS s (namespace, session_id, event_counter)
    VALUES (ns, sid, n)
    ON CONFLICT (namespace, session_id) DO UPDATE SET event_counter = s.event_counter + n
    RETURNING s.event_counter INTO counter;
    RETURN counter;
END
$$
"""

# Archives (DECAY_EVICTION) the session's non-critical items whose raw attention fell below
# the delete threshold; the caller holds the session's lock.
SWEEP = """
CREATE FUNCTION gql_memory_sweep(ns text, sid text, critical float8, decay_rate float8,
                                 mention_boost float8, delete_threshold float8,
                                 channel text, origin text)
RETURNS SETOF stale_memory
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    SELECT a.* FROM gql_memory_archive(
        ns,
        ARRAY(SELECT w.id FROM working_memory w
              LEFT JOIN session_state s
                ON s.namespace = w.namespace AND s.session_id = w.session_id
              WHERE w.namespace = ns AND w.session_id = sid AND w.importance <= critical
                AND gql_memory_raw_attention(coalesce(w.attention, w.importance), decay_rate,
                                             coalesce(s.event_counter, 0) - w.last_event,
                                             w.mention_count, mention_boost)
                    < delete_threshold),
        'DECAY_EVICTION', channel, origin) a
$$
"""

# The add itself, in the order of work (and of notifications) of the Python path it replaced.
ADD = """
CREATE FUNCTION gql_memory_add_working(
    ns text, sid text, content text, importance float8, attention float8,
    ref_kind text, ref_id bigint, provenance jsonb, restored_from bigint,
    capacity int, critical float8, decay_rate float8, mention_boost float8,
    delete_threshold float8, channel text, origin text,
    OUT added_id bigint, OUT current_count int,
    OUT evicted_ids bigint[], OUT evicted_archived_ids bigint[], OUT decayed_ids bigint[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    counter bigint;
    total int;
BEGIN
    PERFORM set_config('app.namespace', ns, true);
    counter := gql_memory_count_event(ns, sid, 1);
    decayed_ids := ARRAY(SELECT d.original_id FROM gql_memory_sweep(
        ns, sid, critical, decay_rate, mention_boost, delete_threshold, channel, origin) d
        ORDER BY d.id);

    INSERT INTO working_memory AS w (namespace, session_id, content, importance, attention,
                                     last_event, last_accessed, created_at, ref_kind, ref_id,
                                     provenance)
    VALUES (ns, sid, content, importance, coalesce(attention, importance), counter,
            clock_timestamp(), clock_timestamp(), ref_kind, ref_id, provenance)
    RETURNING w.id INTO added_id;
    IF restored_from IS NULL THEN
        PERFORM gql_memory_notify(channel, 'ADDED', ns, sid, origin, ARRAY[added_id], '{}');
    ELSE
        PERFORM gql_memory_notify(channel, 'RESTORED', ns, sid, origin, ARRAY[added_id],
                                  ARRAY[restored_from]);
    END IF;

    SELECT count(*) INTO total FROM working_memory w
    WHERE w.namespace = ns AND w.session_id = sid;
    SELECT coalesce(array_agg(a.original_id ORDER BY a.id), '{}'),
           coalesce(array_agg(a.id ORDER BY a.id), '{}')
    INTO evicted_ids, evicted_archived_ids
    FROM gql_memory_archive(
        ns,
        ARRAY(SELECT w.id FROM working_memory w
              WHERE w.namespace = ns AND w.session_id = sid
              ORDER BY (w.importance > critical), w.last_accessed, w.id
              LIMIT greatest(total - capacity, 0)),
        'LRU_EVICTION', channel, origin) a;
    current_count := total - cardinality(evicted_ids);
END
$$
"""

# Entity nodes named by a batch, upserted (so concurrent batches naming the same entity share
# it) in name order (so they take their row locks in one order and never deadlock).
ENTITY_NODES = """
CREATE FUNCTION gql_memory_entity_nodes(ns text, names text[])
RETURNS TABLE (id bigint, name text)
LANGUAGE sql
SET search_path FROM CURRENT
AS $$
    INSERT INTO nodes AS n (namespace, label, name, properties)
    SELECT DISTINCT ns, 'Entity', e.name, CAST('{"auto": true}' AS jsonb)
    FROM unnest(names) AS e(name) ORDER BY e.name
    ON CONFLICT (namespace, label, name) DO UPDATE SET name = EXCLUDED.name
    RETURNING n.id, n.name
$$
"""

# Nodes for new turns, NEXT from each turn's predecessor in its session (a turn stored
# earlier, or one of this batch), SPOKEN_BY / MENTIONS edges to their entities (link_ids,
# link_names and link_relations run parallel).
LINK_TURNS = """
CREATE FUNCTION gql_memory_link_turns(ns text, turn_ids bigint[], link_ids bigint[],
                                      link_names text[], link_relations text[])
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    entity_ids bigint[];
    entity_names text[];
BEGIN
-- upserted in full first (a CTE that only reads would be evaluated as far as a join needs)
SELECT array_agg(e.id), array_agg(e.name) INTO entity_ids, entity_names
FROM gql_memory_entity_nodes(ns, link_names) e;
WITH new_turns AS (
    SELECT r.id, r.session_id, r."timestamp" FROM raw_dialogue r
    WHERE r.namespace = ns AND r.id = ANY(turn_ids)
),
turn_nodes AS (
    INSERT INTO nodes (namespace, label, name, properties, raw_id)
    SELECT ns, 'Turn', CAST(t.id AS text),
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
        WHERE r.namespace = ns AND r.session_id = t.session_id
          AND (r."timestamp", r.id) < (t."timestamp", t.id)
        ORDER BY r."timestamp" DESC, r.id DESC LIMIT 1
    ) p ON true
),
all_turn_nodes AS (
    SELECT id, raw_id FROM turn_nodes
    UNION ALL
    SELECT n.id, n.raw_id FROM nodes n
    WHERE n.namespace = ns AND n.label = 'Turn'
      AND n.raw_id IN (SELECT previous_raw_id FROM predecessors)
),
entity_nodes AS (
    SELECT e.id, e.name FROM unnest(entity_ids, entity_names) AS e(id, name)
),
links AS (
    SELECT prev.id AS source_id, cur.id AS target_id, 'NEXT' AS relation
    FROM predecessors p
    JOIN all_turn_nodes cur ON cur.raw_id = p.raw_id
    JOIN all_turn_nodes prev ON prev.raw_id = p.previous_raw_id
    UNION ALL
    SELECT tn.id, en.id, m.relation
    FROM unnest(link_ids, link_names, link_relations) AS m(raw_id, name, relation)
    JOIN turn_nodes tn ON tn.raw_id = m.raw_id
    JOIN entity_nodes en ON en.name = m.name
)
INSERT INTO edges (namespace, source_id, target_id, relation, properties)
SELECT DISTINCT ns, source_id, target_id, relation, CAST('{"auto": true}' AS jsonb)
FROM links WHERE source_id <> target_id
ON CONFLICT DO NOTHING;
END
$$
"""

# Storing turns. Link data comes by input position (link_ords), because the entities of a turn
# are found in Python; it is matched to the stored turns by (speaker, content), which is all
# they depend on (a turn skipped for its import key is not graphed).
STORE_TURNS = """
CREATE FUNCTION gql_memory_store_turns(
    ns text, tsconfig text, tsv_max int,
    session_ids text[], speakers text[], contents text[], metadata text[],
    timestamps timestamptz[], embeddings text[], import_keys text[],
    auto_graph boolean, link_ords bigint[], link_names text[], link_relations text[],
    critical float8, decay_rate float8, mention_boost float8, delete_threshold float8,
    channel text, origin text)
RETURNS TABLE (turn_id bigint, turn_session_id text, turn_speaker text, turn_content text,
               turn_metadata text, turn_timestamp timestamptz)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    ids bigint[];
    sids text[];
    stored_speakers text[];
    stored_contents text[];
    stored_metadata text[];
    stored_timestamps timestamptz[];
    linked_ids bigint[];
    linked_names text[];
    linked_relations text[];
    sid text;
    n bigint;
BEGIN
    PERFORM set_config('app.namespace', ns, true);
    WITH inserted AS (
        INSERT INTO raw_dialogue AS r (namespace, session_id, speaker, content, metadata,
                                       "timestamp", content_tsv, embedding, import_key)
        SELECT ns, u.session_id, u.speaker, u.content, CAST(u.metadata AS jsonb),
               coalesce(u.ts, clock_timestamp()),
               to_tsvector(CAST(tsconfig AS regconfig), left(u.content, tsv_max)),
               CAST(u.embedding AS vector), u.import_key
        FROM unnest(session_ids, speakers, contents, metadata, timestamps, embeddings,
                    import_keys)
             WITH ORDINALITY AS u(session_id, speaker, content, metadata, ts, embedding,
                                  import_key, ord)
        ORDER BY u.ord
        ON CONFLICT (namespace, import_key) WHERE import_key IS NOT NULL DO NOTHING
        RETURNING r.id, r.session_id, r.speaker, r.content, CAST(r.metadata AS text) AS meta,
                  r."timestamp"
    )
    SELECT array_agg(i.id ORDER BY i.id), array_agg(i.session_id ORDER BY i.id),
           array_agg(i.speaker ORDER BY i.id), array_agg(i.content ORDER BY i.id),
           array_agg(i.meta ORDER BY i.id), array_agg(i."timestamp" ORDER BY i.id)
    INTO ids, sids, stored_speakers, stored_contents, stored_metadata, stored_timestamps
    FROM inserted i;
    IF ids IS NULL THEN
        RETURN;
    END IF;

    IF auto_graph THEN
        SELECT coalesce(array_agg(s.id ORDER BY s.id, l.name, l.relation), '{}'),
               coalesce(array_agg(l.name ORDER BY s.id, l.name, l.relation), '{}'),
               coalesce(array_agg(l.relation ORDER BY s.id, l.name, l.relation), '{}')
        INTO linked_ids, linked_names, linked_relations
        FROM unnest(ids, stored_speakers, stored_contents) AS s(id, speaker, content)
        JOIN (SELECT DISTINCT u.speaker, u.content, m.name, m.relation
              FROM unnest(link_ords, link_names, link_relations) AS m(ord, name, relation)
              JOIN unnest(speakers, contents) WITH ORDINALITY AS u(speaker, content, ord)
                ON u.ord = m.ord) l
          ON l.speaker = s.speaker AND l.content = s.content;
        PERFORM gql_memory_link_turns(ns, ids, linked_ids, linked_names, linked_relations);
    END IF;

    -- each stored turn is a write event of its session; locks in one order (no deadlocks)
    FOR sid, n IN SELECT u.s, count(*) FROM unnest(sids) AS u(s)
                  GROUP BY u.s ORDER BY u.s COLLATE "C" LOOP
        PERFORM gql_memory_count_event(ns, sid, n);
        PERFORM gql_memory_sweep(ns, sid, critical, decay_rate, mention_boost,
                                 delete_threshold, channel, origin);
    END LOOP;
    FOR sid IN SELECT u.s FROM unnest(sids) WITH ORDINALITY AS u(s, o)
               GROUP BY u.s ORDER BY min(u.o) LOOP
        PERFORM gql_memory_notify(
            channel, 'DIALOGUE_STORED', ns, sid, origin,
            ARRAY(SELECT u.i FROM unnest(ids, sids) AS u(i, s) WHERE u.s = sid), '{}');
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(ids, sids, stored_speakers, stored_contents,
                                      stored_metadata, stored_timestamps);
END
$$
"""

# name -> (argument types, definition), in creation order
FUNCTIONS = {
    "gql_memory_session_lock_key": ("text, text", LOCK_KEY),
    "gql_memory_raw_attention": ("float8, float8, bigint, int, float8", RAW_ATTENTION),
    "gql_memory_notify": ("text, text, text, text, text, bigint[], bigint[]", NOTIFY),
    "gql_memory_archive": ("text, bigint[], text, text, text", ARCHIVE),
    "gql_memory_count_event": ("text, text, bigint", COUNT_EVENT),
    "gql_memory_sweep": (
        "text, text, float8, float8, float8, float8, text, text",
        SWEEP,
    ),
    "gql_memory_add_working": (
        "text, text, text, float8, float8, text, bigint, jsonb, bigint, int, float8, float8, "
        "float8, float8, text, text",
        ADD,
    ),
    "gql_memory_entity_nodes": ("text, text[]", ENTITY_NODES),
    "gql_memory_link_turns": ("text, bigint[], bigint[], text[], text[]", LINK_TURNS),
    "gql_memory_store_turns": (
        "text, text, int, text[], text[], text[], text[], timestamptz[], text[], text[], "
        "boolean, bigint[], text[], text[], float8, float8, float8, float8, text, text",
        STORE_TURNS,
    ),
}


def _role() -> str:
    return context.config.attributes.get("database_role") or DEFAULT_ROLE


def upgrade() -> None:
    role = _role()
    connection = op.get_bind()
    for name, (arguments, definition) in FUNCTIONS.items():
        connection.exec_driver_sql(definition)  # as written: no bind parameters (":1" is JSON)
        op.execute(f"REVOKE ALL ON FUNCTION {name}({arguments}) FROM PUBLIC")
        op.execute(f'GRANT EXECUTE ON FUNCTION {name}({arguments}) TO "{role}"')


def downgrade() -> None:
    for name, (arguments, _) in reversed(FUNCTIONS.items()):
        op.execute(f"DROP FUNCTION IF EXISTS {name}({arguments})")
