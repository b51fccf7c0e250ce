"""Typed domain errors. The API maps each to one GraphQL error code in api/errors.py."""

from __future__ import annotations


class GqlMemoryError(Exception):
    """Base of every error gql_memory raises on purpose."""

    code = "INTERNAL_SERVER_ERROR"


class ValidationError(GqlMemoryError, ValueError):
    """Input was invalid; the message says what and is safe to show to the caller."""

    code = "BAD_USER_INPUT"


class NotFoundError(GqlMemoryError, LookupError):
    """A referenced row does not exist (or belongs to another namespace)."""

    code = "NOT_FOUND"


class ServiceUnavailableError(GqlMemoryError):
    """A dependency (database, embedding provider) is unavailable right now."""

    code = "SERVICE_UNAVAILABLE"


class ConfigurationError(GqlMemoryError):
    """The server cannot start with this configuration; the message says how to fix it."""


class UnauthenticatedError(GqlMemoryError):
    """No valid API key came with a request that needs one (missing, unknown or revoked)."""

    code = "UNAUTHENTICATED"


class ForbiddenError(GqlMemoryError):
    """The API key is valid but lacks the scope the operation needs."""

    code = "FORBIDDEN"
