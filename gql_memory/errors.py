"""Typed domain errors. The API maps each to one GraphQL error code in api/errors.py."""

from __future__ import annotations

import math


class GqlMemoryError(Exception):
    """Base of every error gql_memory raises on purpose."""

    code = "INTERNAL_SERVER_ERROR"

    @property
    def extensions(self) -> dict[str, object]:
        """More for the client than the code and message (GraphQL ``extensions``)."""
        return {}


class ValidationError(GqlMemoryError, ValueError):
    """Input was invalid; the message says what and is safe to show to the caller."""

    code = "BAD_USER_INPUT"


class NotFoundError(GqlMemoryError, LookupError):
    """A referenced row does not exist (or belongs to another namespace)."""

    code = "NOT_FOUND"


class ServiceUnavailableError(GqlMemoryError):
    """A dependency (database, embedding provider) is unavailable right now; with
    ``retry_after_s``, when trying again makes sense (``extensions.retryAfterMs``)."""

    code = "SERVICE_UNAVAILABLE"

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s

    @property
    def extensions(self) -> dict[str, object]:
        if self.retry_after_s is None:
            return {}
        return {"retryAfterMs": max(1, math.ceil(self.retry_after_s * 1000))}


class DatabaseMisconfiguredError(GqlMemoryError):
    """The database refused the server for a reason only its operator can fix (a role that
    may not log in, a missing privilege or function); trying again does not help until then.
    The server's log names the cause (gql_memory.db.refusals)."""

    code = "SERVICE_UNAVAILABLE"


class ConfigurationError(GqlMemoryError):
    """The server cannot start with this configuration; the message says how to fix it."""


class UnauthenticatedError(GqlMemoryError):
    """No valid API key came with a request that needs one (missing, unknown or revoked)."""

    code = "UNAUTHENTICATED"


class ForbiddenError(GqlMemoryError):
    """The API key is valid but lacks the scope the operation needs."""

    code = "FORBIDDEN"


class RateLimitedError(GqlMemoryError):
    """The API key sent more requests than its rate allows (or its namespace has more waiting
    than it may, ``message`` says which); retry after the given delay."""

    code = "RATE_LIMITED"

    def __init__(self, retry_after_s: float, message: str | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            message
            or f"Too many requests for this API key; retry in {retry_after_s:.2f} s "
            "(extensions.retryAfterMs)"
        )

    @property
    def extensions(self) -> dict[str, object]:
        return {"retryAfterMs": max(1, math.ceil(self.retry_after_s * 1000))}


class RequestTimeoutError(GqlMemoryError):
    """The request ran past its deadline; its work was cancelled and rolled back."""

    code = "TIMEOUT"


class PersistedQueryNotFoundError(GqlMemoryError):
    """A persisted document id (APQ hash or trusted document id) this server does not know;
    Apollo clients then resend the hash with the document. The message is Apollo's."""

    code = "PERSISTED_QUERY_NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("PersistedQueryNotFound")


class PersistedQueryRequiredError(GqlMemoryError):
    """Only trusted documents are served (GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY)."""

    code = "PERSISTED_QUERY_REQUIRED"
