"""The document embedded for a raw turn (memory/turn_embedding.py): the context goes to a
short exchange only, when the recipe says so."""

from __future__ import annotations

from gql_memory.embeddings.windows import EstimatedTokens
from gql_memory.memory.turn_embedding import TurnRecipe, turn_document

TOKENS = EstimatedTokens(512)  # one token per 3 bytes
QUESTION = "user: Did you go to the lake?"
REPLY = "assistant: Yes, it was amazing!"
LONG_ANSWER = "assistant: " + " ".join(f"Step {i}: stir the sauce slowly." for i in range(40))
FACT = "user: By the way, I quit smoking last month."


def test_a_short_reply_after_a_short_turn_carries_its_context() -> None:
    for recipe in (TurnRecipe(96, short_only=False), TurnRecipe(96, short_only=True)):
        assert turn_document(QUESTION, REPLY, TOKENS, recipe) == f"{QUESTION}\n{REPLY}"


def test_short_only_embeds_a_turn_after_a_long_one_alone() -> None:
    assert TOKENS.count_tokens(LONG_ANSWER) > 96
    everywhere = turn_document(LONG_ANSWER, FACT, TOKENS, TurnRecipe(96, short_only=False))
    assert everywhere.endswith(f"\n{FACT}") and everywhere != FACT  # a fragment of the answer
    assert turn_document(LONG_ANSWER, FACT, TOKENS, TurnRecipe(96, short_only=True)) == FACT


def test_short_only_embeds_a_long_turn_alone() -> None:
    recipe = TurnRecipe(96, short_only=True)
    assert turn_document(QUESTION, LONG_ANSWER, TOKENS, recipe) == LONG_ANSWER
    assert turn_document(
        QUESTION, LONG_ANSWER, TOKENS, TurnRecipe(96, short_only=False)
    ).startswith(QUESTION)


def test_no_context_without_a_previous_turn_or_a_budget() -> None:
    assert turn_document(None, REPLY, TOKENS, TurnRecipe(96, short_only=True)) == REPLY
    assert turn_document(QUESTION, REPLY, TOKENS, TurnRecipe(0)) == REPLY
    assert TurnRecipe(0) == TurnRecipe(0, pooled_alone=True, short_only=False)  # all alone


def test_the_recipe_is_recorded_and_read_back() -> None:
    recipe = TurnRecipe(96, short_only=True)
    assert TurnRecipe.from_json(recipe.as_json()) == recipe
    assert "both are at most 96 tokens long" in recipe.describe()
    # a signature recorded before short_only existed meant context for every turn
    old = TurnRecipe.from_json({"context_tokens": 96, "pooled_alone": False})
    assert old == TurnRecipe(96, short_only=False)
