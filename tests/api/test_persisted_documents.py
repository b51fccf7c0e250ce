"""Trusted documents (documentId, trusted-only mode) and Apollo's automatic persisted queries."""

from __future__ import annotations

import hashlib
import json
import logging
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from gql_memory.api.persisted import PersistedDocuments, registration_bytes
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


def register(documents: PersistedDocuments, namespace: str, query: str) -> None:
    """What a request with hash and document does to the cache when its operation is
    admitted: resolve before parsing, register once every check let it through."""
    extensions = apq(query, sha256(query))["extensions"]
    assert documents.resolve(namespace, query, extensions) == query
    documents.register(namespace, query, extensions)


def large_document(name: str, chars: int) -> str:
    """A valid query of ``chars`` characters, nearly all of them 4-byte ones (in a comment,
    which no token limit counts): Python holds it in about 4 bytes a character."""
    head = f"query {name} {{ stats {{ workingMemory }} }}\n#"
    return head + "\U0001f600" * (chars - len(head))


async def scrape(api: LiveServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = await api.client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


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
        register(documents, "ns", query)
    assert documents.registered_count("ns") == 2
    for query, kept in zip(queries, (False, True, True), strict=True):
        extensions = apq(None, sha256(query))["extensions"]
        if kept:
            assert documents.resolve("ns", None, extensions) == query
        else:
            with pytest.raises(Exception, match="PersistedQueryNotFound"):
                documents.resolve("ns", None, extensions)
    assert documents.registered_count("other") == 0


# --- APQ: only admitted operations register, within a byte bound ----------------------------

INVALID = (
    "{ stats { workingMemory ",  # does not parse
    "{ noSuchField }",  # does not validate
    "query Twice { stats { workingMemory } } query Twice { stats { rawDialogue } }",
    "{ stats { workingMemory(first: 1) } }",
)


async def test_documents_that_do_not_parse_or_validate_are_not_registered(api: LiveServer) -> None:
    """A batch of invalid documents sent with their hashes is refused, and none of them is
    registered: their hash alone is still not found."""
    large = large_document("Large", 64 * 1024).replace("workingMemory", "noSuchField", 1)
    invalid = [*INVALID, large]
    response = await api.client.post(
        "/graphql", json=[apq(query, sha256(query)) for query in invalid], headers=api.headers
    )
    assert response.status_code == 200
    assert [code_of(result) for result in response.json()] == ["BAD_USER_INPUT"] * len(invalid)
    for query in invalid:
        status, body = await post(api, apq(None, sha256(query)))
        assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND", query[:60]


@pytest_asyncio.fixture
async def guarded(secure_settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    """Keys required; one operation per key, then one per 100 s; a low cost limit."""
    await truncate_all(db)
    limits = {"rate_limit_per_s": 0.01, "rate_limit_burst": 1, "max_query_cost": 150}
    async with serving(secure_settings.with_overrides(**limits)) as server:
        yield server


async def test_a_rate_limited_request_registers_nothing(
    guarded: LiveServer, key_store: ApiKeyStore
) -> None:
    limited = guarded.with_key((await key_store.create("apq-rate", "read")).secret)
    other = guarded.with_key((await key_store.create("apq-rate", "read")).secret)
    assert (await post(limited, {"query": COUNT}))[1]["data"]  # the key's one operation
    digest = sha256(AD_HOC)
    status, body = await post(limited, apq(AD_HOC, digest))
    assert status == 429 and code_of(body) == "RATE_LIMITED"
    # another key of the namespace: the document was not registered
    assert code_of((await post(other, apq(None, digest)))[1]) == "PERSISTED_QUERY_NOT_FOUND"
    # an admitted request registers it
    assert (await post(other, apq(AD_HOC, digest)))[1]["data"]
    third = guarded.with_key((await key_store.create("apq-rate", "read")).secret)
    assert (await post(third, apq(None, digest)))[1]["data"] == {"stats": {"rawDialogue": 0}}


async def test_an_operation_over_the_cost_limit_registers_nothing(
    guarded: LiveServer, key_store: ApiKeyStore
) -> None:
    reader = guarded.with_key((await key_store.create("apq-cost", "read")).secret)
    costly = "{ nodes(first: 100) { edges { node { id } } } }"
    status, body = await post(reader, apq(costly, sha256(costly)))
    assert code_of(body) == "BAD_USER_INPUT" and "cost" in body["errors"][0]["message"]
    other = guarded.with_key((await key_store.create("apq-cost", "read")).secret)
    status, body = await post(other, apq(None, sha256(costly)))
    assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND"


async def test_a_mutation_refused_to_a_read_only_key_is_not_registered(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    reader = secure_api.with_key((await key_store.create("apq-scope", "read")).secret)
    writer = secure_api.with_key((await key_store.create("apq-scope", "read,write")).secret)
    digest = sha256(ADD)
    status, body = await post(reader, apq(ADD, digest, variables={"c": "x"}))
    assert status == 403 and code_of(body) == "FORBIDDEN"
    status, body = await post(writer, apq(None, digest, variables={"c": "x"}))
    assert code_of(body) == "PERSISTED_QUERY_NOT_FOUND"
    # the writer's own registration works, and the reader still cannot run it
    assert (await post(writer, apq(ADD, digest, variables={"c": "x"})))[1]["data"]
    assert (await post(writer, apq(None, digest, variables={"c": "y"})))[1]["data"]
    status, body = await post(reader, apq(None, digest, variables={"c": "z"}))
    assert status == 403 and code_of(body) == "FORBIDDEN"


DOCUMENT_CHARS = 256 * 1024  # GQL_MEMORY_MAX_DOCUMENT_CHARS: about 1 MiB in Python
MAX_BYTES_PER_NAMESPACE = 4 * 1024 * 1024


def digest_of(name: str, chars: int = DOCUMENT_CHARS) -> dict[str, Any]:
    """The extensions of a request that sends the hash of ``large_document`` alone."""
    return apq(None, sha256(large_document(name, chars)))["extensions"]


def test_a_thousand_large_registrations_stay_within_the_byte_bound() -> None:
    """1,000 registrations of the largest documents, 4-byte characters throughout (1 MiB
    each as Python holds them): the cache keeps the most recent ones that fit the byte bound,
    and the memory it still holds afterwards (traced) stays under the bound too."""
    documents = PersistedDocuments({}, False, 1000, MAX_BYTES_PER_NAMESPACE)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1000):
            register(documents, "ns", large_document(f"Q{i}", DOCUMENT_CHARS))
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    one = registration_bytes(sha256("x"), large_document("Q999", DOCUMENT_CHARS))
    assert one > 4 * DOCUMENT_CHARS  # a 4-byte character is charged 4 bytes
    kept = MAX_BYTES_PER_NAMESPACE // one
    assert documents.registered_count("ns") == kept == 3
    assert documents.registered_bytes("ns") == documents.registered_bytes() == kept * one
    assert kept * 4 * DOCUMENT_CHARS < growth <= MAX_BYTES_PER_NAMESPACE  # the 3 are held
    # least recently used first: a document just run survives the next registration
    assert documents.resolve("ns", None, digest_of("Q997")) is not None
    register(documents, "ns", large_document("Q1000", DOCUMENT_CHARS))
    for name in ("Q0", "Q500", "Q996", "Q998"):
        with pytest.raises(Exception, match="PersistedQueryNotFound"):
            documents.resolve("ns", None, digest_of(name))
    for name in ("Q997", "Q999", "Q1000"):
        assert documents.resolve("ns", None, digest_of(name)) == large_document(
            name, DOCUMENT_CHARS
        )


def test_registrations_of_all_namespaces_stay_within_the_total_byte_bound() -> None:
    """Many namespaces each within their own bound: the total bound drops the least recently
    used namespace's documents first."""
    documents = PersistedDocuments({}, False, 1000, MAX_BYTES_PER_NAMESPACE, 8 * 1024 * 1024)
    for i in range(100):
        register(documents, f"ns{i}", large_document(f"Q{i}", DOCUMENT_CHARS))
    assert documents.registered_bytes() <= 8 * 1024 * 1024
    kept = [i for i in range(100) if documents.registered_count(f"ns{i}")]
    assert kept == list(range(93, 100))
    assert sum(documents.registered_bytes(f"ns{i}") for i in kept) == documents.registered_bytes()


def test_a_document_larger_than_the_bound_runs_but_is_not_kept() -> None:
    documents = PersistedDocuments({}, False, 1000, 64 * 1024)
    register(documents, "ns", large_document("Small", 1024))
    register(documents, "ns", large_document("Huge", 32 * 1024))  # 128 KiB in Python
    assert documents.registered_count("ns") == 1
    with pytest.raises(Exception, match="PersistedQueryNotFound"):
        documents.resolve("ns", None, digest_of("Huge", 32 * 1024))


@pytest_asyncio.fixture
async def small_apq_cache(secure_settings: Settings, db: Database) -> AsyncIterator[LiveServer]:
    """Keys required; APQ bounded to about three 32 KiB documents per namespace, five in all."""
    await truncate_all(db)
    bounds = {"apq_max_bytes_per_namespace": 100 * 1024, "apq_max_bytes": 170 * 1024}
    async with serving(secure_settings.with_overrides(**bounds)) as server:
        yield server


async def test_registrations_over_http_are_bounded_in_bytes_and_measured(
    small_apq_cache: LiveServer, key_store: ApiKeyStore
) -> None:
    """Documents of 8 Ki 4-byte characters (32 KiB in Python): a namespace keeps the three
    most recently used, all namespaces five; /metrics shows the bytes and the evictions."""
    api_a = small_apq_cache.with_key((await key_store.create("apq-bytes-a", "read")).secret)
    api_b = small_apq_cache.with_key((await key_store.create("apq-bytes-b", "read")).secret)
    chars = 8 * 1024

    async def send(api: LiveServer, name: str, with_document: bool) -> dict[str, Any]:
        query = large_document(name, chars)
        return (await post(api, apq(query if with_document else None, sha256(query))))[1]

    for i in range(10):
        assert (await send(api_a, f"A{i}", True))["data"]
    assert (await send(api_a, "A7", False))["data"]  # run by hash: the most recently used
    assert (await send(api_a, "A10", True))["data"]  # drops A8, not A7
    samples = await scrape(small_apq_cache)
    evictions = "gql_memory_apq_evictions_total"
    assert samples[("gql_memory_apq_documents", frozenset())] == 3
    assert 3 * 32 * 1024 < samples[("gql_memory_apq_bytes", frozenset())] <= 100 * 1024
    assert samples[(evictions, frozenset({("reason", "namespace")}))] == 8
    for i in range(3):  # the sixth document is over the total: a's least recently used goes
        assert (await send(api_b, f"B{i}", True))["data"]
    samples = await scrape(small_apq_cache)
    assert samples[("gql_memory_apq_documents", frozenset())] == 5
    assert samples[("gql_memory_apq_bytes", frozenset())] <= 170 * 1024
    assert samples[(evictions, frozenset({("reason", "total")}))] == 1
    found = {
        name: "data" in body and body["data"] is not None
        for name, api in [(f"A{i}", api_a) for i in range(11)]
        + [(f"B{i}", api_b) for i in range(3)]
        for body in [await send(api, name, False)]
    }
    assert [name for name, ok in found.items() if ok] == ["A7", "A10", "B0", "B1", "B2"]


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
