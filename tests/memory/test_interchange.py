"""Export and import of a namespace (gql_memory.memory.interchange, docs/interchange.md)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from gql_memory.db import Database
from gql_memory.db.tables import TENANT_TABLES
from gql_memory.memory import Memory
from gql_memory.memory.interchange.export import export_namespace
from gql_memory.memory.interchange.format import BY_NAME, KINDS, VERSION, LineError, decode
from gql_memory.memory.interchange.load import Mode, NamespaceNotEmptyError, load_export
from gql_memory.memory.raw import RawDialogueInput
from gql_memory.memory.turn_embedding import TurnRecipe
from gql_memory.memory.waiting import embed_waiting

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def fill_every_layer(memory: Memory) -> None:
    """A namespace that uses every layer: turns, working memory past its capacity (stale
    archive, session state), superseded insights and episodes, graph with a closed edge, a
    row waiting for its vector."""
    turns = await memory.raw.store_many(
        [
            RawDialogueInput(
                f"chat-{i % 2}",
                "user" if i % 3 else "assistant",
                f"turn {i} about Lisbon and trams",
                {"n": i, "tags": ["a", "b"]} if i % 2 else None,
                START + timedelta(minutes=i),
            )
            for i in range(6)
        ]
    )
    old = await memory.insights.add("Lisbon has trams", [turns[0].id], {"k": 1})
    new = await memory.insights.add(
        "Lisbon has yellow trams", [turns[1].id, turns[2].id], supersedes=[old.id]
    )
    lesson = await memory.episodes.store("how to get around Lisbon?", 0.5, "take tram 28")
    await memory.episodes.store(
        "how to get around Lisbon?", 0.9, "walk, then tram 28", supersedes=[lesson.id]
    )
    city = await memory.graph.add_node("City", "Lisbon", {"country": "PT"}, insight_id=new.id)
    tram = await memory.graph.add_node("Thing", "tram 28", raw_id=turns[3].id)
    edge = await memory.graph.add_edge(city.id, tram.id, "HAS", 0.7, {"since": 1914})
    await memory.graph.add_edge(city.id, tram.id, "HAD", supersedes=[edge.id])
    for i in range(12):  # capacity 10: the oldest evicted to stale memory
        await memory.working.add(
            f"note {i}",
            0.3 + i / 20,
            session_id="chat-0",
            ref_kind="INSIGHT" if i == 11 else None,
            ref_id=new.id if i == 11 else None,
        )
    kept = await memory.working.list("chat-0")
    await memory.working.archive(kept[-1].id)
    await memory.working.access(kept[0].id)
    # consolidation: a duplicate merged (reason merged), an entity made an alias, journaled
    await memory.insights.add("Lisbon has yellow trams", [turns[3].id])
    await memory.raw.store("chat-1", "Maria", "turn about trams")
    await memory.raw.store("chat-1", "maria", "another turn about trams")
    report = await memory.consolidation.run()
    assert sorted(a.kind.value for a in report.actions) == ["entity_merge", "merge"]
    async with memory.db.write() as conn:  # where a scheduled pass left off
        await conn.execute(
            text("INSERT INTO consolidation_cursors (namespace, insight_id) VALUES (:ns, :i)"),
            {"ns": memory.namespace, "i": new.id},
        )
    async with memory.db.write() as conn:  # stored while the embedder was down
        await conn.execute(
            text(
                "UPDATE insights SET embedding = NULL, embedding_waiting = true "
                "WHERE namespace = :ns AND id = :id"
            ),
            {"ns": memory.namespace, "id": old.id},
        )


async def export_text(db: Database, namespace: str, with_vectors: bool = True) -> str:
    out = io.StringIO()
    await export_namespace(db, namespace, out, with_vectors=with_vectors)
    return out.getvalue()


def without_ids(export: str) -> list[Any]:
    """The file with every id replaced by its place among its kind's records (ids a file
    names but holds no record of: by order of appearance), and the header without what
    differs between namespaces and moments."""
    lines = [json.loads(line) for line in export.splitlines()]
    header, records = lines[0], lines[1:]
    header.pop("namespace"), header.pop("exportedAt")
    places: dict[tuple[str, int], str] = {}
    for record in records:
        if "id" in record:
            places[(record["kind"], record["id"])] = f"{record['kind']}#{len(places)}"

    def place(kind: str, value: int) -> str:
        return places.setdefault((kind, value), f"other {kind}#{len(places)}")

    refs = {"RAW": "raw", "INSIGHT": "insight", "EPISODE": "episode", "NODE": "node"}
    for record in records:
        for f in BY_NAME[record["kind"]].fields:
            value = record[f.name]
            if f.ref is None and f.name != "id" or value is None:
                continue
            kind = record["kind"] if f.name == "id" else f.ref
            if kind == "refKind":
                kind = refs[record["refKind"]]
            assert kind is not None
            record[f.name] = (
                [place(kind, v) for v in value] if isinstance(value, list) else place(kind, value)
            )
    return [header, *records]


def write(tmp_path: Path, export: str, name: str = "ns.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(export)
    return path


def test_every_tenant_table_is_exported() -> None:
    assert {kind.table.name for kind in KINDS} == TENANT_TABLES


def test_every_column_of_a_tenant_table_is_exported() -> None:
    """All but the namespace (the import's), the full-text vector (made again from the text),
    the vector with its waiting mark (the embedded kinds' own fields) and what stood before a
    consolidation action (its ids name the exporting database's rows: not undone after an
    import)."""
    for kind in KINDS:
        derived = {"namespace", "content_tsv", "embedding", "embedding_waiting", "changes"}
        assert {f.column for f in kind.fields} == set(kind.table.c.keys()) - derived, kind.name


async def test_export_import_export_is_identical_but_for_ids(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    source = Memory(db, memory.settings, "source", memory.embedder)
    await fill_every_layer(source)
    first = await export_text(db, "source")
    kinds = {json.loads(line)["kind"] for line in first.splitlines()[1:]}
    assert kinds == set(BY_NAME)
    assert '"embeddingWaiting":true' in first and '"validTo":null' in first

    summary = await load_export(db, memory.settings, "copy", write(tmp_path, first))

    assert summary.vectors_used and summary.waiting == 1  # the row that waited still waits
    second = await export_text(db, "copy")
    assert without_ids(second) == without_ids(first)
    assert second != first  # new ids, not the source's rows
    copy = Memory(db, memory.settings, "copy", memory.embedder)
    [hit] = await copy.insights.search("yellow trams", top_k=1)
    assert hit.insight.content == "Lisbon has yellow trams" and hit.insight.supersedes


async def test_without_vectors_the_rows_are_embedded_anew(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    source = Memory(db, memory.settings, "source", memory.embedder)
    await fill_every_layer(source)
    path = write(tmp_path, await export_text(db, "source", with_vectors=False))
    assert '"embedding"' not in path.read_text()

    summary = await load_export(db, memory.settings, "copy", path)

    assert not summary.vectors_used and summary.waiting > 1
    assert "embed anew" in summary.vector_note and "without --with-vectors" in summary.vector_note
    await embed_waiting(db, memory.embedder, TurnRecipe.from_settings(memory.settings))
    assert without_ids(await export_text(db, "copy")) == without_ids(
        await export_text(db, "source")
    )


async def test_a_namespace_with_data_is_refused_unless_replace_or_merge(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    source = Memory(db, memory.settings, "source", memory.embedder)
    await fill_every_layer(source)
    export = await export_text(db, "source")
    path = write(tmp_path, export)
    before = await export_text(db, "source")

    with pytest.raises(NamespaceNotEmptyError, match="--replace .* --merge"):
        await load_export(db, memory.settings, "source", path)
    merged = await load_export(db, memory.settings, "source", path, Mode.MERGE)
    assert sum(merged.added.values()) == 0  # everything is there already
    assert await export_text(db, "source") == before.replace(
        before.splitlines()[0], (await export_text(db, "source")).splitlines()[0]
    )

    await load_export(db, memory.settings, "target", path)
    await memory.raw.store("elsewhere", "user", "not in the file")  # the default namespace
    target = Memory(db, memory.settings, "target", memory.embedder)
    await target.raw.store("chat-9", "user", "only in the target")
    twice = await load_export(db, memory.settings, "target", path, Mode.MERGE)
    assert twice.added == dict.fromkeys(BY_NAME, 0)
    turns = {t.content for t in (await target.raw.list(first=100)).items}
    assert "only in the target" in turns and len(turns) == 9

    replaced = await load_export(db, memory.settings, "target", path, Mode.REPLACE)
    assert replaced.replaced
    assert without_ids(await export_text(db, "target")) == without_ids(export)
    assert (await memory.raw.list()).items[0].content == "not in the file"


async def test_merge_into_a_namespace_adds_the_file_alongside(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    source = Memory(db, memory.settings, "source", memory.embedder)
    await fill_every_layer(source)
    path = write(tmp_path, await export_text(db, "source"))
    target = Memory(db, memory.settings, "target", memory.embedder)
    await target.graph.add_node("City", "Lisbon", {"mine": True})
    await target.raw.store("chat-0", "user", "my own turn")

    merged = await load_export(db, memory.settings, "target", path, Mode.MERGE)

    assert merged.added["node"] == merged.read["node"] - 1  # Lisbon was there: it is shared
    lisbon = await target.graph.node_by_name("City", "Lisbon")
    assert lisbon is not None and lisbon.properties == {"mine": True}
    assert merged.added["raw"] == 8 and merged.added["edge"] == merged.read["edge"]
    again = await load_export(db, memory.settings, "target", path, Mode.MERGE)
    assert sum(again.added.values()) == 0


def header(**changes: Any) -> str:
    return json.dumps(
        {"format": "gql-memory-export", "version": VERSION, "gqlMemory": "0", "namespace": "x"}
        | changes
    )


RAW = {
    "kind": "raw",
    "id": 1,
    "sessionId": "s",
    "speaker": "user",
    "content": "hello",
    "metadata": None,
    "timestamp": "2025-01-01T00:00:00+00:00",
    "importKey": None,
    "hasEmbedding": True,
    "embeddingWaiting": False,
}


NODE = {
    "kind": "node",
    "id": 1,
    "label": "L",
    "name": "n",
    "properties": None,
    "insightId": None,
    "episodeId": None,
    "rawId": None,
    "createdAt": "2025-01-01T00:00:00+00:00",
}
EDGE = {
    "kind": "edge",
    "id": 5,
    "sourceId": 1,
    "targetId": 2,
    "relation": "R",
    "weight": 1.0,
    "properties": None,
    "createdAt": "2025-01-01T00:00:00+00:00",
    "validFrom": "2025-01-01T00:00:00+00:00",
    "validTo": None,
    "supersededBy": None,
}


async def count_rows(db: Database, namespace: str) -> int:
    async with db.read() as conn:
        total = 0
        for table in TENANT_TABLES:
            total += await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE namespace = :ns"), {"ns": namespace}
            )
        return total


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "line 3: not valid JSON"),
        (json.dumps(RAW | {"speaker": "x" * 51}), "line 3: speaker must be at most 50 characters"),
        (json.dumps(RAW | {"kind": "alias"}), "line 3: unknown record kind 'alias'"),
        (json.dumps(RAW | {"id": 2, "metadata": [1]}), "line 3: metadata must be a JSON object"),
        (json.dumps(RAW | {"id": 2, "timestamp": "yesterday"}), "line 3: timestamp 'yesterday'"),
        (json.dumps(RAW | {"id": 2, "secret": 1}), "line 3: unknown field 'secret'"),
        (json.dumps(RAW), "line 3: raw id 1 repeats line 2"),
        (json.dumps({"kind": "session", "sessionId": "s", "eventCounter": 1}), "line 3: a session"),
    ],
)
async def test_a_malformed_line_is_named_and_nothing_is_imported(
    memory: Memory, db: Database, tmp_path: Path, bad: str, message: str
) -> None:
    path = write(tmp_path, "\n".join([header(), json.dumps(RAW), bad, json.dumps(RAW | {"id": 9})]))
    with pytest.raises(LineError) as raised:
        await load_export(db, memory.settings, "target", path)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert await count_rows(db, "target") == 0


async def test_a_newer_format_version_is_refused(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    path = write(tmp_path, header(version=VERSION + 1) + "\n" + json.dumps(RAW))
    with pytest.raises(LineError, match="line 1: .* version 2, newer than this gql_memory reads"):
        await load_export(db, memory.settings, "target", path)


async def test_a_failure_late_in_the_file_leaves_nothing_behind(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    edge = {
        "kind": "edge",
        "id": 5,
        "sourceId": 3,
        "targetId": 4,
        "relation": "R",
        "weight": 1.0,
        "properties": None,
        "createdAt": "2025-01-01T00:00:00+00:00",
        "validFrom": "2025-01-01T00:00:00+00:00",
        "validTo": None,
        "supersededBy": 77,  # no edge of the file
    }
    node = {"kind": "node", "label": "L", "properties": None, "insightId": None}
    node |= {"episodeId": None, "rawId": 1, "createdAt": "2025-01-01T00:00:00+00:00"}
    lines = [
        header(),
        json.dumps(RAW),
        json.dumps(node | {"id": 3, "name": "a"}),
        json.dumps(node | {"id": 4, "name": "b"}),
        json.dumps(edge),
    ]
    with pytest.raises(LineError, match="line 5: supersededBy 77 names no edge record"):
        await load_export(db, memory.settings, "target", write(tmp_path, "\n".join(lines)))
    assert await count_rows(db, "target") == 0


async def test_ids_in_a_file_never_reach_another_namespace(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    victim = Memory(db, memory.settings, "victim", memory.embedder)
    await fill_every_layer(victim)
    before = await export_text(db, "victim")
    theirs = without_ids(before)
    [insight_id] = [
        json.loads(line)["id"] for line in before.splitlines() if '"Lisbon has trams"' in line
    ]
    working_ids = [json.loads(line)["id"] for line in before.splitlines() if '"working"' in line]
    # the victim's own ids, as the file's ids and as references to rows not in the file
    crafted = [
        header(),
        json.dumps(RAW | {"id": insight_id}),
        json.dumps(
            {
                "kind": "working",
                "id": working_ids[0],
                "sessionId": "chat-0",
                "content": "mine",
                "importance": 0.5,
                "lastAccessed": "2025-01-01T00:00:00+00:00",
                "createdAt": "2025-01-01T00:00:00+00:00",
                "attention": None,
                "mentionCount": 0,
                "lastEvent": 0,
                "refKind": "INSIGHT",
                "refId": insight_id,
                "provenance": None,
            }
        ),
    ]
    await load_export(db, memory.settings, "attacker", write(tmp_path, "\n".join(crafted)))

    attacker = Memory(db, memory.settings, "attacker", memory.embedder)
    [item] = await attacker.working.list("chat-0")
    assert item.id != working_ids[0] and item.ref_id not in (None, insight_id)
    assert (await attacker.raw.list()).items[0].id != insight_id
    assert without_ids(await export_text(db, "victim")) == theirs
    insight_of_victim = {
        "kind": "node",
        "id": 1,
        "label": "L",
        "name": "n",
        "properties": None,
        "insightId": insight_id,
        "episodeId": None,
        "rawId": None,
        "createdAt": "2025-01-01T00:00:00+00:00",
    }
    path = write(tmp_path, header() + "\n" + json.dumps(insight_of_victim), "node.jsonl")
    with pytest.raises(LineError, match=f"line 2: insightId {insight_id} names no insight"):
        await load_export(db, memory.settings, "attacker", path, Mode.MERGE)


async def test_records_are_held_to_the_limits_of_the_api(
    memory: Memory, db: Database, tmp_path: Path
) -> None:
    with pytest.raises(LineError, match="line 3: name must be at most 2400 characters"):
        decode(NODE | {"name": "n" * 2401}, 3)
    big = NODE | {"label": "é" * 200, "name": "é" * 1100}  # 2600 bytes of UTF-8
    path = write(tmp_path, "\n".join([header(), json.dumps(NODE), json.dumps(big | {"id": 2})]))
    with pytest.raises(LineError, match="line 3: label and name together must be at most 2400"):
        await load_export(db, memory.settings, "target", path)
    assert await count_rows(db, "target") == 0
    with pytest.raises(LineError, match="line 4: relation must be at most 255 characters"):
        decode(EDGE | {"relation": "R" * 256}, 4)
    with pytest.raises(LineError, match="line 2: embedding .* single precision"):
        decode(RAW | {"embedding": [0.5, 1e39]}, 2)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [RAW | {"importKey": "k"}, RAW | {"id": 2, "importKey": "k"}],
            "line 3: raw id 2: its importKey is another record's",
        ),
        ([NODE, NODE | {"id": 2}], "line 3: node id 2: its label and name are another record's"),
        (
            [NODE, NODE | {"id": 2, "name": "m"}, EDGE, EDGE | {"id": 6}],
            "line 5: edge id 6: its sourceId, targetId and relation (valid now) are another",
        ),
    ],
    ids=["import key", "node", "current edge"],
)
@pytest.mark.parametrize("mode", [Mode.REFUSE, Mode.MERGE])
async def test_two_records_of_one_natural_key_are_a_line_error(
    memory: Memory,
    db: Database,
    tmp_path: Path,
    records: list[dict[str, Any]],
    message: str,
    mode: Mode,
) -> None:
    path = write(tmp_path, "\n".join([header(), *map(json.dumps, records)]))
    with pytest.raises(LineError) as raised:
        await load_export(db, memory.settings, "target", path, mode)
    assert str(raised.value).startswith(message)
    assert await count_rows(db, "target") == 0
