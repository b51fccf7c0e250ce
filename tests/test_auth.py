"""API keys (gql_memory.keys): hashing, scopes, the verification cache and the loopback rule."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import ConfigurationError, NotFoundError, ValidationError
from gql_memory.keys import (
    ApiKeyStore,
    KeyVerifier,
    Principal,
    Scope,
    auth_mode,
    check_exposure,
    generate_secret,
    hash_secret,
    is_loopback,
    looks_like_key,
    parse_scopes,
)
from tests.conftest import truncate_all

# --- keys and scopes ----------------------------------------------------------------------------


def test_keys_are_random_prefixed_and_hashed() -> None:
    first, second = generate_secret(), generate_secret()
    assert first != second and first.startswith("gqlm_") and len(first) >= 45
    assert looks_like_key(first)
    assert hash_secret(first) != hash_secret(second) and len(hash_secret(first)) == 64
    assert first not in hash_secret(first)


@pytest.mark.parametrize("junk", ["", "Bearer x", "gqlm_short", "gqlm_" + "a" * 20 + "!", "x" * 60])
def test_malformed_keys_are_recognised_without_a_lookup(junk: str) -> None:
    assert not looks_like_key(junk)


def test_scopes_parse_and_admin_implies_everything() -> None:
    assert parse_scopes("read, write") == {Scope.READ, Scope.WRITE}
    with pytest.raises(ValidationError, match="unknown scope 'root'"):
        parse_scopes("read,root")
    with pytest.raises(ValidationError, match="at least one scope"):
        parse_scopes(" , ")
    admin = Principal("ns", parse_scopes("admin"))
    assert admin.allows(Scope.READ) and admin.allows(Scope.WRITE)
    reader = Principal("ns", parse_scopes("read"))
    assert reader.allows(Scope.READ) and not reader.allows(Scope.WRITE)


# --- the store ----------------------------------------------------------------------------------


@pytest.fixture
async def store(db: Database) -> ApiKeyStore:
    await truncate_all(db)
    return ApiKeyStore(db)


async def test_the_key_itself_is_never_stored(store: ApiKeyStore, db: Database) -> None:
    created = await store.create("tenant-a", "read,write", name="agent 1")
    async with db.read() as conn:
        row = (await conn.execute(text("SELECT * FROM api_keys"))).one()
    assert created.secret not in str(tuple(row))
    assert row.key_hash == hash_secret(created.secret)
    assert created.key.prefix == created.secret[:12]
    assert created.key.scopes == {Scope.READ, Scope.WRITE} and created.key.name == "agent 1"


async def test_list_revoke_and_count(store: ApiKeyStore) -> None:
    first = await store.create("tenant-a", "read")
    await store.create("tenant-b", "write")
    assert await store.count_active() == 2
    revoked = await store.revoke(first.key.id)
    again = await store.revoke(first.key.id)
    assert revoked.revoked_at is not None and again.revoked_at == revoked.revoked_at
    assert await store.count_active() == 1
    assert [k.namespace for k in await store.list(include_revoked=False)] == ["tenant-b"]
    assert len(await store.list()) == 2
    with pytest.raises(NotFoundError, match="API key 999 not found"):
        await store.revoke(999)


@pytest.mark.parametrize("namespace", ["", " x", "a b", "ns/1", "x" * 256, "é"])
async def test_invalid_namespaces_are_refused(store: ApiKeyStore, namespace: str) -> None:
    with pytest.raises(ValidationError, match="is invalid: it must be 1-255 characters"):
        await store.create(namespace, "read")


# --- verification cache -------------------------------------------------------------------------


class CountingStore(ApiKeyStore):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.lookups = 0

    async def principal_for_hash(self, key_hash: str) -> Principal | None:
        self.lookups += 1
        return await super().principal_for_hash(key_hash)


async def test_verification_is_cached_and_expires(store: ApiKeyStore, db: Database) -> None:
    counting = CountingStore(db)
    now = [100.0]
    verifier = KeyVerifier(counting, ttl_s=5.0, max_entries=100, clock=lambda: now[0])
    created = await store.create("tenant-a", "read")
    for _ in range(10):
        principal = await verifier.verify(created.secret)
        assert principal == Principal("tenant-a", frozenset({Scope.READ}), created.key.id)
    assert counting.lookups == 1  # the hot path does not touch the database
    await store.revoke(created.key.id)
    now[0] += 4.9
    assert await verifier.verify(created.secret) is not None  # still trusted within the TTL
    now[0] += 0.2
    assert await verifier.verify(created.secret) is None  # revocation honoured after it
    assert counting.lookups == 2


async def test_unknown_keys_are_cached_and_junk_never_looked_up(db: Database) -> None:
    counting = CountingStore(db)
    verifier = KeyVerifier(counting, ttl_s=60, max_entries=2)
    assert await verifier.verify("not a key") is None
    assert counting.lookups == 0
    unknown = [generate_secret() for _ in range(3)]
    for key in unknown + unknown[-1:]:
        assert await verifier.verify(key) is None
    assert counting.lookups == 3  # the repeated key came from the cache
    assert len(verifier._verdicts) == 2  # bounded: the oldest verdict was dropped


# --- the loopback rule --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]:8000", True),
        ("localhost:8000", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("memory.example.com", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "auth", "insecure", "keys", "outcome"),
    [
        ("127.0.0.1", None, False, 0, "optional"),
        ("127.0.0.1", "required", False, 0, "required"),
        ("localhost", "optional", False, 0, "optional"),
        ("0.0.0.0", None, False, 1, "required"),
        ("0.0.0.0", "required", False, 3, "required"),
        ("0.0.0.0", None, False, 0, "none exists yet"),
        ("0.0.0.0", "required", False, 0, "none exists yet"),
        ("0.0.0.0", "optional", False, 5, "GQL_MEMORY_AUTH=optional"),
        ("0.0.0.0", None, True, 0, "optional"),
        ("0.0.0.0", "optional", True, 0, "optional"),
        ("0.0.0.0", "required", True, 0, "required"),
    ],
)
def test_serving_off_loopback_needs_keys_or_insecure(
    host: str, auth: str | None, insecure: bool, keys: int, outcome: str
) -> None:
    settings = Settings(host=host, auth=auth, insecure=insecure)
    if outcome in ("optional", "required"):
        assert check_exposure(settings, keys) == outcome == auth_mode(settings)
    else:
        with pytest.raises(ConfigurationError, match=outcome) as refused:
            check_exposure(settings, keys)
        assert "gql-memory keys create" in str(refused.value)
        assert "--insecure" in str(refused.value)
