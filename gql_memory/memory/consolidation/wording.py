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

from gql_memory.memory.graph.autograph import entity_names

# Words that change no fact: hedges, intensifiers, and the words of preambles.
SOFT_WORDS = frozenset(
    """
    really definitely certainly truly actually basically genuinely absolutely totally very
    quite pretty so also too still indeed honestly seriously surely
    user users mentioned mention mentions noted note notes remember remembers reminder said
    says told stated shared reported fyi
    """.split()
)
# What an extractor writes before a fact; taken off before a fact is read (facts.py).
PREAMBLE = re.compile(
    r"^(?:(?:note|remember|reminder|fyi|fact|update|memory)\s*[:\-–]\s*"
    r"|remember(?:\sthat)?\s"
    r"|(?:the\s)?user\s(?:mentioned|said|says|noted|stated|shared|reported|told me|"
    r"mentions|explained|indicated)(?:\sthat)?\s"
    r"|(?:it\sis\sworth\snoting|keep\sin\smind)\sthat\s)",
    re.IGNORECASE,
)
USER_NAMES = frozenset({"User", "The User"})


def strip_preamble(text: str) -> str:
    """The statement without the preambles before it (any number of them)."""
    while (match := PREAMBLE.match(text)) is not None and match.end() < len(text):
        text = text[match.end() :]
    return text[:1].upper() + text[1:] if text else text


def names_in_order(text: str) -> tuple[str, ...]:
    """The names a text mentions, in order, compared without case."""
    return tuple(
        name.casefold()
        for name in entity_names(strip_preamble(text.strip()))
        if name not in USER_NAMES
    )


@dataclass(frozen=True)
class Wording:
    """A text's words for comparison: its lexemes less the soft ones, and its names."""

    words: frozenset[str]
    names: tuple[str, ...]

    @classmethod
    def of(cls, text: str, lexemes: Iterable[str], soft_lexemes: frozenset[str]) -> Wording:
        return cls(frozenset(lexemes) - soft_lexemes, names_in_order(text))

    def same_as(self, other: Wording) -> bool:
        """The same words and names: a restatement. Two words at least, so that a lone word
        never stands for a fact."""
        return len(self.words) >= 2 and self.words == other.words and self.names == other.names
