"""The automatic graph: turn and insight nodes, NEXT chains, entities, and their erasure."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from gql_memory.memory import Memory
from gql_memory.memory.graph.autograph import entity_names, speaker_entity
from gql_memory.memory.raw import RawDialogueInput


def test_entities_are_capitalised_names_without_sentence_openers() -> None:
    assert entity_names("Yes, it was amazing! I went to Paris with Melanie.") == [
        "Paris",
        "Melanie",
    ]
    assert entity_names("Caroline went to the LGBTQ group in New York City.") == [
        "Caroline",
        "LGBTQ",
        "New York City",
    ]
    assert entity_names("Hey Mel! Caroline's painting is great. Thanks!", "Caroline") == ["Mel"]
    assert entity_names("no names here, all lower case.") == []


def test_sentence_initial_verbs_are_no_entities() -> None:
    assert entity_names("Remind me that Alice is coming on Friday.") == ["Alice", "Friday"]
    assert entity_names("Noted: Bob prefers the window seat.") == ["Bob"]
    assert entity_names("Booking the Eurostar to Paris now.") == ["Eurostar", "Paris"]
    assert entity_names("Booked! Planning is half the fun. Being there is the rest.") == []
    assert entity_names("Call me. Send it! Schedule it? Buy milk; Note this.") == []


def test_a_sentence_starts_after_punctuation_a_line_break_a_quote_or_a_bullet() -> None:
    text = 'Ok: Remind me.\nBook it. "Call me," she said. (Send it.)\n- Buy milk\n* Noted\n1. Book'
    assert entity_names(text) == []


def test_a_name_opening_a_sentence_is_still_an_entity() -> None:
    assert entity_names("Alice went home.") == ["Alice"]
    assert entity_names("Caroline said she would come.") == ["Caroline"]
    assert entity_names("Berlin is lovely. Beijing was hot.") == ["Berlin", "Beijing"]
    assert entity_names("Melanie: see you at Thanksgiving!") == ["Melanie", "Thanksgiving"]
    assert entity_names("Thanksgiving was fun.") == ["Thanksgiving"]


def test_an_everyday_word_is_a_name_where_no_sentence_starts() -> None:
    assert entity_names("I read Nature every week.") == ["Nature"]
    assert entity_names("Best Buy has a sale.") == ["Best Buy"]  # it leads a longer name
    assert "Big" in entity_names("Carrie married Mr. Big.")  # a title's period ends nothing


def test_contractions_and_interjections_are_no_entities() -> None:
    assert entity_names("They've met Zoe. We'll see. Haven't you?") == ["Zoe"]
    assert entity_names("Woah Joanna, yup!") == ["Joanna"]


def test_entity_extraction_is_bounded() -> None:
    many = " and ".join(f"Name{i}" for i in range(100))
    assert len(entity_names(many)) == 20
    assert entity_names("x " * 10_000 + "Zanzibar") == []  # beyond the scanned beginning


def test_role_speakers_are_no_entities() -> None:
    assert speaker_entity("user") is None and speaker_entity("Assistant") is None
    assert speaker_entity("Caroline") == "Caroline"


async def edges_of(memory: Memory) -> set[tuple[str, str, str]]:
    """(source, relation, target) with nodes written as label:name."""
    async with memory.db.read() as conn:
        rows = await conn.execute(
            text(
                """
                SELECT s.label || ':' || s.name AS source, e.relation,
                       t.label || ':' || t.name AS target
                FROM edges e JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id
                WHERE e.namespace = :ns
                """
            ),
            {"ns": memory.namespace},
        )
        return {(r.source, r.relation, r.target) for r in rows}


async def count(memory: Memory, sql: str, **params: Any) -> int:
    async with memory.db.read() as conn:
        return int(await conn.scalar(text(sql), {"ns": memory.namespace, **params}) or 0)


async def test_turns_are_chained_across_batches_and_link_their_entities(memory: Memory) -> None:
    first = await memory.raw.store("s1", "Caroline", "I met Melanie at the Louvre.")
    other = await memory.raw.store("s2", "Melanie", "Different session entirely.")
    batch = await memory.raw.store_many(
        [
            RawDialogueInput("s1", "Melanie", "The Louvre was packed!"),
            RawDialogueInput("s1", "user", "and then?"),
        ]
    )
    second, third = batch
    edges = await edges_of(memory)
    turn = {t.id: f"Turn:{t.id}" for t in (first, other, second, third)}
    assert (turn[first.id], "NEXT", turn[second.id]) in edges  # across batches
    assert (turn[second.id], "NEXT", turn[third.id]) in edges  # within a batch
    assert not any(e[0] == turn[first.id] and e[2] == turn[other.id] for e in edges)
    assert (turn[first.id], "SPOKEN_BY", "Entity:Caroline") in edges
    assert (turn[first.id], "MENTIONS", "Entity:Melanie") in edges
    assert (turn[first.id], "MENTIONS", "Entity:Louvre") in edges
    assert (turn[second.id], "MENTIONS", "Entity:Louvre") in edges  # one Louvre node, shared
    assert (turn[other.id], "SPOKEN_BY", "Entity:Melanie") in edges
    assert not any(e[1] == "SPOKEN_BY" and e[0] == turn[third.id] for e in edges)  # "user"
    node = await memory.graph.node_by_name("Turn", str(first.id))
    assert (
        node is not None
        and node.raw_id == first.id
        and node.properties
        == {
            "auto": True,
            "sessionId": "s1",
        }
    )
    louvre = await memory.graph.node_by_name("Entity", "Louvre")
    assert louvre is not None
    neighbours = await memory.graph.neighbors(louvre.id, depth=1, direction="IN")
    assert {n.node.raw_id for n in neighbours} == {first.id, second.id}


async def test_insights_link_their_sources_and_entities(memory: Memory) -> None:
    turn = await memory.raw.store("s", "Caroline", "I adopted a dog named Oscar.")
    insight = await memory.insights.add("Caroline adopted Oscar, a dog.", [turn.id])
    edges = await edges_of(memory)
    assert (f"Insight:{insight.id}", "DERIVED_FROM", f"Turn:{turn.id}") in edges
    assert (f"Insight:{insight.id}", "MENTIONS", "Entity:Caroline") in edges
    assert (f"Insight:{insight.id}", "MENTIONS", "Entity:Oscar") in edges


async def test_erasure_takes_the_automatic_graph_with_it(memory: Memory) -> None:
    await memory.raw.store("keep", "Caroline", "I met Zoe in Lisbon.")
    gone = await memory.raw.store("forget", "Melanie", "Secret trip to Reykjavik with Zoe.")
    insight = await memory.insights.add("Oslo is cold.")
    manual = await memory.graph.add_node("Note", "kept", raw_id=gone.id)

    await memory.forget_session("forget")
    assert await memory.graph.node_by_name("Turn", str(gone.id)) is None
    assert await memory.graph.node_by_name("Entity", "Reykjavik") is None  # only it named it
    assert await memory.graph.node_by_name("Entity", "Melanie") is None
    assert await memory.graph.node_by_name("Entity", "Zoe") is not None  # still named by "keep"
    kept = await memory.graph.get_node(manual.id)
    assert kept is not None and kept.raw_id is None  # a client's node stays, detached

    assert await memory.insights.delete(insight.id)
    assert await memory.graph.node_by_name("Insight", str(insight.id)) is None
    assert await memory.graph.node_by_name("Entity", "Oslo") is None


async def test_the_automatic_graph_can_be_switched_off(memory: Memory) -> None:
    quiet = Memory(memory.db, memory.settings.with_overrides(auto_graph=False))
    await quiet.raw.store("s", "Caroline", "Hello Melanie")
    await quiet.insights.add("Melanie likes Rome")
    assert await count(memory, "SELECT count(*) FROM nodes WHERE namespace = :ns") == 0
