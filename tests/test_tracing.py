"""OpenTelemetry tracing against a real OTLP/HTTP receiver on 127.0.0.1: `gql-memory serve`
and `gql-memory mcp` export GenAI memory spans (a search and its embedding call and
statements, as parent and children, under the caller's traceparent), never tenant content;
and tracing stays off without the OTEL_* variables or without the otel extra."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import requires
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.stdio import StdioServerParameters
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from packaging.requirements import Requirement

from tests.conftest import ROOT
from tests.mcp_server.conftest import mcp_client
from tests.processes import ServeProcess, wait_until

SECRET = "lapsang souchong"  # tenant content: it must reach no span
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
OTEL_PACKAGES = {"opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"}


@dataclass
class Received:
    span: Span
    service: str

    def attributes(self) -> dict[str, Any]:
        values = {}
        for kv in self.span.attributes:
            value = kv.value
            values[kv.key] = getattr(value, value.WhichOneof("value"))
        return values


@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf bodies."""

    url: str
    spans: list[Received] = field(default_factory=list)

    def named(self, name: str) -> list[Received]:
        return [r for r in self.spans if r.span.name == name]

    def children(self, parent: Received) -> list[Received]:
        return [r for r in self.spans if r.span.parent_span_id == parent.span.span_id]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    lock = threading.Lock()
    spans: list[Received] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
            with lock:
                for resource_spans in request.resource_spans:
                    service = next(
                        (
                            a.value.string_value
                            for a in resource_spans.resource.attributes
                            if a.key == "service.name"
                        ),
                        "",
                    )
                    for scope in resource_spans.scope_spans:
                        spans.extend(Received(s, service) for s in scope.spans)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200 if self.path == "/v1/traces" else 404)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}", spans)
    finally:
        server.shutdown()
        server.server_close()


def otel_env(receiver: Receiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "gql-memory-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export within 50 ms rather than 5 s
    }


def assert_no_content(receiver: Receiver) -> None:
    for received in receiver.spans:
        assert SECRET not in received.span.name
        for value in received.attributes().values():
            assert SECRET not in str(value), received.span.name


async def spans_arrive(receiver: Receiver, done: Any) -> None:
    async def arrived() -> bool:
        return bool(done())

    await wait_until(arrived, timeout=60, message=f"spans: {[r.span.name for r in receiver.spans]}")


async def test_a_search_over_http_is_one_span_with_its_embedding_and_statements(
    receiver: Receiver, tmp_path: Path, database_url: str
) -> None:
    serve = ServeProcess(
        tmp_path / "data", env={"DATABASE_URL": database_url, **otel_env(receiver)}
    ).start()
    try:
        async with httpx.AsyncClient(base_url=serve.base_url, timeout=30) as client:
            added = await client.post(
                "/graphql",
                json={
                    "query": "mutation Add($c: String!) "
                    "{ addInsight(input: {content: $c}) { id } }",
                    "variables": {"c": f"The user drinks {SECRET} tea"},
                },
            )
            assert "errors" not in added.json(), added.json()
            found = await client.post(
                "/graphql",
                json={
                    "query": "query Find($q: String!) { search(query: $q) { id } }",
                    "variables": {"q": SECRET},
                },
                headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},
            )
            assert found.json()["data"]["search"], found.json()

        def search_with_children() -> Received | None:
            for candidate in receiver.named("search_memory search"):
                names = {c.span.name for c in receiver.children(candidate)}
                if any(n.startswith("embeddings ") for n in names) and "SELECT" in names | {
                    n.split()[0] for n in names
                }:
                    return candidate
            return None

        await spans_arrive(receiver, search_with_children)
    finally:
        serve.stop()

    search = search_with_children()
    assert search is not None
    # a child of the caller's span, in the caller's trace
    assert search.span.trace_id.hex() == TRACE_ID
    assert search.span.parent_span_id.hex() == PARENT_ID
    assert search.span.kind == Span.SPAN_KIND_SERVER
    assert search.service == "gql-memory-under-test"
    attributes = search.attributes()
    assert attributes["gen_ai.operation.name"] == "search_memory"
    assert attributes["gen_ai.memory.store.id"] == "default"
    assert attributes["graphql.operation.type"] == "query"
    assert "gen_ai.memory.query.text" not in attributes  # content is opt-in

    children = receiver.children(search)
    [embedding] = [c for c in children if c.span.name.startswith("embeddings ")]
    assert embedding.span.kind == Span.SPAN_KIND_CLIENT
    assert embedding.attributes()["gen_ai.operation.name"] == "embeddings"
    assert embedding.attributes()["gen_ai.provider.name"] == "hash"
    statements = [c for c in children if c.attributes().get("db.system.name") == "postgresql"]
    assert statements and all(s.span.kind == Span.SPAN_KIND_CLIENT for s in statements)
    assert all("db.query.text" in s.attributes() for s in statements)

    [add] = receiver.named("create_memory addInsight")
    assert add.attributes()["gen_ai.operation.name"] == "create_memory"
    assert add.attributes()["gen_ai.memory.record.id"] == added.json()["data"]["addInsight"]["id"]
    assert add.span.trace_id != search.span.trace_id  # no traceparent: a trace of its own
    assert_no_content(receiver)


async def test_an_mcp_tool_call_is_a_span_over_the_library_calls_it_makes(
    receiver: Receiver, database_url: str
) -> None:
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gql_memory", "mcp", "--namespace", "agent-7"],
        env={
            "GQL_MEMORY_EMBEDDING_PROVIDER": "hash",
            "GQL_MEMORY_LOG_LEVEL": "WARNING",
            "DATABASE_URL": database_url,
            **otel_env(receiver),
        },
        cwd=str(ROOT),
    )
    async with mcp_client(parameters) as client:
        stored = await client.call_tool("compress_to_l2_insight", {"content": f"Likes {SECRET}"})
        assert not stored.is_error, stored.content
        created = await client.call_tool(
            "create_entities",
            {"entities": [{"name": "Ann", "entityType": "person", "observations": []}]},
        )
        assert not created.is_error, created.content
        found = await client.call_tool(
            "hybrid_search",
            {"query": SECRET},
            meta={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},  # MCP's trace context
        )
        assert not found.is_error, found.content

        def tool_with_children() -> Received | None:
            for tool in receiver.named("search_memory hybrid_search"):
                for call in receiver.children(tool):
                    if call.span.name == "search_memory search" and any(
                        c.span.name.startswith("embeddings ") for c in receiver.children(call)
                    ):
                        return tool
            return None

        await spans_arrive(receiver, tool_with_children)

    tool = tool_with_children()
    assert tool is not None
    # inside the MCP SDK's server span of the request
    [request] = [r for r in receiver.spans if r.span.span_id == tool.span.parent_span_id]
    assert request.span.name == "tools/call hybrid_search"
    assert request.span.kind == Span.SPAN_KIND_SERVER
    assert request.span.trace_id.hex() == TRACE_ID  # the caller's trace
    assert request.span.parent_span_id.hex() == PARENT_ID
    assert tool.span.kind == Span.SPAN_KIND_INTERNAL
    assert tool.attributes()["gen_ai.tool.name"] == "hybrid_search"
    assert tool.attributes()["gen_ai.memory.store.id"] == "agent-7"
    [add] = receiver.named("create_memory insights.add")
    assert add.attributes()["gen_ai.memory.record.id"] == str(stored.structured_content["id"])
    assert add.attributes()["gen_ai.memory.store.id"] == "agent-7"
    # the reference memory tools too: the tool, then the knowledge graph's call
    [entities] = receiver.named("create_memory create_entities")
    assert [c.span.name for c in receiver.children(entities)] == [
        "create_memory knowledge_graph.create_entities"
    ]
    assert_no_content(receiver)


async def test_an_unknown_tool_is_traced_as_unknown_never_by_the_name_sent(
    receiver: Receiver, database_url: str
) -> None:
    sent = "no_such_tool_" + "x" * 50_000  # any text of any length a client chooses
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gql_memory", "mcp"],
        env={
            "GQL_MEMORY_EMBEDDING_PROVIDER": "hash",
            "GQL_MEMORY_LOG_LEVEL": "WARNING",
            "DATABASE_URL": database_url,
            **otel_env(receiver),
        },
        cwd=str(ROOT),
    )
    async with mcp_client(parameters) as client:
        refused = await client.call_tool(sent, {})
        assert refused.is_error
        known = await client.call_tool("read_graph", {})
        assert not known.is_error, known.content

        def both_calls() -> bool:
            names = {r.span.name for r in receiver.spans}
            return {"tools/call unknown", "tools/call read_graph"} <= names

        await spans_arrive(receiver, both_calls)

    [request] = receiver.named("tools/call unknown")
    assert request.attributes()["gen_ai.tool.name"] == "unknown"
    [tool] = receiver.children(request)
    assert tool.span.name == "search_memory unknown"
    assert tool.attributes()["gen_ai.tool.name"] == "unknown"
    # a tool of the server keeps its name
    [request] = receiver.named("tools/call read_graph")
    assert request.attributes()["gen_ai.tool.name"] == "read_graph"
    for received in receiver.spans:
        assert "no_such_tool" not in received.span.name
        assert "no_such_tool" not in received.span.status.message
        for value in received.attributes().values():
            assert "no_such_tool" not in str(value), received.span.name


def test_tracing_is_off_without_the_otel_variables() -> None:
    code = (
        "from gql_memory.config import Settings; from gql_memory.tracing import tracing_for; "
        "import sys; print(tracing_for(Settings()), 'opentelemetry.sdk' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "False"]


def test_the_base_install_requires_none_of_the_otel_extra() -> None:
    requirements = [Requirement(line) for line in requires("gql-memory") or []]
    base = {r.name for r in requirements if r.marker is None}
    assert not base & OTEL_PACKAGES
    otel = [r for r in requirements if r.marker and r.marker.evaluate({"extra": "otel"})]
    assert {r.name for r in otel} == OTEL_PACKAGES
    assert all(any(s.operator == ">=" for s in r.specifier) for r in otel)


LIBRARY_SCRIPT = """
import sys
from gql_memory import MemoryStore

with MemoryStore(sys.argv[1], namespace=sys.argv[3]) as store:
    insight = store.insights.add("The user drinks " + sys.argv[2])
    hits = store.search(sys.argv[2], session_id=None)
    assert [h.id for h in hits] == [insight.id], hits
    print(insight.id)
"""


def run_library(receiver: Receiver, database_url: str, namespace: str, **settings: str) -> str:
    """LIBRARY_SCRIPT in ``namespace``, in a process of its own exporting to ``receiver``;
    its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GQL_MEMORY_"))}
    env |= {"GQL_MEMORY_EMBEDDING_PROVIDER": "hash", **otel_env(receiver), **settings}
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_SCRIPT, database_url, SECRET, namespace],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_synchronous_library_traces_each_call(
    receiver: Receiver, database_url: str
) -> None:
    stdout = run_library(receiver, database_url, "lib")
    # the process flushed its spans before it exited (the SDK's shutdown at exit)
    [add] = receiver.named("create_memory insights.add")
    assert add.attributes()["gen_ai.memory.record.id"] == stdout.strip()
    assert add.attributes()["gen_ai.memory.store.id"] == "lib"
    [search] = receiver.named("search_memory search")
    assert search.span.kind == Span.SPAN_KIND_INTERNAL
    assert any(c.span.name.startswith("embeddings ") for c in receiver.children(search))
    assert any(c.attributes().get("db.system.name") for c in receiver.children(search))
    assert_no_content(receiver)


async def test_query_and_content_reach_spans_only_when_opted_in(
    receiver: Receiver, database_url: str
) -> None:
    run_library(receiver, database_url, "lib-content", GQL_MEMORY_TRACE_CONTENT="true")
    [add] = receiver.named("create_memory insights.add")
    assert add.attributes()["gen_ai.memory.records"] == (
        f'[{{"content": "The user drinks {SECRET}"}}]'
    )
    [search] = receiver.named("search_memory search")
    assert search.attributes()["gen_ai.memory.query.text"] == SECRET
