"""The per-request context every resolver sees (``Info``), and the caller's ``Credentials``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from strawberry.types import Info as StrawberryInfo

from gql_memory.api.loaders import Loaders
from gql_memory.api.persisted import PersistedDocuments
from gql_memory.api.rate_limit import RateLimiter
from gql_memory.config import Settings
from gql_memory.errors import GqlMemoryError, UnauthenticatedError
from gql_memory.keys import Principal
from gql_memory.live.hub import EventHub
from gql_memory.memory import Memory

KEY_REQUIRED = "An API key is required: send the header 'Authorization: Bearer <api key>'"


@dataclass(frozen=True)
class Credentials:
    """The outcome of authentication: a principal, or the error every operation will get."""

    principal: Principal | None
    error: GqlMemoryError | None = None
    key_hash: str | None = None  # of the key the principal came from, for re-checks

    def require(self) -> Principal:
        """The principal, or raise (a fresh copy of) the refusal."""
        if self.principal is not None:
            return self.principal
        error = self.error or UnauthenticatedError(KEY_REQUIRED)
        raise type(error)(str(error))


@dataclass
class Context:
    """The caller's credentials, namespace-bound services and request metadata."""

    request: Any
    response: Any
    settings: Settings
    request_id: str
    credentials: Credentials
    # Builds the services of one namespace (db, settings, embedder... bound in get_context).
    build_memory: Callable[[str], Memory]
    connection_params: dict[str, Any] | None = None  # set by strawberry on websockets
    # Websockets only: re-checks the key before each operation of the long-lived connection.
    refresh_credentials: Callable[[Credentials], Awaitable[Credentials]] | None = None
    events: EventHub | None = None  # live events of this process (subscriptions)
    rate_limiter: RateLimiter | None = None  # per-key operation rate (api/rate_limit.py)
    documents: PersistedDocuments | None = None  # trusted documents and APQ (api/persisted.py)
    # Websockets: one context per connection; its open subscriptions (bounded by a setting).
    open_subscriptions: int = 0
    # "<type> <name>" of each operation run with this context, for the access log
    # (api/extensions/operation_log.py); the view shares this list with the request's state.
    operations: list[str] = field(default_factory=list)
    # The newest commit position of this request (a batch's earlier mutations), so later
    # reads see it (api/extensions/read_consistency.py).
    read_after_lsn: int = 0
    _memory: Memory | None = field(default=None, repr=False)
    _loaders: Loaders | None = field(default=None, repr=False)

    @property
    def memory(self) -> Memory:
        """Every layer, confined to the caller's namespace (from the API key, never the request).

        Without an authenticated principal this raises, so even a resolver that somehow ran
        before the ScopeGuard could not touch any namespace. Anything namespace-bound that a
        layer adds to the context (DataLoaders...) must be derived from this property.
        """
        principal = self.credentials.require()
        if self._memory is None or self._memory.namespace != principal.namespace:
            self._memory = self.build_memory(principal.namespace)
        return self._memory

    @property
    def loaders(self) -> Loaders:
        """Per-request DataLoaders, built from (and only ever for) the caller's namespace."""
        memory = self.memory
        if self._loaders is None or self._loaders.namespace != memory.namespace:
            self._loaders = Loaders(memory)
        return self._loaders


Info = StrawberryInfo[Context, None]
