"""/metrics over real HTTP: Prometheus text format, every gql_memory_* metric moves."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gql_memory.config import Settings
from gql_memory.keys import ApiKeyStore, generate_secret
from gql_memory.server.app import create_app
from tests.conftest import LiveServer, serving

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(api: LiveServer) -> Samples:
    response = await api.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def add(api: LiveServer, content: str, importance: float = 0.5) -> dict[str, object]:
    return await api.graphql(
        "mutation($c: String!, $i: Float!) { addWorkingMemory(input: {content: $c, "
        "importance: $i}) { addedId } }",
        {"c": content, "i": importance},
    )


async def test_requests_latency_and_errors_by_operation_and_code(api: LiveServer) -> None:
    before = await scrape(api)
    for i in range(3):
        await add(api, f"item {i}")
    await add(api, "too important", importance=2.0)  # BAD_USER_INPUT
    await api.data("query Dashboard { workingMemory { id } }")  # client name: not a label
    await api.graphql("{ noSuchField }")
    after = await scrape(api)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "gql_memory_graphql_requests_total"
    assert delta(requests, operation="addWorkingMemory", type="mutation") == 4
    assert delta(requests, operation="workingMemory", type="query") == 1
    assert delta(requests, operation="unknown", type="query") == 1
    assert not any(dict(labels).get("operation") == "Dashboard" for _, labels in after)
    latency = "gql_memory_graphql_request_duration_seconds_count"
    assert delta(latency, operation="addWorkingMemory", type="mutation") == 4
    errors = "gql_memory_graphql_errors_total"
    assert delta(errors, operation="addWorkingMemory", code="BAD_USER_INPUT") == 1
    assert delta(errors, operation="unknown", code="BAD_USER_INPUT") == 1
    assert all(name.startswith("gql_memory_") for name, _ in after)


async def test_evictions_embeddings_and_the_pool_are_measured(
    api: LiveServer, settings: Settings
) -> None:
    for i in range(settings.working_memory_capacity + 2):
        await add(api, f"item {i}")
    await api.data('mutation { addInsight(input: {content: "measured"}) { id } }')
    # Evictions are counted when their event comes back through LISTEN (asynchronously).
    async with asyncio.timeout(30):
        while (
            value(samples := await scrape(api), "gql_memory_evictions_total", reason="LRU_EVICTION")
            < 2
        ):
            await asyncio.sleep(0.02)
    assert value(samples, "gql_memory_evictions_total", reason="LRU_EVICTION") == 2
    assert value(samples, "gql_memory_events_published_total", kind="EVICTED") == 2
    assert value(samples, "gql_memory_events_published_total", kind="INSIGHT_ADDED") == 1
    assert value(samples, "gql_memory_embedding_requests_total", provider="hash", outcome="ok") >= 1
    assert value(samples, "gql_memory_embedding_texts_total", provider="hash") >= 1
    assert value(samples, "gql_memory_embedding_duration_seconds_count", provider="hash") >= 1
    assert value(samples, "gql_memory_db_pool_size") == settings.db_pool_size
    assert value(samples, "gql_memory_db_pool_max_overflow") == settings.db_max_overflow
    assert value(samples, "gql_memory_db_pool_checked_out") == 0  # nothing in flight
    assert value(samples, "gql_memory_event_listener_connected") == 1
    assert value(samples, "gql_memory_event_delivery_seconds_count") >= 13


@pytest.mark.parametrize("enabled", [True, False])
def test_metrics_can_be_switched_off(settings: Settings, enabled: bool) -> None:
    app = create_app(settings.with_overrides(metrics=enabled))
    paths = {getattr(route, "path", None) for route in app.routes}
    assert ("/metrics" in paths) is enabled


REMOTE = {"X-Forwarded-For": "203.0.113.9"}  # through a proxy: a client on another machine


def refused_code(response: httpx.Response) -> str:
    return response.json()["errors"][0]["extensions"]["code"]


async def test_metrics_need_an_admin_key_or_a_local_caller_when_keys_are_required(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    assert (await secure_api.client.get("/metrics")).status_code == 200  # from this machine
    for elsewhere in (REMOTE, {"Host": "metrics.example.com"}):
        refused = await secure_api.client.get("/metrics", headers=elsewhere)
        assert (refused.status_code, refused_code(refused)) == (401, "UNAUTHENTICATED")
        assert "gql_memory_" not in refused.text
    reader = (await key_store.create("tenant-a", "read,write")).secret
    admin = (await key_store.create("operations", "admin")).secret
    for key, status in ((reader, 403), (admin, 200), (generate_secret(), 401)):
        answered = await secure_api.client.get(
            "/metrics", headers={**REMOTE, "Authorization": f"Bearer {key}"}
        )
        assert answered.status_code == status, answered.text


async def test_metrics_without_a_key_follow_the_anonymous_rule_where_keys_are_optional(
    api: LiveServer,
) -> None:
    for elsewhere in (REMOTE, {"Host": "rebound.example.com"}):
        refused = await api.client.get("/metrics", headers=elsewhere)
        assert (refused.status_code, refused_code(refused)) == (401, "UNAUTHENTICATED")


async def test_public_metrics_answer_anyone(secure_settings: Settings) -> None:
    async with serving(secure_settings.with_overrides(metrics_public=True)) as server:
        answered = await server.client.get("/metrics", headers=REMOTE)
    assert answered.status_code == 200 and "gql_memory_" in answered.text
