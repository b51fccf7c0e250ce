"""API keys over real HTTP and websockets: who may call, in which namespace, with which scopes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpx_ws import WebSocketDisconnect, aconnect_ws

from gql_memory.keys import ApiKeyStore
from tests.conftest import KEY_CACHE_TTL_S, LiveServer
from tests.live import wait_for_subscriptions

ADD = 'mutation { addWorkingMemory(input: {content: "hello", sessionId: "s"}) { addedId } }'
COUNT = "{ stats { workingMemory } }"


async def new_key(store: ApiKeyStore, scopes: str, namespace: str = "tenant-a") -> str:
    return (await store.create(namespace, scopes)).secret


async def post(api: LiveServer, query: str, headers: dict[str, str] | None = None) -> Any:
    return await api.client.post(
        "/graphql", json={"query": query}, headers=headers if headers is not None else api.headers
    )


# --- auth required ----------------------------------------------------------------------------


async def test_missing_key_is_unauthenticated_with_401(secure_api: LiveServer) -> None:
    response = await post(secure_api, COUNT)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["data"] is None
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert "Authorization: Bearer" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    "header",
    [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer gqlm_not-a-real-key-but-long-enough-to-look-like-one-000",
        "Bearer nonsense",
        "gqlm_missing-the-bearer-word-aaaaaaaaaaaaaaaaaaaaaaaaaaa",
    ],
)
async def test_malformed_or_unknown_keys_are_unauthenticated(
    secure_api: LiveServer, header: str
) -> None:
    response = await post(secure_api, COUNT, {"Authorization": header})
    assert response.status_code == 401
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_unauthenticated_caller_learns_nothing_about_the_schema(
    secure_api: LiveServer,
) -> None:
    for query in ("{ nonsense }", "{ __schema { types { name } } }", "{ workingMemory { id "):
        body = (await post(secure_api, query)).json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["UNAUTHENTICATED"], body


async def test_valid_key_reads_and_writes_its_own_namespace(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    api = secure_api.with_key(await new_key(key_store, "read,write"))
    await api.data(ADD)
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 1
    other = secure_api.with_key(await new_key(key_store, "read,write", namespace="tenant-b"))
    assert (await other.data(COUNT))["stats"]["workingMemory"] == 0


async def test_get_queries_accept_the_key_header(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = await new_key(key_store, "read")
    response = await secure_api.client.get(
        "/graphql", params={"query": COUNT}, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200 and response.json()["data"]["stats"]["workingMemory"] == 0


async def test_read_only_key_calling_a_mutation_is_forbidden_and_writes_nothing(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    api = secure_api.with_key(await new_key(key_store, "read"))
    response = await post(api, ADD)
    assert response.status_code == 403
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "FORBIDDEN"
    assert "'write' scope" in error["message"]
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 0


async def test_write_only_key_cannot_read(secure_api: LiveServer, key_store: ApiKeyStore) -> None:
    api = secure_api.with_key(await new_key(key_store, "write"))
    await api.data(ADD)
    error = await api.error(COUNT)
    assert error["extensions"]["code"] == "FORBIDDEN"


async def test_admin_scope_implies_read_and_write(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    api = secure_api.with_key(await new_key(key_store, "admin"))
    await api.data(ADD)
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 1


async def test_revoked_key_is_refused_within_the_cache_ttl(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    created = await key_store.create("tenant-a", "read")
    api = secure_api.with_key(created.secret)
    await api.data(COUNT)  # verified and cached
    await key_store.revoke(created.key.id)
    await asyncio.sleep(KEY_CACHE_TTL_S + 0.2)
    error = await api.error(COUNT)
    assert (error["message"], error["extensions"]["code"]) == (
        "Invalid or revoked API key",
        "UNAUTHENTICATED",
    )


# --- auth optional (a loopback server without GQL_MEMORY_AUTH) --------------------------------


async def test_optional_auth_without_key_is_the_default_namespace(
    api: LiveServer, key_store: ApiKeyStore
) -> None:
    await api.data(ADD)
    keyed = api.with_key(await new_key(key_store, "read"))
    assert (await keyed.data(COUNT))["stats"]["workingMemory"] == 0
    assert (await api.data(COUNT))["stats"]["workingMemory"] == 1


async def test_optional_auth_still_refuses_an_invalid_or_revoked_key(
    api: LiveServer, key_store: ApiKeyStore
) -> None:
    created = await key_store.create("tenant-a", "read,write")
    await key_store.revoke(created.key.id)
    response = await post(api, COUNT, {"Authorization": f"Bearer {created.secret}"})
    assert response.status_code == 401  # never silently downgraded to the default namespace


async def test_optional_auth_refuses_anonymous_callers_with_a_foreign_host(
    api: LiveServer, key_store: ApiKeyStore
) -> None:
    """DNS rebinding: a web page reaching the loopback server carries its own Host name."""
    response = await api.client.post(
        "/graphql", json={"query": COUNT}, headers={"Host": "attacker.example:8000"}
    )
    assert response.status_code == 401
    assert "loopback" in response.json()["errors"][0]["message"]
    key = await new_key(key_store, "read")
    keyed = await api.client.post(
        "/graphql",
        json={"query": COUNT},
        headers={"Host": "memory.example.com", "Authorization": f"Bearer {key}"},
    )
    assert keyed.status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "X-Forwarded-For",
        "Forwarded",
        "X-Real-IP",
        "X-Forwarded-Host",
        "X-Forwarded-Proto",
        "X-Client-IP",
        "True-Client-IP",
        "CF-Connecting-IP",
        "Via",
    ],
)
async def test_optional_auth_refuses_anonymous_callers_through_a_proxy(
    api: LiveServer, key_store: ApiKeyStore, header: str
) -> None:
    """nginx's default proxy_pass to 127.0.0.1 sends a loopback Host for every client."""
    response = await api.client.post(
        "/graphql", json={"query": COUNT}, headers={"Host": "127.0.0.1:8000", header: "x"}
    )
    assert response.status_code == 401
    assert "no proxy" in response.json()["errors"][0]["message"]
    key = await new_key(key_store, "read")
    keyed = await post(api, COUNT, {header: "203.0.113.7", "Authorization": f"Bearer {key}"})
    assert keyed.status_code == 200


# --- websockets (graphql-transport-ws) -------------------------------------------------------


async def ws_exchange(
    server: LiveServer, init_payload: dict[str, Any] | None, query: str | None = None
) -> list[dict[str, Any]]:
    """connection_init (+ one operation): the messages received until complete, error or
    close (a close is recorded as ``{"type": "closed", "code": ...}``)."""
    received: list[dict[str, Any]] = []
    async with aconnect_ws(
        f"{server.base_url}/graphql", server.client, subprotocols=["graphql-transport-ws"]
    ) as ws:
        init: dict[str, Any] = {"type": "connection_init"}
        if init_payload is not None:
            init["payload"] = init_payload
        await ws.send_json(init)
        try:
            received.append(await asyncio.wait_for(ws.receive_json(), 30))
            if query is not None and received[-1]["type"] == "connection_ack":
                await ws.send_json({"id": "1", "type": "subscribe", "payload": {"query": query}})
                while received[-1]["type"] not in ("complete", "error"):
                    received.append(await asyncio.wait_for(ws.receive_json(), 30))
        except WebSocketDisconnect as closed:
            received.append({"type": "closed", "code": closed.code})
    return received


async def test_websocket_takes_the_key_from_connection_init(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = await new_key(key_store, "read,write")
    await secure_api.with_key(key).data(ADD)
    messages = await ws_exchange(secure_api, {"Authorization": f"Bearer {key}"}, COUNT)
    assert messages[0]["type"] == "connection_ack"
    assert messages[1]["payload"]["data"] == {"stats": {"workingMemory": 1}}
    messages = await ws_exchange(secure_api, {"apiKey": key}, COUNT)
    assert messages[1]["payload"]["data"] == {"stats": {"workingMemory": 1}}


@pytest.mark.parametrize(
    "payload", [None, {}, {"Authorization": "Bearer gqlm_unknown-key-aaaaaaaaaaaaaaaaaaaaaaaaa"}]
)
async def test_websocket_without_a_valid_key_is_closed(
    secure_api: LiveServer, payload: dict[str, Any] | None
) -> None:
    messages = await ws_exchange(secure_api, payload, COUNT)
    assert messages == [{"type": "closed", "code": 4403}]


async def test_websocket_mutation_needs_the_write_scope(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = await new_key(key_store, "read")
    messages = await ws_exchange(secure_api, {"Authorization": f"Bearer {key}"}, ADD)
    refusal = messages[1]
    assert refusal["type"] == "error", messages
    assert refusal["payload"][0]["extensions"]["code"] == "FORBIDDEN"
    assert refusal["payload"][0]["extensions"]["requestId"]


async def test_websocket_errors_carry_codes_like_http(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    key = await new_key(key_store, "read")
    query = '{ workingMemoryItem(id: "not-a-number") { id } }'
    messages = await ws_exchange(secure_api, {"apiKey": key}, query)
    error = messages[1]["payload"]["errors"][0]
    assert (error["message"], error["extensions"]["code"]) == (
        "id must be a numeric id",
        "BAD_USER_INPUT",
    )


async def test_revoking_a_key_closes_its_open_subscriptions_before_any_later_write(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    """Issue 11: a subscription opened before `keys revoke` kept delivering for seconds. Now
    the revocation reaches every server through LISTEN ahead of any later write."""
    reader = await key_store.create("tenant-a", "read")
    writer = await new_key(key_store, "read,write")
    messages: list[dict[str, Any]] = []
    code = None
    async with aconnect_ws(
        f"{secure_api.base_url}/graphql", secure_api.client, subprotocols=["graphql-transport-ws"]
    ) as ws:
        await ws.send_json({"type": "connection_init", "payload": {"apiKey": reader.secret}})
        assert (await asyncio.wait_for(ws.receive_json(), 30))["type"] == "connection_ack"
        await ws.send_json(
            {"id": "1", "type": "subscribe", "payload": {"query": "subscription { memoryEvents "
             "{ kind itemId } }"}}
        )  # fmt: skip
        await wait_for_subscriptions(secure_api.client, secure_api.base_url, "memoryEvents")
        await secure_api.with_key(writer).data(ADD)  # before: delivered
        messages.append(await asyncio.wait_for(ws.receive_json(), 30))
        await key_store.revoke(reader.key.id)
        for _ in range(3):  # after: never delivered
            await secure_api.with_key(writer).data(ADD)
        try:
            while True:
                messages.append(await asyncio.wait_for(ws.receive_json(), 30))
        except WebSocketDisconnect as closed:
            code = closed.code
    assert code == 4403
    delivered = [m for m in messages if m["type"] == "next" and m["payload"].get("data")]
    assert len(delivered) == 1 and delivered[0]["payload"]["data"]["memoryEvents"]["kind"] == (
        "ADDED"
    )


async def test_revoking_a_key_reaches_an_open_websocket(
    secure_api: LiveServer, key_store: ApiKeyStore
) -> None:
    created = await key_store.create("tenant-a", "read")
    async with aconnect_ws(
        f"{secure_api.base_url}/graphql", secure_api.client, subprotocols=["graphql-transport-ws"]
    ) as ws:
        await ws.send_json({"type": "connection_init", "payload": {"apiKey": created.secret}})
        assert (await asyncio.wait_for(ws.receive_json(), 30))["type"] == "connection_ack"
        answers = []
        for operation in ("1", "2"):
            await ws.send_json({"id": operation, "type": "subscribe", "payload": {"query": COUNT}})
            answers.append(await asyncio.wait_for(ws.receive_json(), 30))
            if operation == "1":
                await asyncio.wait_for(ws.receive_json(), 30)  # complete
                await key_store.revoke(created.key.id)
                await asyncio.sleep(KEY_CACHE_TTL_S + 0.2)
    assert answers[0]["payload"]["data"] == {"stats": {"workingMemory": 0}}
    refused = answers[1]["payload"]
    assert refused[0]["extensions"]["code"] == "UNAUTHENTICATED", answers[1]
