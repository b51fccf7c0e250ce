"""Structured JSON logs with request ids; no API key or bearer token ever reaches a log line."""

from __future__ import annotations

import io
import json
import logging
import re
import sys

import pytest
from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.keys import ApiKeyStore, generate_secret
from gql_memory.server.logs import (
    JsonFormatter,
    MigrationSteps,
    RedactingFormatter,
    TerminalFormatter,
    above_progress,
    log_config,
    redact,
    resolved_format,
    terminal_handler,
)
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


# Distinctive text that appears nowhere in the code: any log line holding it leaked it.
MARKER = "zq7-tenant-marker"
# Four numbers in a row, as in a vector's repr or pgvector literal
VECTOR = re.compile(r"(?:-?\d+\.\d+(?:e-?\d+)?,\s?){3}-?\d+\.\d+")
EXTREMES = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59.999999-14:00")
SEARCHES = (
    "query($q: String!, $at: DateTime) { search(query: $q, asOf: $at) { id } }",
    "query($q: String!, $at: DateTime) { search(query: $q, since: $at, layers: [RAW]) { id } }",
    "query($q: String!, $at: DateTime) { search(query: $q, until: $at) { id } }",
    "query($q: String!, $at: DateTime) { context(query: $q, asOf: $at) { totalTokens } }",
    "query($q: String!, $at: DateTime) { insightSearch(query: $q, asOf: $at) { score } }",
)
ADD_INSIGHT = "mutation($c: String!) { addInsight(input: {content: $c}) { id } }"


async def test_no_tenant_text_or_vector_reaches_the_log(
    api: LiveServer, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests carrying marked text, extreme instants, and a statement that fails inside
    PostgreSQL with the marked text and its vector as parameters: the log of all of it, in
    either format, holds neither."""
    with caplog.at_level(logging.DEBUG):
        await api.data(
            'mutation($c: String!) { storeRawDialogue(input: {sessionId: "s", speaker: "u", '
            "content: $c}) { id } }",
            {"c": f"{MARKER} stored turn"},
        )
        await api.data(ADD_INSIGHT, {"c": f"{MARKER} insight"})
        for document in SEARCHES:
            for moment in EXTREMES:
                await api.graphql(document, {"q": f"{MARKER} query", "at": moment})
        async with db.write() as conn:
            await conn.execute(text("ALTER TABLE insights RENAME TO insights_gone"))
        try:
            failed = await api.error(ADD_INSIGHT, {"c": f"{MARKER} lost insight"})
        finally:
            async with db.write() as conn:
                await conn.execute(text("ALTER TABLE insights_gone RENAME TO insights"))
    assert failed["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    logged = [r for r in caplog.records if r.exc_info]
    assert logged, "the failed statement was logged with its traceback"
    for formatter in (JsonFormatter(), RedactingFormatter()):
        for log_record in caplog.records:
            line = formatter.format(log_record)
            assert MARKER not in line, line
            assert not VECTOR.search(line), line


FORGED = "2026-01-01 00:00:00,000 WARNING gql_memory.keys: API key 7 revoked"


async def test_a_text_log_line_cannot_be_forged_with_a_newline(
    api: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    session = f"s\n{FORGED}\r\x1b[2K\u2028"
    with caplog.at_level(logging.INFO):
        await api.data(
            'mutation($s: String!) { storeRawDialogue(input: {sessionId: $s, speaker: "u", '
            'content: "c"}) { id } }',
            {"s": session},
        )
    mentioning = [r for r in caplog.records if "API key 7 revoked" in r.getMessage()]
    assert mentioning, "the session id is logged"
    formatter = RedactingFormatter()
    for log_record in mentioning:
        line = formatter.format(log_record)
        assert line.splitlines() == [line], line
        assert "\x1b" not in line and "\\n2026-01-01" in line


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        (
            f"invalid input for query argument $3: '{MARKER} (a) b' (expected str, got list)",
            "query argument $3: [value hidden] (expected str, got list)",
        ),
        (f"[SQL: SELECT 1]\n[parameters: ('{MARKER}', '[0.1,0.2]')]", "[SQL: SELECT 1]"),
        (f"duplicate key\nDETAIL:  Key (name)=({MARKER}) already exists.", "duplicate key"),
        (f'invalid input syntax for type integer: "{MARKER}"', "type integer: [value hidden]"),
    ],
)
def test_values_quoted_by_the_driver_or_postgresql_are_hidden(message: str, kept: str) -> None:
    for formatter in (JsonFormatter(), RedactingFormatter()):
        try:
            raise RuntimeError(message)
        except RuntimeError:
            failing = record("statement failed: %s", message)
            failing.exc_info = sys.exc_info()
        line = formatter.format(failing)
        assert MARKER not in line and kept in line.replace("\\n", "\n")


# --- on a terminal, and beside a progress bar ------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_readable_lines_on_a_terminal_and_json_elsewhere() -> None:
    assert resolved_format("auto", Terminal()) == "terminal"
    assert resolved_format("auto", io.StringIO()) == "json"
    assert resolved_format("json", Terminal()) == "json"  # the setting wins either way
    assert resolved_format("text", io.StringIO()) == "text"
    handler = log_config("INFO", "json")["handlers"]["default"]
    assert handler["class"] == "logging.StreamHandler"


def test_a_migration_step_is_one_line_with_its_title() -> None:
    step = record(
        "Running upgrade %s -> %s, %s",
        "0005",
        "0006",
        "Record how vectors were embedded; the lexical\nembedder is now 'hash'. More.\n\nBody",
    )
    assert MigrationSteps().filter(step)
    assert step.getMessage() == (
        "migrating to 0006: Record how vectors were embedded; the lexical embedder is now 'hash'"
    )
    assert not MigrationSteps().filter(record("Context impl PostgresqlImpl."))
    assert not MigrationSteps().filter(record("Will assume transactional DDL."))


def test_terminal_lines_are_redacted_and_on_one_line() -> None:
    secret = "gqlm_" + "A" * 30
    line = TerminalFormatter().format(record("key %s\nforged line", secret))
    assert secret not in line and "\n" not in line
    access = record(
        "POST /graphql 200",
        operations=["mutation Add\nforged"],
        error_codes=["BAD_USER_INPUT"],
        duration_ms=3.25,
    )
    line = TerminalFormatter().format(access)
    assert line == "POST /graphql 200  mutation Add\\nforged  BAD_USER_INPUT  3.25 ms"


@pytest.mark.parametrize("kind", ["terminal", "plain"])
def test_log_lines_are_printed_above_a_progress_bar(kind: str) -> None:
    """`gql-memory import`: a log line never lands inside the bar's line."""
    from rich.console import Console
    from rich.progress import Progress

    shown = io.StringIO()
    handler = terminal_handler() if kind == "terminal" else logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalFormatter() if kind == "terminal" else RedactingFormatter())
    before = getattr(handler, "console", None) or getattr(handler, "stream", None)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        console = Console(file=shown, force_terminal=True, width=100)
        with Progress(console=console) as bar, above_progress(bar.console):
            task = bar.add_task("importing transcript.jsonl", total=2)
            bar.update(task, completed=1)
            logging.getLogger("gql_memory.test").warning("between two batches")
            bar.update(task, completed=2)
    finally:
        root.removeHandler(handler)
    # the handler is as it was after the bar
    assert (getattr(handler, "console", None) or getattr(handler, "stream", None)) is before
    lines = [ANSI.sub("", line).strip() for line in re.split(r"[\r\n]", shown.getvalue())]
    logged = [line for line in lines if "between two batches" in line]
    assert logged, shown.getvalue()
    assert all("importing" not in line for line in logged), logged


def test_a_handler_on_a_closed_stream_does_not_stop_the_progress_bar() -> None:
    """A finished in-process CLI run can leave a root handler on its closed output: the bar
    of the next import still draws (that handler is left as it is)."""
    from rich.console import Console

    closed = io.StringIO()
    stale = logging.StreamHandler(closed)
    closed.close()
    root = logging.getLogger()
    root.addHandler(stale)
    try:
        with above_progress(Console(file=io.StringIO())):
            pass
        assert stale.stream is closed
    finally:
        root.removeHandler(stale)
