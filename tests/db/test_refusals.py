"""Which refusals of the database are the operator's to fix (gql_memory.db.refusals)."""

from __future__ import annotations

import asyncpg
import pytest

from gql_memory.db.refusals import operator_advice, shard_moved


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        (
            asyncpg.ConnectionFailureError(
                "connection to the remote node app@127.0.0.1:5433 failed with the following "
                'error: FATAL:  role "gql_memory_app" is not permitted to log in'
            ),
            "give it LOGIN on every node",
        ),
        (
            asyncpg.InvalidAuthorizationSpecificationError('role "app" does not exist'),
            "cannot log in",
        ),
        (asyncpg.InsufficientPrivilegeError("permission denied for table insights"), "privilege"),
        (
            asyncpg.UndefinedFunctionError(
                "function public.gql_memory_archive(text, bigint[], text, text, text) does "
                "not exist"
            ),
            "gql-memory distribute` creates the schema's functions on the workers",
        ),
    ],
)
def test_the_operators_refusals_are_named_with_what_to_do(
    error: asyncpg.PostgresError, advice: str
) -> None:
    named = operator_advice(error)
    assert named is not None
    assert named[0] == str(error) and advice in named[1]


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.ConnectionFailureError(
            "connection to the remote node app@127.0.0.1:5433 failed with the following "
            "error: Connection refused"
        ),
        asyncpg.InsufficientPrivilegeError(
            'new row violates row-level security policy for table "raw_dialogue"'
        ),
        asyncpg.UniqueViolationError("duplicate key value violates unique constraint"),
        OSError("connection reset"),
    ],
)
def test_outages_and_a_requests_own_errors_are_not_the_operators(error: Exception) -> None:
    assert operator_advice(error) is None


def test_a_plan_for_a_shard_split_or_moved_since_is_retryable() -> None:
    from gql_memory.db.engine import _is_unavailable

    moved = asyncpg.InternalServerError("could not find valid entry for shard 102035")
    assert shard_moved(moved) and _is_unavailable(moved)
    assert not shard_moved(asyncpg.InternalServerError("some other internal error"))
