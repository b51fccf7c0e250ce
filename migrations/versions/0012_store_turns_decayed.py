"""Storing turns returns the working-memory items its decay sweep archived.

``gql_memory_store_turns`` (migration 0010) counts each stored turn as a write event of its
session and sweeps decayed working memory. The sweep archived and published those items but
did not return them, so the Python side could not log them at INFO as it does for adds (seed
000: every eviction with its ids and reason). The function now returns a seventh column,
``turn_decayed``: on every row, the original ids of the working-memory items archived by the
sweeps of this call (the same array on each row; empty when nothing decayed).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import context, op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# 0010 by its path: the versions folder is a package under two names (migrations.versions in
# a checkout, gql_memory.migrations.versions in a wheel), so it is not imported by name.
_spec = importlib.util.spec_from_file_location(
    "gql_memory_migration_0010", Path(__file__).with_name("0010_one_statement_writes.py")
)
assert _spec is not None and _spec.loader is not None
_0010 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_0010)
NAME = "gql_memory_store_turns"
ARGUMENTS = _0010.FUNCTIONS[NAME][0]
PREVIOUS = _0010.STORE_TURNS

# 0010's definition with the decayed ids collected from each session's sweep and returned.
_SWEEP_CALL = """        PERFORM gql_memory_sweep(ns, sid, critical, decay_rate, mention_boost,
                                 delete_threshold, channel, origin);"""
_SWEEP_COLLECT = """        decayed := decayed || ARRAY(
            SELECT d.original_id FROM gql_memory_sweep(
                ns, sid, critical, decay_rate, mention_boost, delete_threshold, channel,
                origin) d);"""
_RESULT = """               turn_metadata text, turn_timestamp timestamptz)"""
_RESULT_DECAYED = """               turn_metadata text, turn_timestamp timestamptz,
               turn_decayed bigint[])"""
_DECLARE = """    sid text;
    n bigint;"""
_DECLARE_DECAYED = """    sid text;
    n bigint;
    decayed bigint[] := '{}';"""
_RETURN = """    RETURN QUERY SELECT * FROM unnest(ids, sids, stored_speakers, stored_contents,
                                      stored_metadata, stored_timestamps);"""
_RETURN_DECAYED = """    RETURN QUERY SELECT u.*, decayed FROM unnest(ids, sids, stored_speakers, stored_contents,
                                                 stored_metadata, stored_timestamps) AS u;"""


def _replaced(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0012: expected one {old!r} in {NAME}")
    return text.replace(old, new)


STORE_TURNS = PREVIOUS
for _old, _new in (
    (_SWEEP_CALL, _SWEEP_COLLECT),
    (_RESULT, _RESULT_DECAYED),
    (_DECLARE, _DECLARE_DECAYED),
    (_RETURN, _RETURN_DECAYED),
):
    STORE_TURNS = _replaced(STORE_TURNS, _old, _new)


def _recreate(definition: str) -> None:
    role = context.config.attributes.get("database_role") or _0010.DEFAULT_ROLE
    # the result type changes, so CREATE OR REPLACE cannot be used
    op.execute(f"DROP FUNCTION {NAME}({ARGUMENTS})")
    op.get_bind().exec_driver_sql(definition)
    op.execute(f"REVOKE ALL ON FUNCTION {NAME}({ARGUMENTS}) FROM PUBLIC")
    op.execute(f'GRANT EXECUTE ON FUNCTION {NAME}({ARGUMENTS}) TO "{role}"')


def upgrade() -> None:
    _recreate(STORE_TURNS)


def downgrade() -> None:
    _recreate(PREVIOUS)
