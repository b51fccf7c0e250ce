"""No string reaches SQL unchecked: every string field of every query and mutation argument,
at every depth of nested inputs (and JSON keys), is tried with a NUL character and a lone
surrogate over real HTTP. Each must be BAD_USER_INPUT naming the argument, with nothing
written and nothing logged as an internal error. The schema is walked, so a new argument is
covered by construction."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    get_named_type,
    is_leaf_type,
)
from sqlalchemy import text

from gql_memory.api.schema import build_schema
from gql_memory.api.storable_strings import document_strings, value_strings
from gql_memory.db import Database
from tests.conftest import LiveServer, data_tables

SCHEMA = build_schema()._schema
BAD_STRINGS = {"nul": "bad\x00value", "surrogate": "bad\ud800value"}
SAMPLES: dict[str, Any] = {
    "String": "x",
    "ID": "1",
    "Int": 1,
    "Float": 0.5,
    "Boolean": False,
    "JSON": {"k": "v"},
    "DateTime": "2024-01-01T00:00:00+00:00",
}
MAX_DEPTH = 4

Path = tuple[str | int, ...]


def sample(kind: GraphQLInputType, depth: int = 0) -> Any:
    """A plausible value of an input type: required fields filled, optional ones left out."""
    if isinstance(kind, GraphQLNonNull):
        return sample(kind.of_type, depth)
    if isinstance(kind, GraphQLList):
        return [sample(kind.of_type, depth)]
    if isinstance(kind, GraphQLEnumType):
        return next(iter(kind.values))
    if isinstance(kind, GraphQLScalarType):
        return SAMPLES[kind.name]
    assert isinstance(kind, GraphQLInputObjectType)
    return {
        name: sample(field.type, depth + 1)
        for name, field in kind.fields.items()
        if isinstance(field.type, GraphQLNonNull) and field.default_value is None
    }


def string_paths(kind: GraphQLInputType, depth: int = 0) -> Iterator[tuple[Path, GraphQLInputType]]:
    """Every path to a string-valued place in a value of this type (optional fields too), with
    the type of the input object that holds it (to fill in the optional field's siblings)."""
    named = get_named_type(kind)
    wrapped = kind.of_type if isinstance(kind, GraphQLNonNull) else kind
    if isinstance(wrapped, GraphQLList):
        for path, holder in string_paths(wrapped.of_type, depth):
            yield (0, *path), holder
        return
    if isinstance(named, GraphQLScalarType):
        if named.name in ("String", "ID", "DateTime"):
            yield (), kind
        elif named.name == "JSON":
            yield ("k",), kind  # a value inside the JSON object
            yield ("\x00key",), kind  # marker: a bad key (see with_bad_string)
        return
    if isinstance(named, GraphQLInputObjectType) and depth < MAX_DEPTH:
        for name, field in named.fields.items():
            for path, holder in string_paths(field.type, depth + 1):
                yield (name, *path), holder


def with_bad_string(value: Any, kind: GraphQLInputType, path: Path, bad: str) -> Any:
    """``value`` (a sample of ``kind``) with ``bad`` at ``path``, creating optional parts."""
    if not path:
        return bad
    head, *rest = path
    named = get_named_type(kind)
    wrapped = kind.of_type if isinstance(kind, GraphQLNonNull) else kind
    if isinstance(wrapped, GraphQLList):
        inner = value[0] if value else sample(wrapped.of_type)
        return [with_bad_string(inner, wrapped.of_type, tuple(rest), bad)]
    if isinstance(named, GraphQLScalarType):  # JSON
        if head == "\x00key":
            return {bad: "v"}
        return {"k": bad}
    assert isinstance(named, GraphQLInputObjectType)
    field = named.fields[str(head)]
    current = dict(value or {})
    inner = current.get(str(head))
    if inner is None and not is_leaf_type(get_named_type(field.type)):
        inner = sample(field.type)
    current[str(head)] = with_bad_string(inner, field.type, tuple(rest), bad)
    return current


def cases() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(id, document, variables) per operation field, string place and bad string."""
    for operation, root in (("query", SCHEMA.query_type), ("mutation", SCHEMA.mutation_type)):
        assert root is not None
        for field_name, field in root.fields.items():
            yield from field_cases(operation, field_name, field)


def field_cases(
    operation: str, field_name: str, field: GraphQLField
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    args: dict[str, GraphQLArgument] = field.args
    declared = ", ".join(f"${name}: {arg.type}" for name, arg in args.items())
    passed = ", ".join(f"{name}: ${name}" for name in args)
    selection = "" if is_leaf_type(get_named_type(field.type)) else " { __typename }"
    call = f"{field_name}({passed})" if args else field_name
    document = f"{operation}{f'({declared})' if declared else ''} {{ {call}{selection} }}"
    base = {name: sample(arg.type) for name, arg in args.items()}
    for name, arg in args.items():
        for path, _ in string_paths(arg.type):
            for label, bad in BAD_STRINGS.items():
                variables = dict(base)
                variables[name] = with_bad_string(base[name], arg.type, path, bad)
                where = ".".join(str(p) for p in (name, *path)).replace("\x00key", "<key>")
                yield f"{field_name}:{where}:{label}", document, variables


CASES = list(cases())


def test_every_operation_with_string_arguments_is_covered() -> None:
    covered = {case_id.split(":")[0] for case_id, _, _ in CASES}
    assert {"addEdge", "addNode", "addInsight", "storeRawDialogue", "search"} <= covered
    assert len(CASES) > 100


def encode(body: dict[str, Any]) -> bytes:
    # json.dumps escapes lone surrogates as \ud800, which the server's JSON parser accepts
    return json.dumps(body).encode()


async def table_rows(db: Database) -> dict[str, int]:
    async with db.read() as conn:
        return {
            t: int(await conn.scalar(text(f"SELECT count(*) FROM {t}")) or 0)
            for t in await data_tables(conn)
        }


async def test_no_string_with_nul_or_a_lone_surrogate_reaches_sql(
    api: LiveServer, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    before = await table_rows(db)
    failures = []
    with caplog.at_level(logging.ERROR):
        for case_id, document, variables in CASES:
            response = await api.client.post(
                "/graphql",
                content=encode({"query": document, "variables": variables}),
                headers={"content-type": "application/json"},
            )
            body = response.json()
            errors = body.get("errors") or []
            codes = [e.get("extensions", {}).get("code") for e in errors]
            if response.status_code >= 500 or codes != ["BAD_USER_INPUT"]:
                failures.append((case_id, response.status_code, errors))
            elif "NUL" not in errors[0]["message"] and "surrogate" not in errors[0]["message"]:
                failures.append((case_id, "message", errors[0]["message"]))
    assert not failures, failures[:5]
    assert await table_rows(db) == before  # nothing half-written
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_reported_add_edge_reproducer_is_bad_user_input(api: LiveServer) -> None:
    """schemathesis found this: a node named by label and name with a NUL in it."""
    error = await api.error(
        'mutation { addEdge(input: {source: {label: "", name: "a\\u0000b"}, '
        'target: {label: "T", name: "t"}, relation: "r"}) { id } }'
    )
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert error["message"] == "input.source.name must not contain NUL characters"


def test_the_walkers_find_every_string() -> None:
    from graphql import parse

    document = parse('query($a: String = "d") { f(x: "1", y: {z: ["2", {w: "3"}]}) { g(h: "4") } }')
    assert sorted(v for _, v in document_strings(document)) == ["1", "2", "3", "4", "d", "w", "z"]
    found = [v for _, v in value_strings({"k": ["a", {"b\x00": "c"}]}, "$v")]
    assert sorted(found) == ["a", "b\x00", "c", "k"]
