"""Refusals of the database that only its operator can fix, told apart from outages.

A role that may not log in (on a Citus worker too), a missing privilege or a missing function
is not "the database is unavailable": retrying does not help. ``operator_advice`` names such
a refusal and says what to do; the server logs both, and the client is told that the server's
database is misconfigured (never the SQL, or anything of the tenant's).

The other way round, ``shard_moved`` recognises a statement that Citus planned for a shard it
has just split or moved away (``isolate_tenant_to_new_shard``, ``citus_move_shard_placement``
while serving): the next attempt is planned afresh, so it is a retryable SERVICE_UNAVAILABLE.
"""

from __future__ import annotations

import asyncpg
import sqlalchemy.exc

# (what the message of the refusal contains, what the operator should do)
_LOGIN = (
    "is not permitted to log in",
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",  # role "..." does not exist, in a node's login refusal
)
_LOGIN_ADVICE = (
    "the request role cannot log in where the database needs it (on Citus the coordinator "
    "connects to each worker as that role): give it LOGIN on every node (`gql-memory "
    "distribute` does) and let it authenticate from the coordinator (pg_hba.conf, .pgpass or "
    "citus.node_conninfo)"
)
_PRIVILEGE_ADVICE = (
    "the request role lacks a privilege: run `gql-memory migrate` (and on Citus `gql-memory "
    "distribute`) with the same GQL_MEMORY_DATABASE_ROLE, or grant what the message names"
)
_FUNCTION_ADVICE = (
    "a function of the schema is missing where the statement ran: run `gql-memory migrate`; "
    "on Citus, `gql-memory distribute` creates the schema's functions on the workers"
)


# Citus's messages (SQLSTATE XX000) for a plan whose shard was split or moved since
_MOVED_SHARD = ("could not find valid entry for shard", "could not find any shard placement")


def shard_moved(exc: BaseException) -> bool:
    error = _postgres_error(exc)
    message = str(getattr(error, "message", None) or error) if error is not None else ""
    return isinstance(error, asyncpg.InternalServerError) and message.startswith(_MOVED_SHARD)


def _postgres_error(exc: BaseException) -> asyncpg.PostgresError | None:
    if isinstance(exc, asyncpg.PostgresError):
        return exc
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        for candidate in (exc.orig, getattr(exc.orig, "__cause__", None)):
            if isinstance(candidate, asyncpg.PostgresError):
                return candidate
    return None


def operator_advice(exc: BaseException) -> tuple[str, str] | None:
    """(the database's own message, what the operator should do) for a refusal only the
    operator can fix; None for anything else (outages, a request's own errors)."""
    error = _postgres_error(exc)
    if error is None:
        return None
    message = str(getattr(error, "message", None) or error)
    login_refused = any(reason in message for reason in _LOGIN)
    if isinstance(
        error,
        asyncpg.InvalidAuthorizationSpecificationError | asyncpg.InvalidPasswordError,
    ):
        return message, _LOGIN_ADVICE
    if isinstance(error, asyncpg.PostgresConnectionError) and login_refused:
        return message, _LOGIN_ADVICE  # Citus: a worker refused the coordinator's login
    if isinstance(error, asyncpg.InsufficientPrivilegeError) and message.startswith(
        "permission denied"
    ):
        return message, _PRIVILEGE_ADVICE
    if isinstance(error, asyncpg.UndefinedFunctionError):
        return message, _FUNCTION_ADVICE
    return None
