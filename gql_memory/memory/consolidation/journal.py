"""Applying an action and undoing it, with the journal row that makes the undo exact.

Each ``apply_*`` runs inside the caller's transaction: it locks what it changes, re-checks that
the facts are still valid (a caller may have closed one since the plan), changes them, and
journals ``changes``, what stood before. ``undo`` restores exactly that, and only where the
row is still as the action left it: a fact a caller closed, or an edge a caller moved, stays
as it is, and the result says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Row, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from gql_memory.errors import NotFoundError, ValidationError
from gql_memory.memory.consolidation.types import (
    ActionKind,
    ConsolidationAction,
    SupersessionReason,
    UndoResult,
)

INSERT_ACTION_SQL = """
INSERT INTO consolidation_actions (namespace, kind, target_id, ids, reason, evidence, changes)
VALUES (:ns, :kind, :target_id, CAST(:ids AS bigint[]), :reason, CAST(:evidence AS jsonb),
        CAST(:changes AS jsonb))
RETURNING id, created_at
"""
ACTION_COLUMNS = "id, kind, target_id, ids, reason, evidence, changes, created_at, undone_at"
LOCK_INSIGHTS_SQL = """
SELECT id, valid_from, valid_to, superseded_by, supersession_reason, source_ids
FROM insights WHERE namespace = :ns AND id = ANY(CAST(:ids AS bigint[]))
ORDER BY id FOR UPDATE
"""
# A later action still in force that touched the same facts (or entities) must be undone first.
LATER_ACTIONS_SQL = """
SELECT id FROM consolidation_actions
WHERE namespace = :ns AND id > :id AND undone_at IS NULL
  AND ((kind = ANY(CAST(:kinds AS text[]))
        AND (target_id = ANY(CAST(:touched AS bigint[]))
             OR ids && CAST(:touched AS bigint[])))
       OR (kind = 'digest' AND :facts AND target_id = ANY(CAST(:touched AS bigint[]))))
ORDER BY id DESC
"""


def action_from_row(row: Row[Any] | Any) -> ConsolidationAction:
    m = row._mapping
    return ConsolidationAction(
        kind=ActionKind(m["kind"]),
        target_id=m["target_id"],
        ids=tuple(m["ids"] or ()),
        reason=m["reason"],
        evidence=m["evidence"] or {},
        id=m["id"],
        created_at=m["created_at"],
        undone_at=m["undone_at"],
        changes=m["changes"] or {},
    )


async def record(
    conn: AsyncConnection,
    namespace: str,
    planned: ConsolidationAction,
    changes: dict[str, Any],
) -> ConsolidationAction:
    """Journal an action as planned, with ``changes``: what stood before it."""
    row = (
        await conn.execute(
            text(INSERT_ACTION_SQL),
            {
                "ns": namespace,
                "kind": planned.kind.value,
                "target_id": planned.target_id,
                "ids": list(planned.ids),
                "reason": planned.reason,
                "evidence": json.dumps(planned.evidence),
                "changes": json.dumps(changes),
            },
        )
    ).one()
    return replace(planned, id=row.id, created_at=row.created_at, changes=changes)


async def lock_valid_insights(
    conn: AsyncConnection, namespace: str, ids: Sequence[int]
) -> dict[int, Row[Any]]:
    """The rows of ``ids`` still valid, locked for the action."""
    rows = await conn.execute(text(LOCK_INSIGHTS_SQL), {"ns": namespace, "ids": list(ids)})
    return {row.id: row for row in rows.all() if row.valid_to is None}


async def close_insights(
    conn: AsyncConnection,
    namespace: str,
    ids: Sequence[int],
    successor: int,
    reason: SupersessionReason,
    at: str,
) -> None:
    """Close facts for consolidation: ``at`` is the SQL of the closing instant (a merged
    duplicate closes at its own valid_from: its validity is the survivor's from then on)."""
    await conn.execute(
        text(
            f"UPDATE insights SET valid_to = {at}, superseded_by = :successor, "
            "supersession_reason = :reason "
            "WHERE namespace = :ns AND id = ANY(CAST(:ids AS bigint[]))"
        ),
        {"ns": namespace, "ids": list(ids), "successor": successor, "reason": reason.value},
    )


async def move_edges(
    conn: AsyncConnection, namespace: str, moves: dict[int, int]
) -> tuple[list[list[Any]], list[int]]:
    """Move the valid edges of the nodes ``moves`` maps (from -> to) to their new ends. An
    edge that would become a loop, or the twin of a valid edge, is closed instead (reason
    merged). Returns (moved: [edge id, end column, old node, new node], closed edge ids)."""
    if not moves:
        return [], []
    from_ids = list(moves)
    rows = (
        await conn.execute(
            text(
                "SELECT id, source_id, target_id, relation FROM edges "
                "WHERE namespace = :ns AND valid_to IS NULL "
                "AND (source_id = ANY(CAST(:n AS bigint[])) "
                "OR target_id = ANY(CAST(:n AS bigint[]))) ORDER BY id FOR UPDATE"
            ),
            {"ns": namespace, "n": from_ids},
        )
    ).all()
    targets = sorted(set(moves.values()))
    existing = {
        (r.source_id, r.target_id, r.relation)
        for r in (
            await conn.execute(
                text(
                    "SELECT source_id, target_id, relation FROM edges "
                    "WHERE namespace = :ns AND valid_to IS NULL "
                    "AND (source_id = ANY(CAST(:n AS bigint[])) "
                    "OR target_id = ANY(CAST(:n AS bigint[])))"
                ),
                {"ns": namespace, "n": targets},
            )
        ).all()
    }
    moved: list[list[Any]] = []
    closed: list[int] = []
    for edge in rows:
        source = moves.get(edge.source_id, edge.source_id)
        target = moves.get(edge.target_id, edge.target_id)
        key = (source, target, edge.relation)
        if source == target or key in existing:
            closed.append(edge.id)
            continue
        existing.add(key)
        if source != edge.source_id:
            moved.append([edge.id, "source_id", edge.source_id, source])
        if target != edge.target_id:
            moved.append([edge.id, "target_id", edge.target_id, target])
        await conn.execute(
            text(
                "UPDATE edges SET source_id = :s, target_id = :t WHERE namespace = :ns AND id = :id"
            ),
            {"ns": namespace, "id": edge.id, "s": source, "t": target},
        )
    if closed:
        await conn.execute(
            text(
                "UPDATE edges SET valid_to = greatest(now(), valid_from), "
                "supersession_reason = 'merged' "
                "WHERE namespace = :ns AND id = ANY(CAST(:ids AS bigint[]))"
            ),
            {"ns": namespace, "ids": closed},
        )
    return moved, closed


async def move_references(
    conn: AsyncConnection, namespace: str, members: Sequence[int], survivor: int
) -> tuple[list[list[int]], list[list[int]]]:
    """Working-memory references and caller nodes of the merged insights now name the
    survivor. Returns ([working item id, old insight id]...,[node id, old insight id]...)."""
    params = {"ns": namespace, "ids": list(members), "s": survivor}
    working = (
        await conn.execute(
            text(
                "UPDATE working_memory w SET ref_id = :s FROM ("
                "  SELECT id, ref_id FROM working_memory WHERE namespace = :ns "
                "  AND ref_kind = 'INSIGHT' AND ref_id = ANY(CAST(:ids AS bigint[])) FOR UPDATE"
                ") old WHERE w.namespace = :ns AND w.id = old.id RETURNING w.id, old.ref_id"
            ),
            params,
        )
    ).all()
    relinked = (
        await conn.execute(
            text(
                "UPDATE nodes n SET insight_id = :s FROM ("
                "  SELECT id, insight_id FROM nodes WHERE namespace = :ns "
                "  AND insight_id = ANY(CAST(:ids AS bigint[])) "
                "  AND NOT properties @> '{\"auto\": true}' FOR UPDATE"
                ") old WHERE n.namespace = :ns AND n.id = old.id RETURNING n.id, old.insight_id"
            ),
            params,
        )
    ).all()
    return [[r[0], r[1]] for r in working], [[r[0], r[1]] for r in relinked]


async def insight_nodes(
    conn: AsyncConnection, namespace: str, ids: Sequence[int]
) -> dict[int, int]:
    """The automatic node of each insight that has one: insight id -> node id."""
    rows = await conn.execute(
        text(
            "SELECT insight_id, id FROM nodes WHERE namespace = :ns AND label = 'Insight' "
            "AND insight_id = ANY(CAST(:ids AS bigint[])) AND properties @> '{\"auto\": true}'"
        ),
        {"ns": namespace, "ids": list(ids)},
    )
    return {insight_id: node_id for insight_id, node_id in rows.all()}


# --- undo ---------------------------------------------------------------------------------

INSIGHT_KINDS = [ActionKind.MERGE.value, ActionKind.SUPERSEDE.value]


async def load_action(conn: AsyncConnection, namespace: str, action_id: int) -> ConsolidationAction:
    row = (
        await conn.execute(
            text(
                f"SELECT {ACTION_COLUMNS} FROM consolidation_actions "
                "WHERE namespace = :ns AND id = :id FOR UPDATE"
            ).columns(evidence=JSONB, changes=JSONB),
            {"ns": namespace, "id": action_id},
        )
    ).first()
    if row is None:
        raise NotFoundError(f"No consolidation action {action_id} in this namespace")
    return action_from_row(row)


async def undo(conn: AsyncConnection, namespace: str, action_id: int) -> UndoResult:
    """Restore what stood before the action, where it is still as the action left it."""
    action = await load_action(conn, namespace, action_id)
    if action.undone:
        raise ValidationError(f"Consolidation action {action_id} was already undone")
    if not action.changes:
        raise ValidationError(
            f"Consolidation action {action_id} came from an import: its ids name rows of the "
            "database it was exported from, so it cannot be undone here"
        )
    await _refuse_if_later(conn, namespace, action)
    if action.kind is ActionKind.ENTITY_MERGE:
        restored, left = await _undo_entity_merge(conn, namespace, action)
    elif action.kind is ActionKind.DIGEST:
        restored, left = await _undo_digest(conn, namespace, action)
    else:
        restored, left = await _undo_closing(conn, namespace, action)
    row = (
        await conn.execute(
            text(
                "UPDATE consolidation_actions SET undone_at = now() "
                f"WHERE namespace = :ns AND id = :id RETURNING {ACTION_COLUMNS}"
            ).columns(evidence=JSONB, changes=JSONB),
            {"ns": namespace, "id": action_id},
        )
    ).one()
    return UndoResult(action_from_row(row), tuple(restored), left)


async def _refuse_if_later(
    conn: AsyncConnection, namespace: str, action: ConsolidationAction
) -> None:
    facts = action.kind is not ActionKind.ENTITY_MERGE
    touched = [action.target_id, *action.ids] if action.kind is not ActionKind.DIGEST else []
    if action.kind is ActionKind.DIGEST:
        touched = [action.target_id, *action.changes.get("superseded", [])]
    kinds = INSIGHT_KINDS if facts else [ActionKind.ENTITY_MERGE.value]
    later = (
        (
            await conn.execute(
                text(LATER_ACTIONS_SQL),
                {
                    "ns": namespace,
                    "id": action.id,
                    "kinds": kinds,
                    "touched": [t for t in touched if t is not None],
                    "facts": facts,
                },
            )
        )
        .scalars()
        .all()
    )
    if later:
        shown = ", ".join(str(i) for i in later[:10])
        raise ValidationError(
            f"Consolidation action {action.id} cannot be undone before the later actions that "
            f"changed the same {'facts' if facts else 'entities'}: undo {shown} first"
        )


async def _reopen(
    conn: AsyncConnection, namespace: str, ids: Sequence[int], successor: int | None, reason: str
) -> tuple[list[int], dict[int, str]]:
    """Reopen the facts consolidation closed (still closed by it); say why others stay."""
    rows = (
        await conn.execute(
            text(
                "SELECT id, valid_to, superseded_by, supersession_reason FROM insights "
                "WHERE namespace = :ns AND id = ANY(CAST(:ids AS bigint[])) FOR UPDATE"
            ),
            {"ns": namespace, "ids": list(ids)},
        )
    ).all()
    found = {r.id: r for r in rows}
    restored: list[int] = []
    left: dict[int, str] = {}
    for fact_id in ids:
        row = found.get(fact_id)
        if row is None:
            left[fact_id] = "erased since"
        elif row.valid_to is None:
            left[fact_id] = "valid already"
        elif row.supersession_reason != reason or row.superseded_by != successor:
            left[fact_id] = (
                f"closed by a caller ({row.supersession_reason or 'caller'}): stays closed"
            )
        else:
            restored.append(fact_id)
    if restored:
        await conn.execute(
            text(
                "UPDATE insights SET valid_to = NULL, superseded_by = NULL, "
                "supersession_reason = NULL "
                "WHERE namespace = :ns AND id = ANY(CAST(:ids AS bigint[]))"
            ),
            {"ns": namespace, "ids": restored},
        )
    return restored, left


async def _undo_closing(
    conn: AsyncConnection, namespace: str, action: ConsolidationAction
) -> tuple[list[int], dict[int, str]]:
    reason = "merged" if action.kind is ActionKind.MERGE else "updated"
    restored, left = await _reopen(conn, namespace, action.ids, action.target_id, reason)
    changes = action.changes
    if "sources_before" in changes:
        await conn.execute(
            text(
                "UPDATE insights SET source_ids = CAST(:s AS bigint[]) "
                "WHERE namespace = :ns AND id = :id"
            ),
            {"ns": namespace, "id": action.target_id, "s": changes["sources_before"]},
        )
    if changes.get("content_before") is not None:
        await conn.execute(
            text(
                "UPDATE insights SET content = :c, embedding = CAST(:e AS vector), "
                "content_tsv = CAST(:tsv AS tsvector) WHERE namespace = :ns AND id = :id"
            ),
            {
                "ns": namespace,
                "id": action.target_id,
                "c": changes["content_before"],
                "e": changes.get("embedding_before"),
                "tsv": changes.get("tsv_before"),
            },
        )
    await _restore_graph(conn, namespace, changes)
    for item_id, old in changes.get("working_refs", []):
        await conn.execute(
            text(
                "UPDATE working_memory SET ref_id = :old WHERE namespace = :ns AND id = :id "
                "AND ref_kind = 'INSIGHT' AND ref_id = :new"
            ),
            {"ns": namespace, "id": item_id, "old": old, "new": action.target_id},
        )
    for node_id, old in changes.get("node_links", []):
        await conn.execute(
            text(
                "UPDATE nodes SET insight_id = :old WHERE namespace = :ns AND id = :id "
                "AND insight_id = :new"
            ),
            {"ns": namespace, "id": node_id, "old": old, "new": action.target_id},
        )
    return restored, left


async def _restore_graph(conn: AsyncConnection, namespace: str, changes: dict[str, Any]) -> None:
    """Edges moved back to their old ends (where they still are where the action put them),
    edges the action closed reopened (where no valid twin stands in the way)."""
    for edge_id, column, old, new in reversed(changes.get("edges_moved", [])):
        if column not in ("source_id", "target_id"):
            continue
        await conn.execute(
            text(
                f"UPDATE edges SET {column} = :old WHERE namespace = :ns AND id = :id "
                f"AND {column} = :new AND valid_to IS NULL"
            ),
            {"ns": namespace, "id": edge_id, "old": old, "new": new},
        )
    closed = changes.get("edges_closed", [])
    if closed:
        await conn.execute(
            text(
                "UPDATE edges e SET valid_to = NULL, supersession_reason = NULL "
                "WHERE e.namespace = :ns AND e.id = ANY(CAST(:ids AS bigint[])) "
                "AND e.supersession_reason = 'merged' AND NOT EXISTS ("
                "  SELECT 1 FROM edges t WHERE t.namespace = :ns AND t.valid_to IS NULL "
                "  AND t.source_id = e.source_id AND t.target_id = e.target_id "
                "  AND t.relation = e.relation)"
            ),
            {"ns": namespace, "ids": closed},
        )


async def _undo_entity_merge(
    conn: AsyncConnection, namespace: str, action: ConsolidationAction
) -> tuple[list[int], dict[int, str]]:
    await _restore_graph(conn, namespace, action.changes)
    rows = (
        (
            await conn.execute(
                text(
                    "UPDATE nodes SET merged_into = NULL WHERE namespace = :ns "
                    "AND id = ANY(CAST(:ids AS bigint[])) AND merged_into = :target RETURNING id"
                ),
                {"ns": namespace, "ids": list(action.ids), "target": action.target_id},
            )
        )
        .scalars()
        .all()
    )
    restored = sorted(rows)
    left = {i: "erased since" for i in action.ids if i not in restored}
    return restored, left


async def _undo_digest(
    conn: AsyncConnection, namespace: str, action: ConsolidationAction
) -> tuple[list[int], dict[int, str]]:
    """The digest goes (it did not exist before); the digest it replaced is valid again."""
    from gql_memory.memory.erasure import detach  # noqa: PLC0415
    from gql_memory.memory.graph.autograph import forget_auto_nodes  # noqa: PLC0415

    digest = action.target_id
    superseded = list(action.changes.get("superseded", []))
    if digest is not None:
        # the digest it replaced points at it: reopen first, then erase the digest
        restored, left = await _reopen(conn, namespace, superseded, digest, "updated")
        await forget_auto_nodes(conn, namespace, insight_ids=[digest])
        await detach(conn, "insights", namespace, [digest])
        await conn.execute(
            text("DELETE FROM insights WHERE namespace = :ns AND id = :id"),
            {"ns": namespace, "id": digest},
        )
        return restored, left
    return [], {}
