"""Shared fixtures: one embedded PostgreSQL per test session, a fresh database per module.

The session migrates a template database once; each test module gets its own database
cloned from it (CREATE DATABASE ... TEMPLATE), so modules are isolated and start in ~50 ms.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from sqlalchemy import text

from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.db.embedded import EmbeddedPostgres, admin_url, start_embedded
from gql_memory.db.migrate import upgrade
from gql_memory.keys import ApiKeyStore
from gql_memory.memory import Memory
from gql_memory.server.app import create_app
from tests.fake_openai import FakeOpenAI

TEMPLATE_DB = "gqlm_template"
# The suite embeds with the lexical hash embedder (fast, deterministic); the tests of the
# in-process default (tests/embeddings/test_local.py) ask for it explicitly. Subprocesses
# (CLI, MCP) inherit it.
os.environ.setdefault("GQL_MEMORY_EMBEDDING_PROVIDER", "hash")
# No deadline a slow or loaded machine can reach: a statement or a request of the suite runs
# as long as it takes. The tests about deadlines set their own (tests/api/test_deadlines.py,
# test_limits.py, test_reliability.py); subprocesses inherit these too.
os.environ.setdefault("GQL_MEMORY_STATEMENT_TIMEOUT_MS", "0")
os.environ.setdefault("GQL_MEMORY_REQUEST_TIMEOUT_S", "0")


def private_temp_dir() -> Path:
    """A fresh directory under /tmp that no other test run touches.

    pytest's tmp_path root (/tmp/pytest-of-<user>) is shared by every pytest run of the same
    user, and each new run prunes old directories in it; a database of ours must not live there
    while other runs (other worktrees) start.
    """
    return Path(tempfile.mkdtemp(prefix="gqlm-test-"))


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    root = private_temp_dir()
    server = start_embedded(root / "data", database=TEMPLATE_DB)
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def scratch_dir() -> Iterator[Path]:
    """A private temporary directory for one test (see ``private_temp_dir``)."""
    root = private_temp_dir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest_asyncio.fixture(scope="session")
async def template_db(embedded_pg: EmbeddedPostgres) -> str:
    db = Database.from_url(embedded_pg.url, Settings())
    await upgrade(db, Settings().hash_embedding_dim)
    await db.dispose()
    return TEMPLATE_DB


async def _admin(embedded_pg: EmbeddedPostgres, sql: str) -> None:
    db = Database.from_url(admin_url(embedded_pg.server, "postgres"), Settings())
    async with db.engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text(sql))
    await db.dispose()


@pytest_asyncio.fixture(scope="module")
async def database_url(
    embedded_pg: EmbeddedPostgres, template_db: str, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """A database of this module's own, cloned from the migrated template."""
    name = "t_" + re.sub(r"[^a-z0-9_]", "_", request.module.__name__.lower())[-50:]
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await _admin(embedded_pg, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield admin_url(embedded_pg.server, name)
    await _admin(embedded_pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, db_pool_size=20, db_max_overflow=20)


@pytest_asyncio.fixture(scope="module")
async def db(settings: Settings) -> AsyncIterator[Database]:
    assert settings.database_url
    database = Database.from_url(settings.database_url, settings)
    yield database
    await database.dispose()


@pytest_asyncio.fixture
async def memory(db: Database, settings: Settings) -> AsyncIterator[Memory]:
    """Services of the default namespace on an emptied database."""
    await truncate_all(db)
    yield Memory(db, settings)


async def data_tables(conn: Any) -> list[str]:
    """The tables that hold memories (all but the schema version and embedding config)."""
    found = await conn.execute(
        text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename NOT IN ('alembic_version', 'embedding_config') ORDER BY tablename"
        )
    )
    return list(found.scalars().all())


async def truncate_all(db: Database) -> None:
    async with db.write() as conn:
        tables = await data_tables(conn)
        await conn.execute(text(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"))


# --- real HTTP through the real ASGI app ---------------------------------------------------

# Not a performance bound: a generous limit that turns a hang into a failure instead of hanging
# the suite. Tests assert outcomes (codes, rows), never how long something took.
HANG_GUARD_S = 60.0


@dataclass
class LiveServer:
    """A uvicorn server on 127.0.0.1 running the real app, and a client for it."""

    base_url: str
    client: httpx.AsyncClient
    headers: dict[str, str] = field(default_factory=dict)

    def with_key(self, key: str) -> LiveServer:
        """The same server, every request sent with ``Authorization: Bearer <key>``."""
        return replace(self, headers={"Authorization": f"Bearer {key}"})

    async def graphql(
        self, query: str, variables: dict[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        kwargs.setdefault("headers", self.headers)
        response = await self.client.post(
            "/graphql", json={"query": query, "variables": variables or {}}, **kwargs
        )
        assert response.headers["content-type"].startswith("application/json"), response.text
        return response.json()

    async def data(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result's data; fails the test if there were errors."""
        body = await self.graphql(query, variables)
        assert "errors" not in body, body["errors"]
        return body["data"]

    async def error(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result's only error; fails the test if there was none."""
        body = await self.graphql(query, variables)
        assert body.get("errors"), body
        assert len(body["errors"]) == 1, body["errors"]
        return body["errors"][0]


async def start_live_server(app: Any) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and
    # without it every response waits ~40 ms for a delayed ACK (Nagle).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", ws="websockets-sansio")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(1000):
        if server.started:
            return server, task, f"http://127.0.0.1:{port}"
        if task.done():
            break
        await asyncio.sleep(0.01)
    server.should_exit = True
    await task
    raise RuntimeError("the test server did not start (see the log above)")


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[LiveServer]:
    """The real app with these settings on a live uvicorn server, and a client for it."""
    server, task, base_url = await start_live_server(create_app(settings))
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        yield LiveServer(base_url=base_url, client=client)
    server.should_exit = True
    await task


@pytest_asyncio.fixture(scope="module")
async def live(settings: Settings) -> AsyncIterator[LiveServer]:
    async with serving(settings) as server:
        yield server


@pytest_asyncio.fixture
async def api(live: LiveServer, db: Database) -> LiveServer:
    """The live server on an emptied database."""
    await truncate_all(db)
    return live


# --- auth required: API keys --------------------------------------------------------------

KEY_CACHE_TTL_S = 0.3  # short, so that revocation tests wait little


@pytest.fixture(scope="module")
def secure_settings(settings: Settings) -> Settings:
    """Settings of a server that requires API keys."""
    return settings.with_overrides(auth="required", api_key_cache_ttl_s=KEY_CACHE_TTL_S)


@pytest_asyncio.fixture(scope="module")
async def secure_live(secure_settings: Settings) -> AsyncIterator[LiveServer]:
    server, task, base_url = await start_live_server(create_app(secure_settings))
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        yield LiveServer(base_url=base_url, client=client)
    server.should_exit = True
    await task


@pytest_asyncio.fixture
async def secure_api(secure_live: LiveServer, db: Database) -> LiveServer:
    """The auth-required live server (no key attached) on an emptied database."""
    await truncate_all(db)
    return secure_live


@pytest.fixture
def key_store(db: Database) -> ApiKeyStore:
    return ApiKeyStore(db)


ROOT = Path(__file__).resolve().parents[1]


@pytest_asyncio.fixture(scope="module")
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible embeddings server on 127.0.0.1 (dimension 384)."""
    fake = FakeOpenAI()
    server, task, base_url = await start_live_server(fake.app())
    fake.base_url = f"{base_url}/v1"
    yield fake
    server.should_exit = True
    await task


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every SQL statement any engine in this process executes while the test runs."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: list[str] = []

    def record(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def openai_settings(settings: Settings, fake: FakeOpenAI, **changes: Any) -> Settings:
    """Settings that use the real openai client against the fake server, fast retries."""
    values: dict[str, Any] = {
        "embedding_provider": "openai",
        "openai_base_url": fake.base_url,
        "openai_api_key": "sk-test",
        "embedding_dim": fake.dim,
        "embedding_retry_base_delay_s": 0.001,
        "embedding_max_retries": 3,
    }
    return settings.with_overrides(**{**values, **changes})


@pytest.fixture(scope="session")
def node_clients() -> Path:
    """The pinned Node clients of tests/node/ (``npm ci`` into a cache on first use); the
    tests that need them skip, saying why, on a machine without node and npm."""
    from tests import node_clients

    missing = node_clients.missing_tools()
    if missing:
        reason = f"{' and '.join(missing)} not found on PATH: the Node client tests need them"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    return node_clients.install()


# --- one xdist worker for the Citus tests ---------------------------------------------------


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with every file of tests/citus/ counted as one: they share one
    cluster (tests/citus/conftest.py), which a second worker would start again."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class CitusTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/citus/"):
                return "tests/citus/"
            return super()._split_scope(nodeid)

    return CitusTogether(config, log)
