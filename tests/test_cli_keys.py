"""`gql-memory keys create|list|revoke` and the loopback rule of `serve`, as real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore, hash_secret
from tests.conftest import truncate_all

# TEST-NET-1 (RFC 5737): not loopback, and never assigned here, so even a serve that wrongly
# got past the refusal could not listen on it.
NON_LOOPBACK = "192.0.2.10"
GQL_MEMORY = Path(sys.executable).parent / "gql-memory"


def gql_memory(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(GQL_MEMORY), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def clean_env(**extra: str) -> dict[str, str]:
    inherited = os.environ.items()
    env = {k: v for k, v in inherited if not k.startswith("GQL_MEMORY_") and k != "DATABASE_URL"}
    env.update(extra)
    return env


@pytest.fixture
async def cli_env(database_url: str, db: Database) -> dict[str, str]:
    await truncate_all(db)
    return clean_env(DATABASE_URL=database_url)


async def test_create_prints_the_key_alone_on_the_last_line(
    cli_env: dict[str, str], db: Database
) -> None:
    done = gql_memory(
        "keys", "create", "--namespace", "tenant-a", "--scopes", "read,write", "--name", "bot",
        env=cli_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    key = lines[-1]
    assert key.startswith("gqlm_") and " " not in key
    assert key not in "\n".join(lines[:-1]) and key not in done.stderr
    (stored,) = await ApiKeyStore(db).list()
    assert (stored.namespace, stored.name) == ("tenant-a", "bot")
    principal = await ApiKeyStore(db).principal_for_hash(hash_secret(key))
    assert principal is not None and principal.namespace == "tenant-a"


async def test_list_shows_keys_without_secrets_and_revoke_marks_them(
    cli_env: dict[str, str], db: Database
) -> None:
    created = await ApiKeyStore(db).create("tenant-b", "read", name="reader")
    listed = gql_memory("keys", "list", env=cli_env)
    assert listed.returncode == 0, listed.stderr
    assert "tenant-b" in listed.stdout and "reader" in listed.stdout and "active" in listed.stdout
    assert created.secret not in listed.stdout
    revoked = gql_memory("keys", "revoke", str(created.key.id), env=cli_env)
    assert revoked.returncode == 0 and f"revoked API key {created.key.id}" in revoked.stdout
    assert "revoked" in gql_memory("keys", "list", env=cli_env).stdout
    assert await ApiKeyStore(db).count_active() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("keys", "revoke", "424242"), "API key 424242 not found"),
        (("keys", "create", "--namespace", "x", "--scopes", "root"), "unknown scope 'root'"),
        (
            ("keys", "create", "--namespace", "a b", "--scopes", "read"),
            "is invalid: it must be 1-255",
        ),
    ],
)
async def test_key_commands_fail_with_a_message(
    cli_env: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    done = gql_memory(*args, env=cli_env)
    assert done.returncode == 2 and message in done.stderr


def test_keys_work_on_the_embedded_database(scratch_dir: Path) -> None:
    env = clean_env()
    data_dir = str(scratch_dir / "data")
    created = gql_memory(
        "keys", "create", "--namespace", "n1", "--scopes", "admin", "--data-dir", data_dir, env=env
    )
    assert created.returncode == 0, created.stderr
    listed = gql_memory("keys", "list", "--data-dir", data_dir, env=env)
    assert "n1" in listed.stdout and "admin" in listed.stdout


async def test_serve_off_loopback_without_keys_refuses_to_start(cli_env: dict[str, str]) -> None:
    done = gql_memory("serve", "--host", NON_LOOPBACK, "--port", "1", env=cli_env)
    assert done.returncode == 2
    assert "none exists yet" in done.stderr
    assert "gql-memory keys create" in done.stderr and "--insecure" in done.stderr


async def test_serve_off_loopback_with_optional_auth_refuses_to_start(
    cli_env: dict[str, str], db: Database
) -> None:
    await ApiKeyStore(db).create("default", "read")  # keys exist; optional auth is still refused
    env = {**cli_env, "GQL_MEMORY_AUTH": "optional"}
    done = gql_memory("serve", "--host", NON_LOOPBACK, "--port", "1", env=env)
    assert done.returncode == 2
    assert "GQL_MEMORY_AUTH=optional" in done.stderr and "--insecure" in done.stderr
