"""Authentication: the Authorization header (or websocket connection params) into Credentials.

The view authenticates the caller once per request (or websocket connection) when it builds
the context; the ``ScopeGuard`` schema extension (api/extensions/scope_guard.py) then admits
or refuses every operation by its scope.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gql_memory.api.info import KEY_REQUIRED, Credentials
from gql_memory.config import Settings
from gql_memory.errors import (
    ForbiddenError,
    GqlMemoryError,
    ServiceUnavailableError,
    UnauthenticatedError,
)
from gql_memory.keys import (
    ANONYMOUS,
    KeyVerifier,
    Scope,
    auth_mode,
    hash_secret,
    is_loopback,
    looks_like_key,
)

BEARER = re.compile(r"^\s*Bearer\s+(\S+)\s*$", re.IGNORECASE)
BAD_HEADER = "The Authorization header must be 'Bearer <api key>'"
INVALID_KEY = "Invalid or revoked API key"
LOOPBACK_ONLY = (
    "Requests without an API key are only accepted from this machine: a loopback Host "
    "(127.0.0.1 or localhost) and no proxy in between; send 'Authorization: Bearer <api key>'"
)
METRICS_REFUSED = (
    "/metrics shows every tenant's operations: it needs an API key with the admin scope, or a "
    "request from this machine (a loopback client and Host, no proxy in between)"
)
METRICS_NEEDS_ADMIN = "/metrics needs an API key with the admin scope"


class Authenticator:
    """Turns an Authorization header or websocket connection params into Credentials."""

    def __init__(self, settings: Settings, verifier: KeyVerifier) -> None:
        self.mode = auth_mode(settings)
        self.insecure = settings.insecure
        self.verifier = verifier

    async def from_headers(self, headers: Mapping[str, str]) -> Credentials:
        header = headers.get("authorization")
        if header is None:
            proxied = any(name in headers for name in FORWARDING_HEADERS)
            return self._anonymous(headers.get("host", ""), proxied)
        match = BEARER.match(header)
        if match is None:
            return Credentials(None, UnauthenticatedError(BAD_HEADER))
        return await self.from_key(match.group(1))

    async def from_connection_params(
        self, params: Mapping[str, Any] | None, current: Credentials
    ) -> Credentials:
        """graphql-transport-ws ``connection_init`` payload: ``{"Authorization": "Bearer k"}``
        (any case) or ``{"apiKey": "k"}``; without either, the handshake's credentials stay."""
        params = params or {}
        lowered = {str(k).lower(): v for k, v in params.items()}
        if isinstance(lowered.get("authorization"), str):
            return await self.from_headers({"authorization": lowered["authorization"]})
        if isinstance(lowered.get("apikey"), str):
            return await self.from_key(lowered["apikey"])
        return current

    async def from_key(self, key: str) -> Credentials:
        if not looks_like_key(key):
            return Credentials(None, UnauthenticatedError(INVALID_KEY))
        return await self._from_hash(hash_secret(key))

    async def refresh(self, credentials: Credentials) -> Credentials:
        """Re-check the key behind long-lived credentials (a websocket): revocation applies
        to the connection's next operation, within the cache TTL."""
        if credentials.key_hash is None:
            return credentials
        return await self._from_hash(credentials.key_hash)

    async def _from_hash(self, key_hash: str) -> Credentials:
        # The hash stays with refusals too: a websocket whose check met a database outage
        # must pass the next check once the database is back.
        try:
            principal = await self.verifier.verify_hash(key_hash)
        except ServiceUnavailableError as exc:
            return Credentials(None, exc, key_hash=key_hash)
        if principal is None:
            return Credentials(None, UnauthenticatedError(INVALID_KEY), key_hash=key_hash)
        return Credentials(principal, key_hash=key_hash)

    async def metrics_refusal(
        self, headers: Mapping[str, str], client_host: str | None
    ) -> GqlMemoryError | None:
        """Why this request may not read /metrics (every tenant's operation counts), or None.
        A key must have the admin scope. Without one: where keys are required, only a caller
        on this machine (loopback client address and Host, no forwarding header); where they
        are optional, whoever may query without a key."""
        if "authorization" in headers:
            credentials = await self.from_headers(headers)
            if credentials.principal is None:
                return credentials.error
            if not credentials.principal.allows(Scope.ADMIN):
                return ForbiddenError(METRICS_NEEDS_ADMIN)
            return None
        host = headers.get("host", "")
        proxied = any(name in headers for name in FORWARDING_HEADERS)
        if self.mode == "optional":
            return self._anonymous(host, proxied).error
        local = client_host is not None and is_loopback(client_host) and is_loopback(host)
        return None if local and not proxied else UnauthenticatedError(METRICS_REFUSED)

    def _anonymous(self, host_header: str, proxied: bool = False) -> Credentials:
        if self.mode == "required":
            return Credentials(None, UnauthenticatedError(KEY_REQUIRED))
        # A page on another site can reach a loopback server through DNS rebinding; its
        # requests then carry that site's name as Host. Anonymous access needs a loopback Host.
        # A reverse proxy on the same host (nginx's default proxy_pass) sends a loopback Host
        # for the whole internet: a forwarded request is never anonymous.
        if not self.insecure and (proxied or not is_loopback(host_header)):
            return Credentials(None, UnauthenticatedError(LOOPBACK_ONLY))
        return Credentials(ANONYMOUS)


# Headers a reverse proxy adds: their presence means the caller is not on this machine.
FORWARDING_HEADERS = (
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "x-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "via",
)
