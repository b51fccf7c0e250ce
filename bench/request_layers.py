"""Where one request's time goes, in-process: the app of `create_app` driven through ASGI
without a socket under cProfile, each layer of the request path (middlewares, the view,
each schema extension, execution, the resolver, the memory layer) costed by the cumulative
time of its entry functions less the layers inside them. Part of `bench.hot_paths`."""

from __future__ import annotations

import asyncio
import cProfile
import json
import logging
import logging.config
import os
import pstats
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from bench.common import percentile, run_async
from gql_memory.config import Settings

T = TypeVar("T")
NAMESPACE = "default"
TYPENAME = "{ __typename }"
PROFILED_ADDS = 500
PROFILED_TYPENAMES = 1_500
# the document bench.hot_paths sends for addWorkingMemory
ADD_WORKING_MEMORY = (
    "mutation Add($c: String!, $s: String!) { addWorkingMemory(input: "
    "{content: $c, sessionId: $s}) { addedId evictedId archivedId currentCount } }"
)

# --- where one request's time goes, in-process ---------------------------------------------


class Exchange:
    """One HTTP request as the ASGI server hands it to the app (no socket, no parsing)."""

    def __init__(self, body: bytes) -> None:
        self.messages = [{"type": "http.request", "body": body, "more_body": False}]
        self.chunks: list[bytes] = []

    async def receive(self) -> dict[str, Any]:
        if self.messages:
            return self.messages.pop()
        await asyncio.Future()  # the client stays connected; the app cancels this wait
        raise AssertionError

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))


def asgi_scope(body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def post(app: Any, body: bytes) -> bytes:
    exchange = Exchange(body)
    await app(asgi_scope(body), exchange.receive, exchange.send)
    answer = b"".join(exchange.chunks)
    if b'"errors"' in answer:
        raise RuntimeError(answer[:300])
    return answer


def _bodies(kind: str, count: int, start: int) -> list[bytes]:
    if kind == "typename":
        return [json.dumps({"query": TYPENAME}).encode()] * count
    return [
        json.dumps(
            {"query": ADD_WORKING_MEMORY, "variables": {"c": f"n{n}", "s": "hp-profile"}}
        ).encode()
        for n in range(start, start + count)
    ]


@dataclass
class Costs:
    """Per request of one kind: unprofiled CPU and wall time, and the profile."""

    cpu_us: float
    wall_us: float
    wall_p50_us: float
    profile: pstats.Stats
    requests: int


async def profile_requests(app: Any, kind: str, count: int) -> Costs:
    for body in _bodies(kind, 200, 0):  # warm-up: caches, prepared statements, eviction
        await post(app, body)
    bodies = _bodies(kind, count, 200)
    walls = []
    cpu, wall = time.process_time(), time.perf_counter()
    for body in bodies:
        began = time.perf_counter()
        await post(app, body)
        walls.append(time.perf_counter() - began)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    bodies = _bodies(kind, count, 200 + count)
    profiler = cProfile.Profile()
    profiler.enable()
    for body in bodies:
        await post(app, body)
    profiler.disable()
    return Costs(
        cpu / count * 1e6,
        wall / count * 1e6,
        percentile(walls, 50) * 1e6,
        pstats.Stats(profiler),
        count,
    )


def _code(function: Any, *nested: str) -> Any:
    """The code object of ``function``, or of a function nested in it (name by name)."""
    code = getattr(function, "__code__", function)
    for name in nested:
        code = next(c for c in code.co_consts if getattr(c, "co_name", None) == name)
    return code


def extension_hooks(schema: Any) -> dict[str, list[Any]]:
    """Each extension of a request -> the code of the hooks it overrides (extensions that
    share theirs, QueryDepthLimit and AliasLimit by AddValidationRules, share a row)."""
    from strawberry.extensions import SchemaExtension

    rows: dict[str, list[Any]] = {}
    for extension in schema.get_extensions():
        codes = []
        for hook in (
            "__init__",
            "on_operation",
            "on_validate",
            "on_parse",
            "on_execute",
            "resolve",
            "get_results",
        ):
            owner = next(k for k in type(extension).__mro__ if hook in vars(k))
            if owner not in (SchemaExtension, object):
                codes.append(vars(owner)[hook].__code__)
        name = type(extension).__name__
        shared = next((row for row, known in rows.items() if set(known) & set(codes)), None)
        if shared is None:
            rows[name] = codes
        else:
            known = rows.pop(shared)
            rows[f"{shared} + {name}"] = known + [c for c in codes if c not in known]
    return rows


def request_layers(app: Any) -> list[tuple[str, list[Any], list[Any]]]:
    """(layer, entry functions, functions of the layers inside it): a layer costs the
    cumulative time of its entries less that of what runs inside them but belongs elsewhere
    (the next middleware, the response's send chain, the hooks in strawberry's managers)."""
    from starlette._exception_handler import wrap_app_handling_exceptions
    from starlette.applications import Starlette
    from starlette.middleware.errors import ServerErrorMiddleware
    from starlette.middleware.exceptions import ExceptionMiddleware
    from strawberry.extensions.context import ExtensionContextManagerBase as Managers
    from strawberry.http.async_base_view import AsyncBaseHTTPView
    from strawberry.http.base import BaseView
    from strawberry.schema.schema import Schema

    from gql_memory.api.schema import MemorySchema
    from gql_memory.api.working import WorkingMutations
    from gql_memory.live.listener import EventListener
    from gql_memory.memory.working.working_memory import WorkingMemory
    from gql_memory.server import view as view_module
    from gql_memory.server.middleware import BodySizeLimitMiddleware, RequestContextMiddleware

    view = view_module.MemoryGraphQL
    context_request = RequestContextMiddleware.__call__
    body_limit = BodySizeLimitMiddleware.__call__
    send_with_id = _code(context_request, "send_with_id")
    counting_receive = _code(body_limit, "counting_receive")
    tracking_send = _code(body_limit, "tracking_send")
    error_send = _code(ServerErrorMiddleware.__call__, "_send")
    sender = _code(wrap_app_handling_exceptions, "wrapped_app", "sender")
    graphql = next(r.endpoint for r in app.routes if getattr(r, "path", "") == "/graphql")
    hooks = extension_hooks(graphql.schema)
    every_hook = [c for codes in hooks.values() for c in codes]
    stage_hooks = [c for c in every_hook if c.co_name.startswith("on_")]
    managers = [
        vars(Managers)[m] for m in ("__init__", "__enter__", "__exit__", "__aenter__", "__aexit__")
    ]
    resolver = WorkingMutations.add_working_memory
    return [
        (
            "Starlette: error middleware, routing, send wrappers",
            [Starlette.__call__, ExceptionMiddleware.__call__, sender, error_send],
            [context_request, view.__call__, tracking_send, Exchange.send],
        ),
        (
            "RequestContextMiddleware: request id, access log",
            [context_request, send_with_id],
            [body_limit, error_send],
        ),
        ("  of which the access log line", [RequestContextMiddleware._log], []),
        (
            "BodySizeLimitMiddleware",
            [body_limit, counting_receive, tracking_send],
            [ExceptionMiddleware.__call__, send_with_id, Exchange.receive],
        ),
        (
            "MemoryGraphQL view: body, disconnect-watch task, response",
            [view.__call__, view_module._cancel_on_disconnect],
            [counting_receive, sender],
        ),
        (
            "strawberry HTTP view (run)",
            [AsyncBaseHTTPView.run],
            [view.get_context, view.decode_json, MemorySchema.execute, BaseView.encode_json],
        ),
        ("get_context: credentials, Context", [view.get_context], []),
        ("JSON decode of the request", [view.decode_json], []),
        ("JSON encode of the response", [BaseView.encode_json], []),
        ("MemorySchema.execute: size check, deadline", [MemorySchema.execute], [Schema.execute]),
        *((f"extension {name}", codes, []) for name, codes in hooks.items()),
        ("strawberry extension plumbing (hook context managers)", managers, stage_hooks),
        (
            "strawberry + graphql-core execution (parse, validation cached)",
            [Schema.execute],
            [*managers, *(c for c in every_hook if c not in stage_hooks), resolver],
        ),
        ("resolver + result type (api/)", [resolver], [WorkingMemory.add]),
        ("WorkingMemory.add: memory/, SQLAlchemy, asyncpg (client CPU)", [WorkingMemory.add], []),
        (
            "live events: LISTEN callback (parse, metrics, hub)",
            [EventListener._on_notification],
            [],
        ),
    ]


def layer_costs(app: Any, stats: pstats.Stats) -> tuple[dict[str, float], float]:
    """Seconds per layer over the profiled requests (the rest last), and their total: the
    time of every profiled function but this module's harness."""
    table: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]

    def cum(functions: list[Any]) -> float:
        keys = [(c.co_filename, c.co_firstlineno, c.co_name) for c in map(_code, functions)]
        return sum(table[k][3] for k in keys if k in table)

    layers = {name: cum(plus) - cum(minus) for name, plus, minus in request_layers(app)}
    total = sum(v[2] for k, v in table.items() if k[0] != __file__)
    rest = total - sum(v for name, v in layers.items() if not name.startswith(" "))
    # what no layer claims; a few µs below zero is the method's error
    layers["rest: event loop callbacks, asyncpg protocol"] = rest
    return layers, total


def profile_layers(url: str) -> tuple[list[str], float]:
    """The per-layer table, from cProfile of the app in this process (the server's settings
    and logging), and the unprofiled in-process p50 of `{ __typename }` in µs."""
    from gql_memory.server.app import create_app
    from gql_memory.server.logs import log_config

    settings = Settings(database_url=url, embed_raw_dialogue=False)
    app = create_app(settings)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)

    async def run() -> tuple[Costs, Costs]:
        async with app.router.lifespan_context(app):
            add = await profile_requests(app, "add", PROFILED_ADDS)
            typename = await profile_requests(app, "typename", PROFILED_TYPENAMES)
        return add, typename

    with open(os.devnull, "w") as void:
        # the access log line is part of a request: formatted and written, into the void
        logging.config.dictConfig(log_config(settings.log_level, settings.log_format))
        for handler in root.handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(void)
        try:
            add, typename = run_async(run())
        finally:
            root.handlers[:], root.level = saved
    add_layers, add_total = layer_costs(app, add.profile)
    type_layers, type_total = layer_costs(app, typename.profile)
    lines = [
        "",
        "### Where one request's time goes (in-process, cProfile)",
        "",
        "The app of `create_app`, with the server's settings and logging, driven through ASGI "
        f"without a socket: {add.requests} addWorkingMemory and {typename.requests} "
        "`{ __typename }` after 200 of each. A layer costs the cumulative time of its entry "
        "functions less that of the layers inside them (the next middleware, the response's "
        "send chain, the extension hooks inside strawberry's context managers); the total is "
        "the time of every profiled function. cProfile inflates call-heavy Python code, so "
        "read the shares; its clock is the wall clock, so on a busy machine the layers that "
        "make system calls (the database driver) take the preemptions too. Unprofiled, a "
        f"request costs this process {add.cpu_us:.0f} µs of "
        f"CPU (addWorkingMemory; {add.wall_us:.0f} µs wall with the database) and "
        f"{typename.cpu_us:.0f} µs (`{{ __typename }}`); profiled, "
        f"{add_total / add.requests * 1e6:.0f} and {type_total / typename.requests * 1e6:.0f} µs.",
        "",
        "| layer | addWorkingMemory µs | share | `{ __typename }` µs | share |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, cost in add_layers.items():
        other = type_layers.get(name, 0.0)
        lines.append(
            f"| {name} | {cost / add.requests * 1e6:.0f} | {cost / add_total:.1%} "
            f"| {other / typename.requests * 1e6:.0f} | {other / type_total:.1%} |"
        )
    return lines, typename.wall_p50_us
