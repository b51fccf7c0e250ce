"""What a statement says, read without a model (consolidation/facts.py and wording.py)."""

from __future__ import annotations

import pytest

from gql_memory.memory.consolidation.facts import Fact, read_fact
from gql_memory.memory.consolidation.wording import Wording, names_in_order


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("Carol lives in Berlin.", ("carol", "residence", "berlin")),
        ("Carol moved to Munich.", ("carol", "residence", "munich")),
        ("Quinn is actually based in York.", ("quinn", "residence", "york")),
        ("User mentioned that Carol really enjoys hiking", ("carol", "likes", "hiking")),
        ("These days Felix's favourite food is ramen.", ("felix", "favourite food", "ramen")),
        ("Iris says their favorite color is green.", ("iris", "favourite colour", "green")),
        ("I live in Lisbon now.", ("user", "residence", "lisbon")),
        ("My sister lives in Porto.", ("user's sister", "residence", "porto")),
        ("Alice changed their phone number to 555-0163.", ("alice", "phone", "555-0163")),
        ("Rosa renamed their dog Biscuit.", ("rosa", "dog's name", "biscuit")),
        ("Dan left Acme and joined Globex.", ("dan", "employer", "globex")),
        ("The user is now in a relationship.", ("user", "relationship", "in relationship")),
        ("Kofi has an allergy to latex.", ("kofi", "allergic to", "latex")),
    ],
)
def test_a_plain_statement_reads_as_subject_attribute_and_value(
    text: str, fact: tuple[str, str, str]
) -> None:
    found = read_fact(text)
    assert found is not None and (found.subject, found.attribute, found.value) == fact


@pytest.mark.parametrize(
    "text",
    [
        "Where does Carol live?",
        "Carol lives in Berlin. She likes it there.",
        "The weather was lovely and we talked for hours about nothing in particular.",
    ],
)
def test_what_is_not_one_plain_statement_states_no_fact(text: str) -> None:
    assert read_fact(text) is None


def test_a_clause_before_the_verb_is_read_for_an_update_never_for_a_merge() -> None:
    fact = read_fact("Ines just had a birthday and is 37.")
    assert fact == Fact("ines", "age", "37", True) and not fact.whole


def test_names_are_people_and_places_not_words_of_time() -> None:
    assert names_in_order("Every August Eve goes camping.") == ("eve",)
    assert names_in_order("Eve goes camping every August.") == ("eve",)


def test_two_names_in_another_order_are_another_statement() -> None:
    words = frozenset({"carol", "call", "dan"})
    a = Wording(words, names_in_order("Carol called Dan."), cased=True)
    b = Wording(words, names_in_order("Dan called Carol."), cased=True)
    lower = Wording(words, names_in_order("dan called carol"), cased=False)
    assert not a.same_as(b)
    assert a.same_as(lower)  # a text in lower case tells no names
