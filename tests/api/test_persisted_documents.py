"""Trusted documents (documentId, trusted-only mode) and Apollo's automatic persisted queries."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gql_memory.api.persisted import PersistedDocuments
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.errors import ConfigurationError
from gql_memory.keys import ApiKeyStore
from tests.conftest import LiveServer, serving, truncate_all

COUNT = "query Count { stats { workingMemory } }"
ADD = (
    'mutation Add($c: String!) { addWorkingMemory(input: {content: $c, sessionId: "p"}) '
    "{ addedId } }"
)
AD_HOC = "{ stats { rawDialogue } }"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def apq(query: str | None, digest: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "extensions": {"persistedQuery": {"version": 1, "sha256Hash": digest}},
        **extra,
    }
    if query is not None:
        body["query"] = query
    return body


async def post(api: LiveServer, body: dict[str, Any], **headers: str) -> tuple[int, Any]:
    response = await api.client.post("/graphql", json=body, headers={**api.headers, **headers})
    return response.status_code, response.json()


def code_of(body: dict[str, Any]) -> str:
    return body["errors"][0]["extensions"]["code"]


async def test_apq_round_trip(api: LiveServer) -> None:
    """Unknown hash -> PERSISTED_QUERY_NOT_FOUND; hash + query -> registered and run;
    hash alone -> run."""
    digest = sha256(COUNT)
    status, body = await post(api, apq(None, digest))
    assert status == 200 and body["data"] is None
    assert body["errors"][0]["message"] == "PersistedQueryNotFound"
    assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND"
    status, body = await post(api, apq(COUNT, digest))
    assert status == 200 and body["data"] == {"stats": {"workingMemory": 0}}
    status, body = await post(api, apq(None, digest))
    assert status == 200 and body["data"] == {"stats": {"workingMemory": 0}}
    # over GET too, as Apollo's link sends queries once registered
    response = await api.client.get(
        "/graphql",
        params={"extensions": json.dumps(apq(None, digest)["extensions"])},
        headers={"Accept": "application/graphql-response+json"},
    )
    assert response.status_code == 200 and response.json()["data"]


async def test_apq_not_found_is_404_without_data_under_the_spec_type(api: LiveServer) -> None:
    status, body = await post(
        api, apq(None, sha256("{ never }")), Accept="application/graphql-response+json"
    )
    assert status == 404 and "data" not in body
    assert body["errors"][0]["message"] == "PersistedQueryNotFound"


async def test_apq_refuses_a_hash_that_does_not_match_and_registers_nothing(
    api: LiveServer,
) -> None:
    wrong = sha256("{ something else }")
    status, body = await post(api, apq(COUNT, wrong))
    assert code_of(body) == "BAD_USER_INPUT" and "does not match" in body["errors"][0]["message"]
    status, body = await post(api, apq(None, wrong))
    assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND"


async def test_apq_registrations_are_kept_per_namespace(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    api_a = secure_api.with_key((await key_store.create("apq-a", "read")).secret)
    api_b = secure_api.with_key((await key_store.create("apq-b", "read")).secret)
    digest = sha256(COUNT)
    assert (await post(api_a, apq(COUNT, digest)))[1]["data"]
    assert (await post(api_a, apq(None, digest)))[1]["data"]
    assert code_of((await post(api_b, apq(None, digest)))[1]) == "PERSISTED_QUERY_NOT_FOUND"


def test_the_apq_cache_is_bounded_per_namespace() -> None:
    documents = PersistedDocuments({}, trusted_only=False, apq_cache_size=2)
    queries = [f"{{ a{i}: __typename }}" for i in range(3)]
    for query in queries:
        documents.resolve("ns", query, apq(query, sha256(query))["extensions"])
    assert documents.registered_count("ns") == 2
    for query, kept in zip(queries, (False, True, True), strict=True):
        extensions = apq(None, sha256(query))["extensions"]
        if kept:
            assert documents.resolve("ns", None, extensions) == query
        else:
            with pytest.raises(Exception, match="PersistedQueryNotFound"):
                documents.resolve("ns", None, extensions)
    assert documents.registered_count("other") == 0


# --- trusted documents ------------------------------------------------------------------------


@pytest.fixture
def manifest(scratch_dir: Path) -> Path:
    """A manifest as GraphQL Code Generator's client preset writes it."""
    path = scratch_dir / "persisted-documents.json"
    path.write_text(json.dumps({sha256(COUNT): COUNT, sha256(ADD): ADD}))
    return path


@pytest_asyncio.fixture
async def trusted_only(
    settings: Settings, manifest: Path, db: Database, caplog: pytest.LogCaptureFixture
) -> AsyncIterator[LiveServer]:
    await truncate_all(db)
    caplog.set_level(logging.INFO, logger="gql_memory.api.persisted")
    changed = settings.with_overrides(trusted_documents=manifest, trusted_documents_only=True)
    async with serving(changed) as server:
        yield server


async def test_trusted_only_serves_manifest_documents_by_id(
    trusted_only: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    startup = caplog.get_records("setup")
    assert any("trusted-only mode is ON" in r.getMessage() for r in startup)
    status, body = await post(trusted_only, {"documentId": f"sha256:{sha256(COUNT)}"})
    assert status == 200 and body == {
        "data": {"stats": {"workingMemory": 0}},
        "extensions": body["extensions"],
    }
    status, body = await post(
        trusted_only, {"documentId": f"sha256:{sha256(ADD)}", "variables": {"c": "x"}}
    )
    assert body["data"]["addWorkingMemory"]["addedId"]
    response = await trusted_only.client.get(
        "/graphql", params={"documentId": f"sha256:{sha256(COUNT)}"}
    )
    assert response.status_code == 200
    assert response.json()["data"] == {"stats": {"workingMemory": 1}}
    # a manifest document sent as its text is the same document
    assert (await post(trusted_only, {"query": COUNT}))[1]["data"]


async def test_trusted_only_refuses_ad_hoc_documents(trusted_only: LiveServer) -> None:
    status, body = await post(trusted_only, {"query": AD_HOC})
    assert code_of(body) == "PERSISTED_QUERY_REQUIRED" and body["data"] is None
    assert "GQL_MEMORY_TRUSTED_DOCUMENTS_ONLY" in body["errors"][0]["message"]
    status, body = await post(
        trusted_only, {"query": AD_HOC}, Accept="application/graphql-response+json"
    )
    assert status == 400 and "data" not in body


async def test_trusted_only_refuses_apq_registration(trusted_only: LiveServer) -> None:
    digest = sha256(AD_HOC)
    status, body = await post(trusted_only, apq(AD_HOC, digest))
    assert code_of(body) == "PERSISTED_QUERY_REQUIRED"
    assert "cannot be registered" in body["errors"][0]["message"]
    assert code_of((await post(trusted_only, apq(None, digest)))[1]) == (
        "PERSISTED_QUERY_NOT_FOUND"
    )
    # the manifest's own documents answer to their hash as APQ
    assert (await post(trusted_only, apq(None, sha256(COUNT))))[1]["data"]


async def test_an_unknown_document_id_is_not_found(trusted_only: LiveServer) -> None:
    status, body = await post(trusted_only, {"documentId": f"sha256:{sha256('{ x }')}"})
    assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND"
    status, body = await post(
        trusted_only, {"documentId": f"sha256:{sha256(COUNT)}", "query": AD_HOC}
    )
    assert code_of(body) == "BAD_USER_INPUT"


async def test_trusted_documents_without_trusted_only_serve_both(
    settings: Settings, manifest: Path, db: Database
) -> None:
    await truncate_all(db)
    async with serving(settings.with_overrides(trusted_documents=manifest)) as server:
        assert (await post(server, {"documentId": sha256(COUNT)}))[1]["data"]
        assert (await post(server, {"query": AD_HOC}))[1]["data"]


def test_a_manifest_entry_whose_digest_does_not_match_stops_startup(scratch_dir: Path) -> None:
    path = scratch_dir / "bad.json"
    path.write_text(json.dumps({sha256("{ a }"): "{ b }"}))
    with pytest.raises(ConfigurationError, match="not the SHA-256"):
        PersistedDocuments.for_settings(Settings(trusted_documents=path))
    with pytest.raises(ConfigurationError, match="needs a manifest"):
        PersistedDocuments.for_settings(Settings(trusted_documents_only=True))
