"""The GraphQL over HTTP spec's media types: application/graphql-response+json negotiated from
Accept (request errors are 4xx without data), application/json unchanged; graphql-http's audit
passes with no warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gql_memory.keys import ApiKeyStore
from gql_memory.server.media_types import negotiate
from tests.conftest import LiveServer
from tests.node_clients import run_script

GRAPHQL_RESPONSE = "application/graphql-response+json"
APOLLO_ACCEPT = "application/graphql-response+json,application/json;q=0.9"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "application/json"),
        ("", "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (APOLLO_ACCEPT, GRAPHQL_RESPONSE),
        ("application/json, application/graphql-response+json", GRAPHQL_RESPONSE),
        ("application/json;q=1, application/graphql-response+json;q=0.5", "application/json"),
        ("application/graphql-response+json;q=0", "application/json"),
        ("text/html", "application/json"),
    ],
)
def test_accept_negotiates_the_response_type(accept: str | None, expected: str) -> None:
    assert negotiate(accept) == expected


async def post(api: LiveServer, body: Any, accept: str | None, **headers: str) -> httpx.Response:
    if accept is not None:
        headers["Accept"] = accept
    return await api.client.post("/graphql", json=body, headers=headers)


REQUEST_ERRORS = {
    "parse": {"query": "{"},
    "validation": {"query": "{ noSuchField }"},
    "variables": {"query": "query($id: ID!) { workingMemoryItem(id: $id) { id } }"},
    "limits": {"query": "{ " + " ".join(f"a{i}: __typename" for i in range(40)) + " }"},
}


@pytest.mark.parametrize("kind", sorted(REQUEST_ERRORS))
async def test_request_errors_are_400_without_data_under_the_spec_type(
    api: LiveServer, kind: str
) -> None:
    response = await post(api, REQUEST_ERRORS[kind], APOLLO_ACCEPT)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    body = response.json()
    assert "data" not in body, body
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


@pytest.mark.parametrize("accept", [None, "application/json", "*/*"])
@pytest.mark.parametrize("kind", sorted(REQUEST_ERRORS))
async def test_request_errors_stay_200_with_null_data_under_application_json(
    api: LiveServer, kind: str, accept: str | None
) -> None:
    response = await post(api, REQUEST_ERRORS[kind], accept)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["data"] is None and body["errors"], body


async def test_a_successful_operation_is_200_in_the_negotiated_type(api: LiveServer) -> None:
    response = await post(api, {"query": "{ stats { workingMemory } }"}, APOLLO_ACCEPT)
    assert response.status_code == 200
    assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE}; charset=utf-8"
    assert response.json()["data"] == {"stats": {"workingMemory": 0}}


async def test_a_field_error_keeps_its_data_and_200_under_the_spec_type(api: LiveServer) -> None:
    """An error in execution is not a request error: data stays (null where the field
    failed), status 200."""
    response = await post(
        api,
        {"query": 'mutation { accessWorkingMemory(id: "424242") { id } }'},
        GRAPHQL_RESPONSE,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "data" in body and body["errors"][0]["extensions"]["code"] == "NOT_FOUND"


async def test_malformed_json_is_400_without_data_under_the_spec_type(api: LiveServer) -> None:
    response = await api.client.post(
        "/graphql",
        content=b'{"query": ',
        headers={"Content-Type": "application/json", "Accept": GRAPHQL_RESPONSE},
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith(GRAPHQL_RESPONSE)
    assert "data" not in response.json()


async def test_refusals_keep_their_status_under_both_types(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    reader = await key_store.create("media", "read")
    mutation = {"query": 'mutation { clearWorkingMemory(sessionId: "s") }'}
    for accept, has_data in ((GRAPHQL_RESPONSE, False), ("application/json", True)):
        anonymous = await post(secure_api, {"query": "{ __typename }"}, accept)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert ("data" in anonymous.json()) is has_data
        forbidden = await post(
            secure_api, mutation, accept, Authorization=f"Bearer {reader.secret}"
        )
        assert forbidden.status_code == 403
        assert ("data" in forbidden.json()) is has_data


async def test_graphiql_asks_for_the_spec_type(api: LiveServer) -> None:
    page = await api.client.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert 'Accept: "application/graphql-response+json, application/json;q=0.9"' in page.text


async def test_graphql_http_audit_reports_no_warning_and_no_error(
    live: LiveServer, node_clients: Path
) -> None:
    """The GraphQL over HTTP spec's reference audit (graphql-http's auditServer), in Node,
    against the real server: every MUST and SHOULD holds."""
    results = await run_script(node_clients, "audit.mjs", f"{live.base_url}/graphql")
    failed = [r for r in results if r["status"] in ("warn", "error")]
    assert not failed, "\n".join(f"{r['id']} {r['name']}: {r['reason']}" for r in failed)
    assert sum(r["status"] == "ok" for r in results) >= 53
