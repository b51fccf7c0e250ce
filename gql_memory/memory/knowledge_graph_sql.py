"""The statements of the reference MCP memory server's knowledge graph
(gql_memory.memory.knowledge_graph): entities are visible nodes, relations edges valid now
between them, observations the valid insights tagged ``observation_of``."""

from __future__ import annotations

OBSERVATION_OF = "observation_of"

# A node or edge that is memory structure (autograph.py), not an entity or relation.
VISIBLE = "NOT coalesce({alias}.properties @> '{{\"auto\": true}}'::jsonb, false)"

# The valid observations of the entities named :names (all entities with :names NULL), by
# (name, entityType), oldest first: one pass over the namespace's insights.
OBSERVATIONS_SQL = f"""
SELECT i.id, i.metadata -> '{OBSERVATION_OF}' ->> 'name' AS name,
       i.metadata -> '{OBSERVATION_OF}' ->> 'entityType' AS entity_type, i.content
FROM insights i
WHERE i.namespace = :ns AND i.valid_to IS NULL AND i.metadata ? '{OBSERVATION_OF}'
  AND (CAST(:names AS text[]) IS NULL
       OR i.metadata -> '{OBSERVATION_OF}' ->> 'name' = ANY(CAST(:names AS text[])))
ORDER BY i.id
"""

# Visible nodes (all, or those of :ids), oldest first.
ENTITIES_SQL = f"""
SELECT n.id, n.name, n.label FROM nodes n
WHERE n.namespace = :ns AND {VISIBLE.format(alias="n")}
  AND (CAST(:ids AS bigint[]) IS NULL OR n.id = ANY(CAST(:ids AS bigint[])))
ORDER BY n.id
"""

# Visible nodes named :names, oldest first.
NAMED_SQL = f"""
SELECT n.id, n.name, n.label FROM nodes n
WHERE n.namespace = :ns AND n.name = ANY(CAST(:names AS text[])) AND {VISIBLE.format(alias="n")}
ORDER BY n.id
"""

# Relations valid now between visible nodes (all, or those touching :ids), oldest first.
RELATIONS_SQL = f"""
SELECT e.id, e.source_id, e.target_id, s.name AS source, t.name AS target, e.relation
FROM edges e
JOIN nodes s ON s.namespace = :ns AND s.id = e.source_id
JOIN nodes t ON t.namespace = :ns AND t.id = e.target_id
WHERE e.namespace = :ns AND e.valid_to IS NULL AND {VISIBLE.format(alias="e")}
  AND {VISIBLE.format(alias="s")} AND {VISIBLE.format(alias="t")}
  AND (CAST(:ids AS bigint[]) IS NULL OR e.source_id = ANY(CAST(:ids AS bigint[]))
       OR e.target_id = ANY(CAST(:ids AS bigint[])))
ORDER BY e.id
"""

# Visible nodes whose name, label or a valid observation contains :q (case-insensitive),
# the reference's substring search.
SUBSTRING_SQL = f"""
SELECT n.id FROM nodes n
WHERE n.namespace = :ns AND {VISIBLE.format(alias="n")}
  AND (strpos(lower(n.name), lower(:q)) > 0 OR strpos(lower(n.label), lower(:q)) > 0
       OR EXISTS (
           SELECT 1 FROM insights i
           WHERE i.namespace = :ns AND i.valid_to IS NULL
             AND i.metadata -> '{OBSERVATION_OF}' ->> 'name' = n.name
             AND i.metadata -> '{OBSERVATION_OF}' ->> 'entityType' = n.label
             AND strpos(lower(i.content), lower(:q)) > 0))
ORDER BY n.id
"""

# New entities; an automatic node of the same (label, name) is adopted (no longer automatic).
CREATE_ENTITIES_SQL = """
INSERT INTO nodes (namespace, label, name)
SELECT :ns, u.label, u.name
FROM unnest(CAST(:labels AS text[]), CAST(:names AS text[])) WITH ORDINALITY AS u(label, name, ord)
ORDER BY u.ord
ON CONFLICT (namespace, label, name)
DO UPDATE SET properties = nullif(nodes.properties - 'auto', '{}'::jsonb)
RETURNING id
"""

# New relations; one already valid is left as it is (and not returned).
CREATE_RELATIONS_SQL = """
INSERT INTO edges (namespace, source_id, target_id, relation, created_at, valid_from)
SELECT :ns, u.source_id, u.target_id, u.relation, clock_timestamp(), clock_timestamp()
FROM unnest(CAST(:sources AS bigint[]), CAST(:targets AS bigint[]), CAST(:relations AS text[]))
     WITH ORDINALITY AS u(source_id, target_id, relation, ord)
ORDER BY u.ord
ON CONFLICT (namespace, source_id, target_id, relation) WHERE valid_to IS NULL DO NOTHING
RETURNING id, source_id, target_id, relation
"""
