"""mem0's get_all output (made by the real mem0ai 2.2.1, infer=False) as insights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gql_memory.errors import ValidationError
from gql_memory.memory import Memory
from gql_memory.memory.interchange.mem0 import import_mem0, read_mem0
from tests.memory.interchange.conftest import MEM0


async def test_each_memory_becomes_an_insight_with_mem0s_ids_and_metadata(
    target: Memory, memory: Memory
) -> None:
    memories = read_mem0(MEM0)
    assert await import_mem0(target.insights, memories) == 6
    stored = {i.content: i for i in (await target.insights.list(first=100)).items}
    original = json.loads(MEM0.read_text())["results"]
    assert sorted(stored) == sorted(m["memory"] for m in original)
    for item in original:
        insight = stored[item["memory"]]
        kept = insight.metadata["mem0"]
        assert insight.metadata["source"] == "mem0"
        for field in ("id", "hash", "user_id", "agent_id", "run_id", "role", "created_at"):
            assert kept.get(field) == item.get(field), field
        assert kept.get("metadata") == item["metadata"]
        assert insight.valid_from.isoformat() == item["updated_at"]
    berlin = stored["I moved to Berlin in March."].metadata["mem0"]
    assert (berlin["user_id"], berlin["run_id"]) == ("alice", "onboarding-1")
    assert (await memory.insights.list(first=10)).items == []  # no other namespace touched
    hits = await target.insights.search("green tea", 1)
    assert hits[0].insight.content == "Prefers green tea over coffee"


async def test_importing_again_adds_nothing_and_a_changed_memory_supersedes(
    target: Memory, tmp_path: Path
) -> None:
    memories = read_mem0(MEM0)
    assert await import_mem0(target.insights, memories) == 6
    assert await import_mem0(target.insights, memories) == 0
    document = json.loads(MEM0.read_text())
    changed = document["results"][0]
    changed |= {"memory": "Prefers matcha now", "hash": "new-hash"}
    path = tmp_path / "later.json"
    path.write_text(json.dumps(document))
    assert await import_mem0(target.insights, read_mem0(path)) == 1
    page = (await target.insights.list(first=100)).items
    assert len(page) == 6  # the older version left current reads
    newer = next(i for i in page if i.content == "Prefers matcha now")
    assert len(newer.supersedes) == 1
    # changed back in mem0: the first text is current again, once
    assert await import_mem0(target.insights, memories) == 1
    assert await import_mem0(target.insights, memories) == 0
    page = (await target.insights.list(first=100)).items
    assert len(page) == 6 and "Prefers matcha now" not in [i.content for i in page]


def test_a_list_and_jsonl_are_read_too(tmp_path: Path) -> None:
    results = json.loads(MEM0.read_text())["results"]
    listed = tmp_path / "memories.json"
    listed.write_text(json.dumps(results, indent=1))
    lines = tmp_path / "memories.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in results))
    expected = [m.insight for m in read_mem0(MEM0)]
    assert [m.insight for m in read_mem0(listed)] == expected
    assert [m.insight for m in read_mem0(lines)] == expected


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({"id": "m2"}, "line 7: memory is required"),
        ({"id": "m2", "memory": "x", "user_id": 7}, "line 7: user_id must be a string"),
        ({"id": "m1", "memory": "again"}, "line 7: mem0 id 'm1' repeats line 3"),
        ({"id": "m2", "memory": "x", "created_at": "May"}, "line 7: created_at 'May' is not"),
        ({"id": "m2", "memory": "x", "metadata": {"k": "a\u0000b"}}, "line 7: metadata"),
    ],
)
def test_a_bad_memory_is_one_error_naming_its_line(
    tmp_path: Path, item: dict[str, object], error: str
) -> None:
    path = tmp_path / "bad.json"
    results = [{"id": "m1", "memory": "fine"}, item]
    path.write_text(json.dumps({"results": results}, indent=2))
    with pytest.raises(ValidationError) as raised:
        read_mem0(path)
    assert str(raised.value).startswith(error)


async def test_mem0_ids_never_reach_another_namespaces_insights(
    target: Memory, memory: Memory, tmp_path: Path
) -> None:
    """A changed memory supersedes the version imported into its own namespace only."""
    assert await import_mem0(memory.insights, read_mem0(MEM0)) == 6
    document = json.loads(MEM0.read_text())
    document["results"][0] |= {"memory": "Prefers matcha now", "hash": "new-hash"}
    path = tmp_path / "later.json"
    path.write_text(json.dumps(document))
    assert await import_mem0(target.insights, read_mem0(path)) == 6
    theirs = (await memory.insights.list(first=100)).items
    assert len(theirs) == 6 and all(i.superseded_by is None for i in theirs)
    assert all(not i.supersedes for i in (await target.insights.list(first=100)).items)
