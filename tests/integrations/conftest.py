"""Stores for the adapters' tests: each test gets a namespace of its own on the module's
database (tests/conftest.py), so nothing needs truncating."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from gql_memory import AsyncMemoryStore, MemoryStore
from gql_memory.config import Settings


@pytest.fixture
def namespace() -> str:
    return f"adapter-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def store_settings(settings: Settings) -> Settings:
    return settings.with_overrides(db_pool_size=4, db_max_overflow=4)


@pytest_asyncio.fixture
async def async_store(store_settings: Settings, namespace: str) -> AsyncIterator[AsyncMemoryStore]:
    async with AsyncMemoryStore(
        settings=store_settings, namespace=namespace, migrate=False
    ) as store:
        yield store


@pytest.fixture
def sync_store(store_settings: Settings, namespace: str) -> Iterator[MemoryStore]:
    with MemoryStore(settings=store_settings, namespace=namespace, migrate=False) as store:
        yield store
