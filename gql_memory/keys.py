"""API keys and who may call: keys bound to a namespace and scopes, stored only as hashes.

Knows nothing about HTTP or GraphQL (gql_memory.server.auth applies it to requests). A key is
``gqlm_`` + 256 random bits; since it cannot be guessed, a plain SHA-256 at rest is enough
(slow password hashes protect low-entropy secrets) and lets a request be verified with one
indexed lookup — or none: verdicts are cached for a few seconds per process, so a revoked
key stops working within ``api_key_cache_ttl_s``.
"""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row, func, select

from gql_memory.config import (
    API_KEY_DISPLAY_CHARS,
    API_KEY_PREFIX,
    API_KEY_RANDOM_BYTES,
    Settings,
)
from gql_memory.db import Database
from gql_memory.db.tables import api_keys
from gql_memory.errors import ConfigurationError, NotFoundError, ValidationError
from gql_memory.memory import DEFAULT_NAMESPACE
from gql_memory.memory.events import EventKind, MemoryEvent, publish
from gql_memory.memory.validation import check_storable, require_id, require_namespace

AuthMode = Literal["required", "optional"]
_KEY_PATTERN = re.compile(rf"^{API_KEY_PREFIX}[A-Za-z0-9_-]{{20,100}}$")


class Scope(enum.Enum):
    """What a key may do: read (queries, subscriptions), write (mutations), admin (all)."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


def parse_scopes(value: str | Iterable[str | Scope]) -> frozenset[Scope]:
    """'read,write' (or an iterable) -> scopes; unknown or no scopes are a ValidationError."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    scopes = set()
    for part in parts:
        if isinstance(part, Scope):
            scopes.add(part)
            continue
        name = str(part).strip().lower()
        if not name:
            continue
        try:
            scopes.add(Scope(name))
        except ValueError as exc:
            raise ValidationError(f"unknown scope {name!r}: use read, write or admin") from exc
    if not scopes:
        raise ValidationError("a key needs at least one scope: read, write or admin")
    return frozenset(scopes)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the namespace every query is confined to and the granted scopes."""

    namespace: str
    scopes: frozenset[Scope]
    key_id: int | None = None  # None: anonymous (auth optional and no key sent)

    def allows(self, scope: Scope) -> bool:
        return scope in self.scopes or Scope.ADMIN in self.scopes


ANONYMOUS = Principal(DEFAULT_NAMESPACE, frozenset(Scope))
"""A caller without a key where auth is optional: the default namespace, full access."""


@dataclass(frozen=True)
class ApiKey:
    """A stored key, without its secret."""

    id: int
    namespace: str
    name: str | None
    prefix: str
    scopes: frozenset[Scope]
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: Row[Any] | Any) -> ApiKey:
        m = row._mapping
        return cls(
            id=m["id"],
            namespace=m["namespace"],
            name=m["name"],
            prefix=m["key_prefix"],
            scopes=parse_scopes(m["scopes"]),
            created_at=m["created_at"],
            revoked_at=m["revoked_at"],
        )


@dataclass(frozen=True)
class CreatedKey:
    """A new key: ``secret`` is shown once and never stored."""

    key: ApiKey
    secret: str


def generate_secret() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(API_KEY_RANDOM_BYTES)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_key(value: str) -> bool:
    """Shape check before any lookup: junk never reaches the database or the cache."""
    return bool(_KEY_PATTERN.match(value))


class ApiKeyStore:
    """Create, list, revoke and look up keys (all namespaces: an operator's tool)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create(
        self, namespace: str, scopes: str | Iterable[str | Scope], name: str | None = None
    ) -> CreatedKey:
        namespace = require_namespace(namespace)
        granted = parse_scopes(scopes)
        if name is not None:
            name = check_storable(name.strip(), "name")[:255] or None
        secret = generate_secret()
        async with self.db.write() as conn:
            row = (
                await conn.execute(
                    api_keys.insert()
                    .values(
                        namespace=namespace,
                        name=name,
                        key_hash=hash_secret(secret),
                        key_prefix=secret[:API_KEY_DISPLAY_CHARS],
                        scopes=sorted(s.value for s in granted),
                    )
                    .returning(*api_keys.c)
                )
            ).one()
        return CreatedKey(key=ApiKey.from_row(row), secret=secret)

    async def list(self, *, include_revoked: bool = True) -> list[ApiKey]:
        query = select(api_keys).order_by(api_keys.c.id)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [ApiKey.from_row(r) for r in rows]

    async def revoke(self, key_id: Any) -> ApiKey:
        """Revoke a key (idempotent: revoking twice keeps the first time)."""
        key_id = require_id(key_id)
        async with self.db.write() as conn:
            row = (
                await conn.execute(
                    api_keys.update()
                    .where(api_keys.c.id == key_id)
                    .values(revoked_at=func.coalesce(api_keys.c.revoked_at, func.now()))
                    .returning(*api_keys.c)
                )
            ).first()
            if row is not None:
                await publish(
                    conn, MemoryEvent(EventKind.KEY_REVOKED, row.namespace, ids=(key_id,))
                )
        if row is None:
            raise NotFoundError(f"API key {key_id} not found")
        return ApiKey.from_row(row)

    async def count_active(self) -> int:
        async with self.db.read() as conn:
            count = await conn.scalar(
                select(func.count()).select_from(api_keys).where(api_keys.c.revoked_at.is_(None))
            )
        return int(count or 0)

    async def principal_for_hash(self, key_hash: str) -> Principal | None:
        """The principal of an active key with this hash, or None (one indexed read)."""
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    select(api_keys.c.id, api_keys.c.namespace, api_keys.c.scopes).where(
                        api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
                    )
                )
            ).first()
        if row is None:
            return None
        return Principal(namespace=row.namespace, scopes=parse_scopes(row.scopes), key_id=row.id)


class KeyVerifier:
    """Verifies keys, trusting each verdict (valid or not) for ``ttl_s`` seconds.

    The cache is keyed by the hash, so it holds no secrets; it is bounded (oldest first out)
    so that a flood of random keys cannot grow it. Each worker process has its own cache.
    """

    def __init__(
        self,
        store: ApiKeyStore,
        ttl_s: float,
        max_entries: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._verdicts: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()

    @classmethod
    def for_settings(cls, db: Database, settings: Settings) -> KeyVerifier:
        return cls(ApiKeyStore(db), settings.api_key_cache_ttl_s, settings.api_key_cache_size)

    async def verify(self, secret: str) -> Principal | None:
        """The key's principal, or None for an unknown, revoked or malformed key."""
        if not looks_like_key(secret):
            return None
        return await self.verify_hash(hash_secret(secret))

    def forget_key(self, key_id: int) -> None:
        """Drop the cached verdicts of a key (it was revoked on some server)."""
        for digest, (_, principal) in list(self._verdicts.items()):
            if principal is not None and principal.key_id == key_id:
                del self._verdicts[digest]

    async def verify_hash(self, digest: str) -> Principal | None:
        """``verify`` for a key already hashed (re-checking a long-lived connection)."""
        now = self.clock()
        cached = self._verdicts.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        principal = await self.store.principal_for_hash(digest)
        self._verdicts[digest] = (now + self.ttl_s, principal)
        self._verdicts.move_to_end(digest)
        while len(self._verdicts) > self.max_entries:
            self._verdicts.popitem(last=False)
        return principal


# --- exposure policy: when may a server run without keys ------------------------------------


def host_of(value: str) -> str:
    """'[::1]:8000' -> '::1', 'localhost:8000' -> 'localhost' (a bind address or Host header)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1; false for 0.0.0.0, :: and every other name."""
    name = host_of(host)
    if name in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def auth_mode(settings: Settings) -> AuthMode:
    """The effective mode: the setting, else optional on loopback (or --insecure), else required."""
    if settings.auth is not None:
        return settings.auth
    return "optional" if settings.insecure or is_loopback(settings.host) else "required"


def check_exposure(settings: Settings, active_keys: int | None = None) -> AuthMode:
    """Refuse to serve a non-loopback address without keys unless the operator insists.

    Off loopback, without ``--insecure``: auth must not be optional and at least one active
    key must exist (a server that refuses everyone is a misconfiguration, not security).
    ``active_keys=None`` (not known yet) checks the mode only.
    """
    mode = auth_mode(settings)
    if is_loopback(settings.host) or settings.insecure:
        return mode
    create = "gql-memory keys create --namespace default --scopes read,write"
    if mode == "optional":
        raise ConfigurationError(
            f"refusing to serve {settings.host} with GQL_MEMORY_AUTH=optional: anyone who can "
            f"reach it could read and write memory without a key. Unset GQL_MEMORY_AUTH (auth "
            f"is then required off loopback) and create a key with `{create}`, bind 127.0.0.1, "
            f"or pass --insecure if this is really what you want."
        )
    if active_keys is not None and active_keys == 0:
        raise ConfigurationError(
            f"refusing to serve {settings.host}: API keys are required off loopback and none "
            f"exists yet. Create one with `{create}` (same database / --data-dir), or pass "
            f"--insecure to serve without authentication."
        )
    return mode
