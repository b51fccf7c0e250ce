"""Structured JSON logs with request ids; no API key or bearer token ever reaches a log line."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from gql_memory.keys import ApiKeyStore, generate_secret
from gql_memory.server.logs import JsonFormatter, RedactingFormatter, redact
from tests.conftest import LiveServer


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    log_record = logging.LogRecord(
        "gql_memory.test", logging.INFO, __file__, 1, message, args, None
    )
    log_record.__dict__.update(extra)
    return log_record


def test_json_lines_carry_extra_fields() -> None:
    line = JsonFormatter().format(
        record("POST %s %d", "/graphql", 200, request_id="r1", status=200)
    )
    assert "\n" not in line
    payload = json.loads(line)
    assert payload["msg"] == "POST /graphql 200"
    assert (payload["request_id"], payload["status"], payload["level"]) == ("r1", 200, "INFO")
    assert payload["ts"].endswith("+00:00")


def test_lone_surrogates_do_not_break_the_log_stream() -> None:
    line = JsonFormatter().format(record("bad input %s", "\ud800"))
    line.encode("utf-8")  # writable to any UTF-8 stream


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer {key}",
        "authorization={key}",
        "{{'authorization': 'Bearer {key}'}}",
        "key was {key}.",
        "bearer abc.def-ghi",
    ],
)
def test_keys_and_bearer_tokens_are_redacted(text: str) -> None:
    key = generate_secret()
    redacted = redact(text.format(key=key))
    assert key not in redacted and "abc.def-ghi" not in redacted
    assert "[REDACTED]" in redacted


def test_tracebacks_and_extras_are_redacted_too() -> None:
    key = generate_secret()
    try:
        raise ValueError(f"could not use {key}")
    except ValueError:
        failing = record("failed", header=f"Bearer {key}")
        failing.exc_info = sys.exc_info()
    for formatter in (JsonFormatter(), RedactingFormatter()):
        assert key not in formatter.format(failing)


async def test_requests_are_logged_once_as_json_without_secrets(
    secure_api: LiveServer, key_store: ApiKeyStore, caplog: pytest.LogCaptureFixture
) -> None:
    created = await key_store.create("tenant-a", "read")
    revoked = await key_store.create("tenant-a", "read")
    await key_store.revoke(revoked.key.id)
    unknown = generate_secret()
    with caplog.at_level(logging.DEBUG):
        for key in (created.secret, revoked.secret, unknown, "not-even-a-key"):
            api = secure_api.with_key(key)
            await api.graphql("query Count { stats { sessions } }")
            await api.graphql("mutation Add { clearWorkingMemory }")
            await api.graphql("{ nonsense }")
        await secure_api.client.post(
            "/graphql", content=b"x", headers={"Authorization": f"Bearer {unknown}"}
        )
    formatter = JsonFormatter()
    lines = [formatter.format(r) for r in caplog.records]
    for secret in (created.secret, revoked.secret, unknown, "not-even-a-key"):
        assert not [line for line in lines if secret in line], secret
    access = [json.loads(line) for line in lines if '"gql_memory.access"' in line]
    assert len(access) == 13
    first = access[0]
    assert first["operations"] == ["query Count"] and first["status"] == 200
    assert first["namespace"] == "tenant-a" and first["key_id"] == created.key.id
    assert first["request_id"] and first["duration_ms"] >= 0
    assert access[1]["error_codes"] == ["FORBIDDEN"] and access[1]["status"] == 403
    assert access[3]["error_codes"] == ["UNAUTHENTICATED"] and access[3]["namespace"] is None
