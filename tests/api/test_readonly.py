"""Queries never write: every query field of the schema leaves every table unchanged.

The test enumerates the schema, so a new query field is covered automatically; a field with a
required argument the test does not know how to fill fails loudly here.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from gql_memory.api.schema import build_schema
from gql_memory.config import Settings
from gql_memory.db import Database
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def settings(database_url: str) -> Settings:
    """Every field, three levels deep, is a very expensive query: this module checks that
    queries never write, not their cost (tests/api/test_query_cost.py does)."""
    return Settings(
        database_url=database_url, db_pool_size=20, db_max_overflow=20, max_query_cost=10**12
    )


async def snapshot(db: Database) -> dict[str, tuple[int, str | None]]:
    """Row count and a digest of every row (all columns, last_accessed included) per table."""
    async with db.read() as conn:
        tables = (
            (await conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname='public'")))
            .scalars()
            .all()
        )
        result = {}
        for table in tables:
            row = (
                await conn.execute(
                    text(
                        f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) "
                        f"FROM {table} t"
                    )
                )
            ).one()
            result[table] = (row[0], row[1])
    return result


def is_required(arg: Any) -> bool:
    from graphql import GraphQLNonNull, Undefined

    return isinstance(arg.type, GraphQLNonNull) and arg.default_value is Undefined


def selection(type_: Any, depth: int = 0) -> str:
    """Select every field without required arguments, a few levels deep."""
    from graphql import GraphQLObjectType, get_named_type

    named = get_named_type(type_)
    if not isinstance(named, GraphQLObjectType):
        return ""
    parts = []
    for name, field in named.fields.items():
        if any(is_required(a) for a in field.args.values()):
            continue
        inner = get_named_type(field.type)
        if isinstance(inner, GraphQLObjectType):
            if depth < 3:
                parts.append(f"{name} {{ {selection(inner, depth + 1)} }}")
        else:
            parts.append(name)
    return " ".join(parts)


async def seed(api: LiveServer) -> dict[str, dict[str, str]]:
    """Rows in every table, and sample values for required arguments per query field."""
    added = await api.data(
        'mutation { addWorkingMemory(input: {content: "seed", importance: 0.9}) { addedId } }'
    )
    insight = await api.data('mutation { addInsight(input: {content: "seed insight"}) { id } }')
    episode = await api.data(
        'mutation { storeEpisode(input: {query: "seed", reward: 0.5, reflection: "r"}) { id } }'
    )
    for i in range(11):
        await api.data(
            f'mutation {{ addWorkingMemory(input: {{content: "fill {i}"}}) {{ addedId }} }}'
        )
    await api.data(
        'mutation { storeRawDialogue(input: {sessionId: "default", speaker: "user", '
        'content: "hello"}) { id } }'
    )
    a = await api.data(
        'mutation($i: ID) { addNode(input: {label: "T", name: "a", insightId: $i}) { id } }',
        {"i": insight["addInsight"]["id"]},
    )
    b = await api.data('mutation { addNode(input: {label: "T", name: "b"}) { id } }')
    a_id, b_id = a["addNode"]["id"], b["addNode"]["id"]
    await api.data(
        "mutation($a: ID!, $b: ID!) { addEdge(input: {sourceId: $a, targetId: $b, "
        'relation: "r"}) { id } }',
        {"a": a_id, "b": b_id},
    )
    return {
        "node": {"id": a_id},
        "nodeByName": {"label": "T", "name": "a"},
        "neighbors": {"nodeId": a_id},
        "path": {"fromId": a_id, "toId": b_id},
        "workingMemoryItem": {"id": added["addWorkingMemory"]["addedId"]},
        "insight": {"id": insight["addInsight"]["id"]},
        "episode": {"id": episode["storeEpisode"]["id"]},
        "*": {"query": "seed"},
    }


async def test_every_query_field_leaves_the_database_unchanged(
    api: LiveServer, db: Database
) -> None:
    samples = await seed(api)
    schema = build_schema()._schema
    query_type = schema.query_type
    assert query_type is not None
    before = await snapshot(db)
    for name, field in query_type.fields.items():
        args = []
        for arg_name, arg in field.args.items():
            if is_required(arg):
                value = samples.get(name, {}).get(arg_name) or samples["*"].get(arg_name)
                assert value, f"readonly test: no sample value for {name}({arg_name})"
                args.append(f'{arg_name}: "{value}"')
        arg_text = f"({', '.join(args)})" if args else ""
        sub = selection(field.type)
        query = f"{{ {name}{arg_text} {('{ ' + sub + ' }') if sub else ''} }}"
        await api.data(query)
        assert await snapshot(db) == before, f"query field {name} changed the database"
