"""The nearest rows of one namespace to a query vector, whatever the other namespaces hold.

Every namespace shares one HNSW index per table. A filtered index scan walks the graph of all
tenants and drops the rows of others, so another tenant's rows near the query push yours out
of reach (pgvector stops after hnsw.max_scan_tuples) and make the scan slow. So:

- a namespace with at most GQL_MEMORY_VECTOR_EXACT_MAX_ROWS rows in the table is searched
  exactly: its own rows only (through the (namespace, ...) btree), every distance computed,
  ties broken by id. Its hits are the same as if it were alone in the database;
- a larger one walks the index (iterative scan: it goes on until enough of its rows pass),
  and when that walk gives up before finding ``limit`` rows (another tenant's rows crowd the
  query's neighbourhood), the namespace is searched exactly after all: a search never comes
  back short because of other tenants.

The rows arrive as (id, distance), nearest first.
"""

from __future__ import annotations


def nearest_ctes(
    name: str,
    table: str,
    conditions: str,
    *,
    vector: str = ":vector",
    limit: str = ":n",
    size: str | None = None,
) -> str:
    """The CTEs ``{name}_index`` and ``{name}_exact`` and ``{name}``, the nearest rows.
    ``conditions`` filter rows of alias ``t`` beyond the namespace (:ns).

    ``size`` names a CTE with the namespace's row count ``n``, counted at least up to
    :exact_rows + 1 (an index-only scan of the primary key); without it, ``{name}_size``
    counts. The index walk runs only above :exact_rows; the exact scan orders by
    ``distance + 0`` so that the planner cannot take the HNSW index for it.
    """
    distance = f"t.embedding <=> CAST({vector} AS vector)"
    # a row stored while the embedder was down has no vector yet (memory.waiting)
    where = f"t.namespace = :ns AND t.embedding IS NOT NULL AND {conditions}"
    counted = ""
    if size is None:
        size = f"{name}_size"
        counted = f"""
{size} AS MATERIALIZED (
    SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE namespace = :ns
                               LIMIT :exact_rows + 1) x
),"""
    return f"""{counted}
{name}_index AS MATERIALIZED (
    SELECT t.id, {distance} AS distance FROM {table} t
    WHERE {where} AND (SELECT n FROM {size}) > :exact_rows
    ORDER BY {distance}
    LIMIT {limit}
),
{name}_exact AS MATERIALIZED (
    SELECT t.id, {distance} AS distance FROM {table} t
    WHERE {where}
      AND ((SELECT n FROM {size}) <= :exact_rows
           OR (SELECT count(*) FROM {name}_index) < {limit})
    ORDER BY ({distance}) + 0, t.id
    LIMIT {limit}
),
{name} AS (
    SELECT id, distance FROM {name}_exact
    UNION ALL
    SELECT id, distance FROM {name}_index WHERE NOT EXISTS (SELECT 1 FROM {name}_exact)
)"""
