"""Hybrid search: DBSF and RRF against hand-computed examples, OR semantics, text-search
config, graph propagation, bounded boosts (property-based), explanations, and a fixed number
of SQL round trips."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import text as sql

from gql_memory import ValidationError
from gql_memory.config import Settings
from gql_memory.db import Database
from gql_memory.memory import Memory
from gql_memory.memory.search.boosts import bounded_boost
from gql_memory.memory.search.fusion import dbsf, rrf, standardized
from gql_memory.memory.search.legs_sql import legs_sql
from gql_memory.memory.search.types import Fusion, MemoryLayer, SearchWeights, When
from tests.conftest import openai_settings, truncate_all
from tests.fake_openai import FakeOpenAI


@pytest.fixture
async def controlled(db: Database, settings: Settings, fake_openai: FakeOpenAI) -> Memory:
    """Services whose embeddings are the fake server's known vectors."""
    await truncate_all(db)
    fake_openai.reset()
    return Memory(db, openai_settings(settings, fake_openai))


async def add_at_angle(memory: Memory, fake: FakeOpenAI, content: str, angle: float) -> int:
    fake.set_vector(content, [math.cos(angle), math.sin(angle)])
    return (await memory.insights.add(content)).id


async def test_rrf_matches_a_hand_computed_example(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_vector("alpha beta", [1.0, 0.0])
    a = await add_at_angle(controlled, fake_openai, "alpha only", 0.1)  # vector 1, text 2
    b = await add_at_angle(controlled, fake_openai, "alpha and beta", 0.2)  # vector 2, text 1
    c = await add_at_angle(controlled, fake_openai, "gamma", 0.3)  # vector 3, no text
    hits = await controlled.search(
        "alpha beta", top_k=3, weights=SearchWeights(0.7, 0.3), fusion="RRF"
    )
    assert [h.id for h in hits] == [a, b, c]
    assert all(h.fusion is Fusion.RRF and h.fused_score == h.rrf_score for h in hits)
    expected = {
        a: 0.7 / 61 + 0.3 / 62,
        b: 0.7 / 62 + 0.3 / 61,
        c: 0.7 / 63,
    }
    for hit in hits:
        assert hit.rrf_score == pytest.approx(expected[hit.id])
        assert hit.final_score == pytest.approx(expected[hit.id])  # no session refs: no boost
    by_id = {h.id: h for h in hits}
    assert (by_id[a].vector_rank, by_id[a].text_rank) == (1, 2)
    assert (by_id[b].vector_rank, by_id[b].text_rank) == (2, 1)
    assert (by_id[c].vector_rank, by_id[c].text_rank) == (3, None)
    assert by_id[a].vector_score == pytest.approx(math.cos(0.1))
    assert by_id[b].text_score > by_id[a].text_score  # two lexemes covered beat one


async def test_dbsf_matches_a_hand_computed_example(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    """The default fusion: each leg's scores standardized over its candidates, summed."""
    fake_openai.set_vector("alpha beta", [1.0, 0.0])
    a = await add_at_angle(controlled, fake_openai, "alpha only", 0.1)
    b = await add_at_angle(controlled, fake_openai, "alpha and beta", 0.6)
    c = await add_at_angle(controlled, fake_openai, "gamma", 1.2)
    hits = {h.id: h for h in await controlled.search("alpha beta", top_k=3)}
    vector = {i: hits[i].vector_score for i in (a, b, c)}
    text = {i: hits[i].text_score for i in (a, b)}
    assert vector[a] == pytest.approx(math.cos(0.1)) and hits[c].text_score is None
    z_vector = dict(zip(vector, standardized(list(vector.values())), strict=True))
    z_text = dict(zip(text, standardized(list(text.values())), strict=True))
    for i in (a, b, c):
        expected = 0.5 * z_vector[i] + 0.5 * z_text.get(i, 0.0)
        assert hits[i].fusion is Fusion.DBSF
        assert hits[i].fused_score == pytest.approx(expected)
        assert hits[i].final_score == pytest.approx(expected)  # no graph, no session refs
    # b covers both query words: its text lead outweighs a's small vector lead
    assert hits[b].final_score > hits[a].final_score > hits[c].final_score


def test_dbsf_formula() -> None:
    assert standardized([]) == []
    assert standardized([0.3, 0.3]) == [1.0, 1.0]  # no spread: every candidate alike
    assert standardized([1.0, 3.0]) == [0.0, 2.0]  # (x - min) / population stdev (1.0)
    fused = dbsf({"vector": {1: 1.0, 2: 3.0}, "text": {2: 5.0}}, SearchWeights(0.5, 0.5))
    assert fused == {1: 0.0, 2: pytest.approx(0.5 * 2.0 + 0.5 * 1.0)}


async def test_graph_propagation_lends_to_the_next_turn(memory: Memory) -> None:
    """A turn that answers the one before it ("Yes, it was amazing!") is reached through
    the NEXT edge of the turn that names the subject."""
    await memory.raw.store("chat", "Mel", "How was the pottery workshop on Saturday?")
    answer = await memory.raw.store("chat", "Caroline", "Honestly, it changed my life.")
    for i in range(12):
        await memory.raw.store("other", "Mel", f"note {i} on groceries and errands")
    text_only = SearchWeights(vector=0, text=1)
    hits = await memory.search("pottery workshop", layers=["RAW"], weights=text_only)
    by_id = {h.id: h for h in hits}
    question = hits[0]
    assert question.graph_boost == 0.0 or question.graph_source is not None
    lent = by_id[answer.id]
    assert lent.text_rank is None and lent.vector_rank is None  # found by the graph alone
    assert lent.graph_source == (MemoryLayer.RAW, question.id)
    assert lent.graph_boost == pytest.approx(0.25 * (question.fused_score + question.session_share))
    assert lent.final_score == pytest.approx(lent.graph_boost)
    assert lent.content == "Caroline: Honestly, it changed my life."
    off = Memory(memory.db, memory.settings.with_overrides(graph_propagation=0.0), "default")
    assert answer.id not in {
        h.id for h in await off.search("pottery workshop", layers=["RAW"], weights=text_only)
    }


async def test_a_long_turn_neither_lends_nor_borrows(memory: Memory) -> None:
    """GQL_MEMORY_GRAPH_PROPAGATION_MAX_CHARS: a long answer has its own subject. It takes no
    loan from the question before it, and the short reply after it takes none from it."""
    question = await memory.raw.store("chat", "user", "How do I repot a pottery cactus?")
    long_answer = "Repotting a pottery cactus takes a few steps. " + "Water it lightly. " * 40
    answer = await memory.raw.store("chat", "assistant", long_answer)
    thanks = await memory.raw.store("chat", "user", "Thanks, will do!")
    for i in range(12):
        await memory.raw.store("other", "user", f"note {i} on groceries and errands")
    assert len(long_answer) > memory.settings.graph_propagation_max_chars == 600
    text_only = SearchWeights(vector=0, text=1)
    hits = {h.id: h for h in await memory.search("pottery", layers=["RAW"], weights=text_only)}
    assert hits[question.id].graph_boost == hits[answer.id].graph_boost == 0.0
    assert thanks.id not in hits
    every = memory.settings.with_overrides(graph_propagation_max_chars=0)
    lent = {
        h.id: h
        for h in await Memory(memory.db, every).search("pottery", layers=["RAW"], weights=text_only)
    }
    assert lent[thanks.id].graph_source == (MemoryLayer.RAW, answer.id)
    assert lent[question.id].graph_boost > 0 or lent[answer.id].graph_boost > 0


async def test_weights_are_configurable_per_call(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_vector("alpha beta", [1.0, 0.0])
    a = await add_at_angle(controlled, fake_openai, "alpha only", 0.1)
    b = await add_at_angle(controlled, fake_openai, "alpha and beta", 0.2)
    text_only = await controlled.search("alpha beta", weights=SearchWeights(vector=0, text=1))
    assert [h.id for h in text_only] == [b, a]
    assert all(h.vector_rank is None for h in text_only)
    vector_only = await controlled.search("alpha beta", weights=SearchWeights(vector=1, text=0))
    assert [h.id for h in vector_only] == [a, b]
    assert len(fake_openai.requests) == 2 + 1  # two adds, one query (text-only embeds none)
    with pytest.raises(ValidationError, match="must not both be 0"):
        await controlled.search("x", weights=SearchWeights(0, 0))


async def test_a_leg_left_out_of_the_weights_takes_the_operators_weight(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_vector("alpha beta", [1.0, 0.0])
    a = await add_at_angle(controlled, fake_openai, "alpha only", 0.1)  # vector 1, text 2
    b = await add_at_angle(controlled, fake_openai, "alpha and beta", 0.2)  # vector 2, text 1
    operator = controlled.settings.with_overrides(search_vector_weight=0.9, search_text_weight=0.2)
    tuned = Memory(controlled.db, operator)
    text_given = await tuned.search("alpha beta", weights=SearchWeights(text=0.1), fusion="RRF")
    assert {h.id: h.rrf_score for h in text_given} == {
        a: pytest.approx(0.9 / 61 + 0.1 / 62),
        b: pytest.approx(0.9 / 62 + 0.1 / 61),
    }
    vector_given = await tuned.search("alpha beta", weights=SearchWeights(vector=0.4), fusion="RRF")
    assert {h.id: h.rrf_score for h in vector_given} == {
        a: pytest.approx(0.4 / 61 + 0.2 / 62),
        b: pytest.approx(0.4 / 62 + 0.2 / 61),
    }


async def test_long_questions_hit_with_any_lexeme(memory: Memory) -> None:
    target = await memory.insights.add("Caroline adopted a golden retriever puppy")
    await memory.insights.add("Melanie painted a lake at sunrise")
    hits = await memory.search(
        "What kind of dog did Caroline end up adopting after all those months?",
        weights=SearchWeights(vector=0, text=1),
    )
    assert hits[0].id == target.id and hits[0].text_rank == 1


async def test_a_query_without_lexemes_contributes_nothing(memory: Memory) -> None:
    await memory.insights.add("something")
    text_only = SearchWeights(vector=0, text=1)
    assert await memory.search("the of and", weights=text_only) == []
    assert await memory.search("?!", weights=text_only) == []


async def test_text_search_configuration_is_a_setting(db: Database, settings: Settings) -> None:
    await truncate_all(db)
    german = Memory(db, settings.with_overrides(text_search_config="german"))
    english = Memory(db, settings)
    text_only = SearchWeights(vector=0, text=1)
    # The seeds' system indexed German with the English configuration and lost the hit:
    await english.insights.add("Die alten Häuser am Fluss wurden renoviert")
    assert await english.search("Haus", weights=text_only) == []
    # With the configuration set to German, the plural is stemmed to the query's lexeme.
    indexed = await german.insights.add("Die alten Häuser am Fluss wurden renoviert")
    assert [h.id for h in await german.search("Haus", weights=text_only)] == [indexed.id]


async def test_raw_and_episode_layers(memory: Memory) -> None:
    await memory.raw.store("chat-1", "Caroline", "I went to the support group yesterday")
    await memory.episodes.store("find a support group", 0.9, "ask at the community centre")
    await memory.insights.add("unrelated insight about gardening")
    hits = await memory.search("support group", layers=["RAW", "EPISODE"], top_k=5)
    assert {h.layer for h in hits} == {MemoryLayer.RAW, MemoryLayer.EPISODE}
    raw = next(h for h in hits if h.layer is MemoryLayer.RAW)
    assert raw.session_id == "chat-1"
    assert raw.content == "Caroline: I went to the support group yesterday"
    episode = next(h for h in hits if h.layer is MemoryLayer.EPISODE)
    assert episode.content == "find a support group — ask at the community centre"


async def test_session_and_causal_boosts_with_the_cap(
    controlled: Memory, fake_openai: FakeOpenAI
) -> None:
    fake_openai.set_vector("q", [1.0, 0.0])
    ids = {name: await add_at_angle(controlled, fake_openai, name, 0.5) for name in "abcde"}
    graph = controlled.graph
    nodes = {n: (await graph.add_node("F", n, insight_id=ids[n])).id for n in "abcde"}
    await graph.add_edge(nodes["a"], nodes["b"], "r")  # b: 1 hop from a
    await graph.add_edge(nodes["c"], nodes["b"], "r")  # c: 2 hops from a
    await graph.add_edge(nodes["d"], nodes["a"], "r")  # d: 1 hop from a, and referred to
    await controlled.working.add(
        "focus on a", 1.0, session_id="s", ref_kind="NODE", ref_id=nodes["a"]
    )
    await controlled.working.add(
        "d matters", 1.0, session_id="s", ref_kind="INSIGHT", ref_id=ids["d"]
    )
    hits = {h.id: h for h in await controlled.search("q", session_id="s")}
    a, b, c, d, e = (hits[ids[n]] for n in "abcde")
    # a's item saw one event since (the second add): attention 0.85, so 0.15 x 0.85
    assert (a.session_boost, a.causal_boost) == (pytest.approx(0.15 * 0.85), 0.10)
    assert (b.session_boost, b.causal_boost) == (0.0, 0.10)
    assert (c.session_boost, c.causal_boost) == (0.0, 0.05)
    assert (d.session_boost, d.causal_boost) == (pytest.approx(0.15), 0.10)
    assert (e.session_boost, e.causal_boost, e.boost) == (0.0, 0.0, 0.0)
    assert a.boost == pytest.approx(0.20) and d.boost == pytest.approx(0.20)  # 0.25 capped
    for hit in hits.values():
        assert hit.final_score == pytest.approx(
            (hit.fused_score + hit.graph_boost) * (1 + hit.boost)
        )
    assert [h.id for h in await controlled.search("q", session_id="s", top_k=2)] == sorted(
        [ids["a"], ids["d"]]
    )
    unboosted = await controlled.search("q", session_id="another")
    assert all(h.boost == 0 for h in unboosted)


@pytest.mark.parametrize(
    ("switched_off", "session_boost", "causal_boost"),
    [(None, 0.15, 0.10), ("session_boost", 0.0, 0.10), ("causal_boost", 0.15, 0.0)],
)
async def test_each_boost_has_its_rollback_switch(
    db: Database,
    settings: Settings,
    fake_openai: FakeOpenAI,
    switched_off: str | None,
    session_boost: float,
    causal_boost: float,
) -> None:
    """ADR-002's switches (GQL_MEMORY_SESSION_BOOST / GQL_MEMORY_CAUSAL_BOOST=false): the
    boost switched off is 0 on every hit, the other one unchanged."""
    await truncate_all(db)
    fake_openai.reset()
    changes = {switched_off: False} if switched_off else {}
    memory = Memory(db, openai_settings(settings.with_overrides(**changes), fake_openai))
    fake_openai.set_vector("q", [1.0, 0.0])
    focus = await add_at_angle(memory, fake_openai, "focus", 0.5)
    near = await add_at_angle(memory, fake_openai, "near", 0.5)
    focus_node = await memory.graph.add_node("F", "focus", insight_id=focus)
    near_node = await memory.graph.add_node("F", "near", insight_id=near)
    await memory.graph.add_edge(focus_node.id, near_node.id, "r")
    await memory.working.add("on focus", 1.0, session_id="s", ref_kind="NODE", ref_id=focus_node.id)
    hits = {h.id: h for h in await memory.search("q", session_id="s")}
    assert hits[focus].session_boost == pytest.approx(session_boost)
    assert hits[near].causal_boost == pytest.approx(causal_boost)
    for hit in hits.values():
        if switched_off:
            assert getattr(hit, switched_off) == 0.0
        assert hit.boost == pytest.approx(min(hit.session_boost + hit.causal_boost, 0.20))
        assert hit.final_score == pytest.approx(
            (hit.fused_score + hit.graph_boost) * (1 + hit.boost)
        )


@given(
    session=st.floats(min_value=0, max_value=10, allow_nan=False),
    causal=st.floats(min_value=0, max_value=10, allow_nan=False),
    rrf_score=st.floats(min_value=0, max_value=1, allow_nan=False),
)
def test_boost_never_exceeds_the_cap(session: float, causal: float, rrf_score: float) -> None:
    boost = bounded_boost(session, causal, 0.20)
    assert 0 <= boost <= 0.20
    assert boost == min(session + causal, 0.20)
    assert rrf_score * (1 + boost) <= rrf_score * 1.2 + 1e-12


@hypothesis_settings(
    max_examples=25,
    deadline=None,
    # the test empties the database itself at the start of every example
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(attentions=st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=6))
async def test_boosts_in_real_searches_respect_the_cap(
    memory: Memory, attentions: list[float]
) -> None:
    await truncate_all(memory.db)
    ids = [(await memory.insights.add(f"note {i} about tea")).id for i in range(len(attentions))]
    previous = None
    for i, (insight_id, attention) in enumerate(zip(ids, attentions, strict=True)):
        node = await memory.graph.add_node("N", str(i), insight_id=insight_id)
        if previous is not None:
            await memory.graph.add_edge(previous, node.id, "next")
        previous = node.id
        await memory.working.add(
            f"ref {i}", attention, session_id="p", ref_kind="INSIGHT", ref_id=insight_id
        )
    for hit in await memory.search("tea", session_id="p", top_k=10):
        assert hit.boost <= 0.20 + 1e-12
        assert hit.boost == pytest.approx(min(hit.session_boost + hit.causal_boost, 0.20))
        assert hit.final_score == pytest.approx(
            (hit.fused_score + hit.graph_boost) * (1 + hit.boost)
        )


def test_rrf_formula() -> None:
    assert rrf({"vector": 1, "text": 3}, SearchWeights(0.7, 0.3), 60) == pytest.approx(
        0.7 / 61 + 0.3 / 63
    )


@pytest.mark.parametrize("top_k", [1, 10, 100])
async def test_a_search_is_three_round_trips_whatever_top_k_four_with_raw_turns(
    memory: Memory, statements: list[str], top_k: int
) -> None:
    for i in range(30):
        await memory.insights.add(f"insight {i} about tea and travel")
        await memory.raw.store("s", "user", f"turn {i} about tea")
    node = await memory.graph.add_node("N", "n", insight_id=1)
    await memory.working.add("ref", session_id="s", ref_kind="NODE", ref_id=node.id)
    statements.clear()
    hits = await memory.search("tea travel", top_k=top_k, session_id="s", layers=["INSIGHT", "RAW"])
    assert hits
    queries = [s for s in statements if not s.strip().upper().startswith(("BEGIN", "COMMIT"))]
    assert len(queries) <= 4, queries  # the fourth: the raw candidates' sessions and speakers
    statements.clear()
    assert await memory.search("tea travel", top_k=top_k, session_id="s", layers=["INSIGHT"])
    queries = [s for s in statements if not s.strip().upper().startswith(("BEGIN", "COMMIT"))]
    assert len(queries) <= 3, queries


@pytest.mark.parametrize(
    "query",
    [
        "O'Brien's \\ back\\slash",
        "a & b | !c (d) <-> e:*",
        "'''",
        "tsquery: 'x' & \"y\"",
        "😀 ümlaut",
    ],
)
async def test_queries_with_tsquery_syntax_are_taken_literally(memory: Memory, query: str) -> None:
    await memory.insights.add("O'Brien keeps a backslash and a tsquery operator & here")
    hits = await memory.search(query, weights=SearchWeights(vector=0.5, text=0.5))
    assert isinstance(hits, list)


async def test_common_lexemes_bound_the_work_but_every_lexeme_matches(memory: Memory) -> None:
    from sqlalchemy import text as sql

    for i in range(300):
        await memory.insights.add(f"common words everywhere number {i}")
    target = await memory.insights.add("common words everywhere and one zanzibar")
    async with memory.db.write() as conn:
        await conn.execute(sql("ANALYZE insights"))
    text_only = SearchWeights(vector=0, text=1)
    hits = await memory.search("common zanzibar words", weights=text_only, top_k=5)
    assert hits[0].id == target.id and hits[0].text_rank == 1  # 3 lexemes covered, not 2
    assert len(hits) == 5  # rows matching only common lexemes still match (OR semantics)
    broad = await memory.search("common words", weights=text_only, top_k=5)
    assert len(broad) == 5


async def test_a_word_nobody_used_does_not_silence_the_others(memory: Memory) -> None:
    target = await memory.insights.add("The user prefers dark mode in every editor")
    for i in range(20):
        await memory.insights.add(f"unrelated note {i}")
    text_only = SearchWeights(vector=0, text=1)
    for question in ("dark mode", "dark mode for the user", "which theme does the user want"):
        hits = await memory.search(question, weights=text_only)
        assert hits and hits[0].id == target.id, question


def plan_nodes(plan: dict) -> list[dict]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    nodes, stack = [], [plan]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


async def test_a_small_namespace_is_ranked_whole_without_walking(
    memory: Memory, settings: Settings
) -> None:
    """Below the budget the text leg ranks the rows that contain any query lexeme, straight
    from the namespace's rows; the walk through rare lexemes is for too many (not run)."""
    for i in range(30):
        await memory.raw.store("s", "user", f"turn {i} about {'tea' if i % 3 == 0 else 'coffee'}")
    statement = legs_sql([MemoryLayer.RAW], When(False, False, False), vector=False, text=True)
    params = {
        "ns": memory.namespace,
        "query": "green tea",
        "tsconfig": settings.text_search_config,
        "vector": None,
        "n": 40,
        "max_matches": settings.text_search_max_matches,
        "count_cap": 5001,
        "rerank": 160,
        "sample_rows": 250,
        "bm25_k1": settings.text_search_bm25_k1,
        "bm25_b": settings.text_search_bm25_b,
        "exact_rows": settings.vector_exact_max_rows,
        "as_of": None,
        "since": None,
        "until": None,
    }
    async with memory.db.read() as conn:
        [found] = (
            await conn.execute(sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement), params)
        ).one()
        hits = (await conn.execute(sql(statement), params)).all()
    nodes = plan_nodes(json.loads(found)[0]["Plan"] if isinstance(found, str) else found[0]["Plan"])
    by_name = {n["Subplan Name"]: n for n in nodes if "Subplan Name" in n}
    assert by_name["CTE sample_terms_raw"]["Actual Rows"] == 10  # the tea turns, not all 30
    assert by_name["CTE candidates_raw"]["Actual Rows"] == 0  # no walk
    assert len(hits) == 10 and all(h.leg == "text" for h in hits)
