"""Two texts in the same words: the wording test of a duplicate, without a model.

Words are compared as the text leg indexes them (the namespace's text search configuration:
stemmed, stop words out), less the words that change no fact: hedges ("really",
"definitely") and the preambles an extractor puts before a fact ("User mentioned that",
"Note:"). Names must also come in the same order, so "Carol called Dan" and "Dan called
Carol" (the same words) stay two facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gql_memory.memory.graph.autograph import NOT_NAMES, entity_names

# Words that change no fact: hedges, intensifiers, and the words of preambles.
SOFT_WORDS = frozenset(
    """
    really definitely certainly truly actually basically genuinely absolutely totally very
    quite pretty so also too still indeed honestly seriously surely apparently obviously
    clearly probably presumably reportedly evidently literally
    user users mentioned mention mentions noted note notes remember remembers reminder said
    says told stated shared reported fyi fact
    """.split()
)
# What an extractor writes before a fact; taken off before a fact is read (facts.py).
PREAMBLE = re.compile(
    r"^(?:(?:note|remember|reminder|fyi|fact|update|memory|worth remembering|worth noting|"
    r"good to know|important|for the record)\s*[:\-–]\s*"
    r"|remember(?:\sthat)?\s"
    r"|(?:the\s)?user\s(?:mentioned|said|says|noted|stated|shared|reported|told me|"
    r"mentions|explained|indicated)(?:\sthat)?\s"
    r"|(?:it\sis\sworth\snoting|keep\sin\smind)\sthat\s)",
    re.IGNORECASE,
)
USER_NAMES = frozenset({"User", "The User"})
USER = re.compile(r"\b(?:I|I'm|I’m|I've|I’ve|my|me|mine|myself|users?)\b", re.IGNORECASE)
# Hedges and intensifiers between words ("Quinn is actually based in York"): taken out of a
# statement before a fact is read (facts.py).
HEDGE = re.compile(
    r"\s(?:really|definitely|certainly|truly|actually|basically|genuinely|absolutely|totally|"
    r"apparently|obviously|clearly|probably|presumably|reportedly|evidently|literally|"
    r"indeed|honestly|seriously|surely|also|still)(?=\s)",
    re.IGNORECASE,
)
# Capitalised words that name a time, not a person or a place: "Every August Eve goes
# camping" and "Eve goes camping every August" name Eve alone.
CALENDAR = frozenset(
    """
    January February March April May June July August September October November December
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday Mondays Tuesdays Wednesdays
    Thursdays Fridays Saturdays Sundays Christmas Easter Every
    """.split()
)


def strip_preamble(text: str) -> str:
    """The statement without the preambles before it (any number of them)."""
    while (match := PREAMBLE.match(text)) is not None and match.end() < len(text):
        text = text[match.end() :]
    return text[:1].upper() + text[1:] if text else text


def without_hedges(text: str) -> str:
    return HEDGE.sub("", text)


def names_in_order(text: str) -> tuple[str, ...]:
    """The words of the names a text mentions, in order, without case (the user and the
    words of time left out)."""
    found: list[str] = []
    for name in entity_names(strip_preamble(text.strip())):
        if name in USER_NAMES:
            continue
        found += [w.casefold() for w in name.split() if w not in CALENDAR and w not in NOT_NAMES]
    return tuple(found)


@dataclass(frozen=True)
class Wording:
    """A text's words for comparison: its lexemes less the soft ones, and its names."""

    words: frozenset[str]
    names: tuple[str, ...]
    cased: bool  # written with capitals: its names can be told (not "in summer tomas cycles")
    # about the user ("I", "my", "the user"): the user is no name, and "user" a soft word
    about_user: bool = False

    @classmethod
    def of(cls, text: str, lexemes: Iterable[str], soft_lexemes: frozenset[str]) -> Wording:
        return cls(
            frozenset(lexemes) - soft_lexemes,
            names_in_order(text),
            text != text.casefold(),
            USER.search(strip_preamble(text.strip())) is not None,
        )

    def same_names(self, other: Wording) -> bool:
        """The same names; with two or more, in the same order ("Carol called Dan" is not
        "Dan called Carol"). A text in lower case alone tells no names: not compared."""
        if self.about_user != other.about_user:
            return False
        if not (self.cased and other.cased):
            return True
        if set(self.names) != set(other.names):
            return False
        return len(set(self.names)) < 2 or _firsts(self.names) == _firsts(other.names)

    def same_as(self, other: Wording) -> bool:
        """The same words and names: a restatement. Two words at least, so that a lone word
        never stands for a fact."""
        return len(self.words) >= 2 and self.words == other.words and self.same_names(other)


def _firsts(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))
