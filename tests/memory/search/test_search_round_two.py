"""Retrieval, round two (issue 30): a raw turn's vector pools the turn in context and alone,
the best session lifts its turns (sessionShare), the speaker a query names is boosted
(speakerBoost), and every hit carries a calibrated relevance that minRelevance filters on."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from sqlalchemy import text as sql

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.embeddings import TextRole
from gql_memory.memory import Memory
from gql_memory.memory.search.boosts import named_speakers
from gql_memory.memory.search.relevance import (
    CALIBRATIONS,
    Calibration,
    Logistic,
    calibration_for,
    context_floor,
    relevance,
    require_min_relevance,
    search_floor,
)
from gql_memory.memory.search.types import SearchWeights
from gql_memory.memory.turn_embedding import turn_text


def by_query(bias: float, weights: dict[str, float], floor: float) -> Calibration:
    """A calibration whose relevance is its query part alone (every hit as likely as the
    best among the search's)."""
    return Calibration(query=Logistic(bias, weights), hit=Logistic(0.0, {}), floor=floor)


async def stored_vector(memory: Memory, turn_id: int) -> list[float]:
    async with memory.db.read() as conn:
        value = await conn.scalar(
            sql("SELECT embedding::text FROM raw_dialogue WHERE id = :id"), {"id": turn_id}
        )
    return [float(x) for x in json.loads(value)]


async def test_with_embed_raw_alone_a_turn_is_embedded_in_context_and_alone(
    memory: Memory,
) -> None:
    pooled = Memory(memory.db, memory.settings.with_overrides(embed_raw_alone=True))
    first = await pooled.raw.store("s", "mel", "How was the pottery workshop?")
    second = await pooled.raw.store("s", "caroline", "Honestly, it changed my life.")
    embed = memory.embedder.embed
    [alone] = await embed(
        [turn_text("mel", "How was the pottery workshop?")], role=TextRole.DOCUMENT
    )
    # the first turn of a session has no context: embedded once, as itself
    assert await stored_vector(memory, first.id) == pytest.approx(alone, abs=1e-6)
    document = "mel: How was the pottery workshop?\ncaroline: Honestly, it changed my life."
    in_context, by_itself = await embed(
        [document, "caroline: Honestly, it changed my life."], role=TextRole.DOCUMENT
    )
    expected = [(a + b) / 2 for a, b in zip(in_context, by_itself, strict=True)]
    assert await stored_vector(memory, second.id) == pytest.approx(expected, abs=1e-6)

    assert memory.settings.embed_raw_alone is False  # the default: the document only
    third = await memory.raw.store("t", "mel", "How was the pottery workshop?")
    fourth = await memory.raw.store("t", "caroline", "Honestly, it changed my life.")
    assert await stored_vector(memory, third.id) == pytest.approx(alone, abs=1e-6)
    assert await stored_vector(memory, fourth.id) == pytest.approx(in_context, abs=1e-6)


async def test_the_best_candidate_of_a_session_lifts_its_other_turns(memory: Memory) -> None:
    await memory.raw.store("trip", "mel", "We went camping by the lake last weekend")
    await memory.raw.store("trip", "caroline", "That sounds lovely, what did you cook?")
    await memory.raw.store("trip", "mel", "Fish over the fire, camping food is the best")
    await memory.raw.store("work", "mel", "The quarterly report on camping gear sales is due")
    hits = await memory.search("camping by the lake", top_k=50, session_id=None, layers=["RAW"])
    assert hits
    share = memory.settings.search_session_share
    # the trip's second camping turn is lifted by its session's best, the work turn is not
    trip = [h for h in hits if h.session_id == "trip" and (h.vector_rank or h.text_rank)]
    assert len(trip) >= 2 and all(h.session_share > 0 for h in trip)
    best: dict[str | None, float] = {}
    for hit in hits:
        if hit.vector_rank is not None or hit.text_rank is not None:  # a candidate of a leg
            best[hit.session_id] = max(best.get(hit.session_id, 0.0), hit.fused_score)
    for hit in hits:
        if hit.session_id in best and (hit.vector_rank or hit.text_rank):
            assert hit.session_share == pytest.approx(share * best[hit.session_id])
            expected = (hit.fused_score + hit.session_share + hit.graph_boost) * (1 + hit.boost)
            assert hit.final_score == pytest.approx(expected * (1 + hit.speaker_boost))
    off = Memory(memory.db, memory.settings.with_overrides(search_session_share=0.0))
    assert all(
        h.session_share == 0.0
        for h in await off.search("camping by the lake", top_k=50, session_id=None, layers=["RAW"])
    )


def test_the_speakers_a_query_names() -> None:
    speakers = {"Caroline", "Melanie", "user", "I"}
    assert named_speakers("What does caroline paint?", speakers) == {"Caroline"}
    assert named_speakers("Did Caroline and Melanie meet?", speakers) == {"Caroline", "Melanie"}
    assert named_speakers("What did the user say?", speakers) == {"user"}
    assert named_speakers("Carolines are rare; I think so", speakers) == set()  # whole words


def test_a_question_in_the_first_person_names_the_asker() -> None:
    """GQL_MEMORY_SEARCH_ASKER_SPEAKER: "I" is the asker, "you" or "we" is not the asker
    alone, and a speaker named by name comes first."""
    agent = {"user", "assistant"}
    assert named_speakers("What brand of shampoo do I use?", agent, "user") == {"user"}
    assert named_speakers("How old was I when my grandma gave me it?", agent, "User") == {"user"}
    assert named_speakers("I'm sure I told you", agent, "user") == set()  # you: both sides
    assert named_speakers("What did we discuss last week?", agent, "user") == set()
    assert named_speakers("Where is the nearest museum?", agent, "user") == set()  # nobody
    assert named_speakers("Tell me about Paris", agent, "user") == set()  # asks the assistant
    assert named_speakers("Where in the US did I live?", agent, "user") == {"user"}
    assert named_speakers("Did I tell us?", agent, "user") == set()
    assert named_speakers("What brand of shampoo do I use?", agent, "") == set()  # off
    assert named_speakers("Where did I go?", {"Caroline", "Mel"}, "user") == set()  # no asker
    assert named_speakers("What did Caroline tell me?", {"Caroline", "user"}, "user") == {
        "Caroline"
    }
    assert named_speakers("Did I see it, in mine?", {"USER", "bot"}, "user") == {"USER"}


async def test_the_asker_s_own_turns_are_boosted(memory: Memory) -> None:
    """An assistant's long reply full of the question's words does not bury the user's
    short turn that holds the answer: the question is in the first person."""
    for chatter in ("How was the hike?", "Great, the view was worth it.", "We use the bus."):
        await memory.raw.store("t", "user", chatter)
    said = await memory.raw.store("s", "user", "I use the Aesop brand of shampoo now.")
    reply = await memory.raw.store(
        "s",
        "assistant",
        "Choosing a shampoo brand: a good shampoo brand suits your hair; use a shampoo brand "
        "without sulfates, and use it twice a week.",
    )
    text_only = SearchWeights(vector=0, text=1)
    question = "What brand of shampoo do I use?"
    # the speaker alone: no session share, no loans between the two
    settings = memory.settings.with_overrides(search_session_share=0.0, graph_propagation=0.0)
    memory = Memory(memory.db, settings)
    hits = await memory.search(question, session_id=None, layers=["RAW"], weights=text_only)
    assert [h.id for h in hits[:2]] == [said.id, reply.id]
    assert hits[0].speaker_boost == 1.0 and hits[1].speaker_boost == 0.0
    off = Memory(memory.db, settings.with_overrides(search_asker_speaker=""))
    plain = await off.search(question, session_id=None, layers=["RAW"], weights=text_only)
    assert [h.id for h in plain[:2]] == [reply.id, said.id]
    asked_of_you = await memory.search(
        "Which shampoo brand did you suggest I use?",
        session_id=None,
        layers=["RAW"],
        weights=text_only,
    )
    assert all(h.speaker_boost == 0.0 for h in asked_of_you)


async def test_the_speaker_a_query_names_is_boosted(memory: Memory) -> None:
    own = await memory.raw.store("a", "Caroline", "I paint abstract landscapes at night")
    other = await memory.raw.store("a", "Mel", "Caroline, your paintings of landscapes are great")
    text_only = SearchWeights(vector=0, text=1)
    hits = await memory.search(
        "What does Caroline paint? landscapes", session_id=None, layers=["RAW"], weights=text_only
    )
    by_id = {h.id: h for h in hits}
    assert by_id[own.id].speaker_boost == memory.settings.search_speaker_boost == 1.0
    assert by_id[other.id].speaker_boost == 0.0
    both = await memory.search(
        "Caroline and Mel on landscapes", session_id=None, layers=["RAW"], weights=text_only
    )
    assert all(h.speaker_boost == 0.0 for h in both)  # two speakers named: no side taken
    off = Memory(memory.db, memory.settings.with_overrides(search_speaker_boost=0.0))
    plain = await off.search(
        "What does Caroline paint? landscapes", session_id=None, layers=["RAW"], weights=text_only
    )
    assert all(h.speaker_boost == 0.0 for h in plain)
    unboosted = {h.id: h for h in plain}
    assert by_id[own.id].final_score == pytest.approx(2.0 * unboosted[own.id].final_score)
    assert by_id[other.id].final_score == pytest.approx(unboosted[other.id].final_score)


def test_calibrations_are_per_model() -> None:
    e5 = CALIBRATIONS["multilingual-e5-small"]
    assert calibration_for("multilingual-e5-small") is e5
    assert calibration_for("intfloat/multilingual-e5-small") is e5  # a served model's name
    assert calibration_for("hashed-ngrams-v2") is None


def test_relevance_is_a_probability_that_grows_with_every_signal() -> None:
    e5 = CALIBRATIONS["multilingual-e5-small"]
    values = [
        relevance(cosine, text, best, e5)
        for cosine, text, best in [(0.80, 0, 0.80), (0.85, 0, 0.85), (0.85, 4, 0.85), (0.9, 4, 0.9)]
    ]
    assert all(0.0 <= v <= 1.0 for v in values)
    assert values == sorted(values) and values[0] < values[-1]
    assert relevance(0.95, 20.0, 0.95, e5) > 0.9
    assert relevance(0.70, 0.0, 0.70, e5) < 0.001
    # a weak best match for the query lowers every hit's relevance: the memory lacks the answer
    assert relevance(0.80, 2.0, 0.80, e5) < relevance(0.80, 2.0, 0.88, e5)
    # without a calibration: the similarity and the text signal, combined
    assert relevance(0.5, 0.0, 0.5, None) == pytest.approx(0.5)
    assert relevance(0.5, 5.0, 0.5, None) == pytest.approx(0.75)
    assert relevance(None, None, None, None) == 0.0


def test_the_floor_is_the_calls_else_the_operators_else_for_context_the_models(
    settings: Settings,
) -> None:
    e5 = CALIBRATIONS["multilingual-e5-small"]
    assert search_floor(settings) == 0.0  # a search ranks: every hit unless asked
    assert context_floor(settings, e5) == e5.floor == 0.005
    assert context_floor(settings, None) == 0.0
    operator = settings.with_overrides(search_min_relevance=0.1, context_min_relevance=0.2)
    assert search_floor(operator) == 0.1 and context_floor(operator, e5) == 0.2
    assert require_min_relevance(None, 0.1) == 0.1
    assert require_min_relevance(0.3, 0.1) == 0.3
    assert require_min_relevance(0.0, 0.1) == 0.0
    assert str(require_min_relevance(-0.0, 0.1)) == "0.0"
    for bad in (-0.1, 1.5, math.nan, math.inf, True, "0.5"):
        with pytest.raises(ValidationError, match="minRelevance"):
            require_min_relevance(bad, 0.0)


async def test_every_hit_has_a_relevance_and_min_relevance_filters(memory: Memory) -> None:
    for i in range(6):
        await memory.insights.add(f"note {i}: the user prefers green tea in the morning")
    await memory.insights.add("the deployment runs on Kubernetes")
    hits = await memory.search("green tea", top_k=10, min_relevance=0.0)
    assert len(hits) == 7
    assert all(0.0 <= h.relevance <= 1.0 and h.cosine is not None for h in hits)
    tea = [h for h in hits if "tea" in h.content]
    other = next(h for h in hits if "Kubernetes" in h.content)
    assert min(h.relevance for h in tea) > other.relevance
    floor = (min(h.relevance for h in tea) + other.relevance) / 2
    kept = await memory.search("green tea", top_k=10, min_relevance=floor)
    assert [h.id for h in kept] == [h.id for h in hits if h.relevance >= floor]
    assert {h.id for h in kept} == {h.id for h in tea}
    assert await memory.search("green tea", top_k=10, min_relevance=1.0) == []
    with pytest.raises(ValidationError, match="minRelevance"):
        await memory.search("green tea", min_relevance=2.0)


async def test_context_floors_by_the_models_calibration_search_by_the_setting(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """context's default floor is the model's own; search's is the operator's (0: all)."""
    await memory.insights.add("the user prefers green tea")
    await memory.insights.add("the deployment runs on Kubernetes")
    plain = await memory.search("green tea", top_k=10)
    assert len(plain) == 2  # the hash embedder has no calibration, and search has no floor
    tea, other = (next(h for h in plain if word in h.content) for word in ("tea", "Kubernetes"))
    assert tea.cosine is not None and other.cosine is not None and tea.cosine > other.cosine
    middle = (tea.cosine + other.cosine) / 2  # a calibration whose 0.5 lies between the two
    steep = by_query(-60.0 * middle, {"cosine": 60.0}, 0.5)
    monkeypatch.setitem(CALIBRATIONS, memory.embedder.model, steep)
    searched = await memory.search("green tea", top_k=10)
    assert [h.id for h in searched] == [h.id for h in plain]  # search: every hit, as ranked
    assert searched[0].relevance == pytest.approx(relevance(tea.cosine, 0.0, 0.0, steep))
    context = await memory.context("green tea", session_id="s")
    assert context.min_relevance == 0.5 and context.below_relevance == 1
    assert "green tea" in context.text and "Kubernetes" not in context.text
    operator = Memory(memory.db, memory.settings.with_overrides(search_min_relevance=0.5))
    assert [h.id for h in await operator.search("green tea", top_k=10)] == [tea.id]


async def test_a_hit_is_rated_against_the_whole_namespace_whichever_layers_are_searched(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The best cosine a relevance reads is the namespace's, not the searched layers': the
    same insight gets the same relevance searched alone or beside the raw turns, a layer
    not searched still counts, and without a vector leg nothing is read."""
    insight = await memory.insights.add("the user travels to Berlin in May")
    await memory.raw.store("s", "user", "book a trip to Berlin for May")
    # a calibration that reads only the best cosine
    by_best = by_query(-1.0, {"best_cosine": 2.0}, 0.0)
    monkeypatch.setitem(CALIBRATIONS, memory.embedder.model, by_best)
    query = "book a trip to Berlin"
    both = await memory.search(query, layers=["INSIGHT", "RAW"], top_k=10)
    alone = await memory.search(query, layers=["INSIGHT"], top_k=10)
    best = max(h.cosine for h in both if h.cosine is not None)
    [rated] = [h for h in alone if h.id == insight.id]
    assert rated.cosine is not None and rated.cosine < best  # the turn is nearer than it
    assert rated.relevance == pytest.approx(relevance(rated.cosine, None, best, by_best))
    assert rated.relevance == next(h for h in both if h.id == insight.id).relevance
    # within a period read from the query: rated against the whole namespace too (here an
    # insight, not searched, is the query's nearest memory)
    asked = "what did the user book yesterday in Berlin"
    nearest = await memory.insights.add(asked)
    reference = datetime(2026, 6, 10, 12, tzinfo=UTC)
    await memory.raw.store("t", "user", "booked Berlin", timestamp=datetime(2026, 6, 9, tzinfo=UTC))
    [top] = await memory.search(asked, layers=["INSIGHT"], top_k=1)
    assert top.id == nearest.id and top.cosine is not None
    timed = await memory.search(
        asked, layers=["RAW"], top_k=10, reference_time=reference, interpret_time=True
    )
    assert timed and all(h.interpreted_period is not None for h in timed)
    rated_timed = [h for h in timed if h.cosine is not None]
    assert rated_timed and all(
        h.relevance == pytest.approx(relevance(h.cosine, None, top.cosine, by_best))
        for h in rated_timed
    )
    text_only = await memory.search(
        query, layers=["INSIGHT"], top_k=10, weights=SearchWeights(vector=0, text=1)
    )
    assert text_only and all(h.cosine is None for h in text_only)


async def test_context_leaves_out_hits_below_the_floor_and_says_how_many(memory: Memory) -> None:
    for i in range(3):
        await memory.insights.add(f"note {i}: the user prefers green tea in the morning")
    await memory.insights.add("the deployment runs on Kubernetes")
    hits = await memory.search("green tea", top_k=20, session_id="s", min_relevance=0.0)
    tea = min(h.relevance for h in hits if "tea" in h.content)
    other = max(h.relevance for h in hits if "Kubernetes" in h.content)
    assert tea > other
    everything = await memory.context("green tea", session_id="s", min_relevance=0.0)
    assert everything.below_relevance == 0 and "Kubernetes" in everything.text
    floor = (tea + other) / 2
    relevant = await memory.context("green tea", session_id="s", min_relevance=floor)
    assert relevant.below_relevance == 1 and relevant.min_relevance == floor
    assert "Kubernetes" not in relevant.text and "green tea" in relevant.text
    assert any("1 memories left out" in note for note in relevant.notes)
    nothing = await memory.context("green tea", session_id="s", min_relevance=1.0)
    assert nothing.below_relevance == len(hits)
    assert all(not s.items for s in nothing.sections) and "tea" not in nothing.text
    with pytest.raises(ValidationError, match="minRelevance"):
        await memory.context("green tea", min_relevance=-1.0)


async def test_context_leaves_out_lessons_below_the_floor_too(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lesson similar enough for the episodes' threshold is added only if relevant enough:
    a context of a memory with nothing on the query adds no lesson either."""
    await memory.episodes.store("book a trip to Berlin", 0.9, "book the train, not the plane")
    found = await memory.context("book a trip to Berlin", session_id="s", min_relevance=0.0)
    assert "book the train" in found.text and found.below_relevance == 0
    # relevance from the cosine alone, 0.5 above any cosine: nothing is relevant
    strict = by_query(-90.0, {"cosine": 60.0}, 0.5)
    monkeypatch.setitem(CALIBRATIONS, memory.embedder.model, strict)
    nothing = await memory.context("book a trip to Berlin", session_id="s")
    assert nothing.min_relevance == 0.5 and nothing.below_relevance == 1
    assert "book the train" not in nothing.text and not nothing.sections


async def test_a_hit_working_memory_refers_to_is_not_counted_as_left_out(memory: Memory) -> None:
    tea = await memory.insights.add("the user prefers green tea")
    await memory.insights.add("the user drinks green tea at nine")
    await memory.working.add(
        "green tea, see the insight", session_id="s", ref_kind="INSIGHT", ref_id=tea.id
    )
    hits = await memory.search("green tea", top_k=20, session_id="s", min_relevance=0.0)
    assert len(hits) == 2
    nothing = await memory.context("green tea", session_id="s", min_relevance=1.0)
    # the referred insight is never repeated as a search item: only the other is left out
    assert nothing.below_relevance == 1
    assert "see the insight" in nothing.text and "at nine" not in nothing.text
