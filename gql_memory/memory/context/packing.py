"""Packing candidate items into a token budget: the part of context assembly without SQL.

Budget split: each non-empty section first gets a share of the budget (config.CONTEXT_SHARES:
working memory 30%, search hits 40%, episodes 15%, graph facts 15%, renormalised over the
sections that have candidates) and takes whole items in priority order while they fit,
skipping those that do not. Then whatever is left over, from any section, is handed out in
a second pass in section order (working, search, episodes, graph): skipped items are taken
whole if they fit, or cut to the remaining budget with a marker when at least
CONTEXT_MIN_TRUNCATED_TOKENS remain. So a small budget favours every section a little, a
section without candidates gives its share away, and nothing is wasted.

The text is ``header\\n- item\\n- item`` per section, sections joined by a blank line. The
cost of each part is counted with the tokenizer; the final text is counted again and items
are dropped from the end until it fits, so the total never exceeds the budget even for a
tokenizer whose counts are not additive.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from gql_memory.config import (
    CONTEXT_MIN_TRUNCATED_TOKENS,
    CONTEXT_SHARES,
    CONTEXT_TRUNCATION_MARKER,
)
from gql_memory.memory.context.tokens import Tokenizer

SECTION_SEPARATOR = "\n\n"
BULLET = "- "


class SectionKind(enum.Enum):
    """A part of the assembled context, in the order it appears in the text."""

    WORKING = "WORKING"
    SEARCH = "SEARCH"
    EPISODES = "EPISODES"
    GRAPH = "GRAPH"


class ItemKind(enum.Enum):
    """What an item of the context is."""

    WORKING_MEMORY = "WORKING_MEMORY"
    INSIGHT = "INSIGHT"
    EPISODE = "EPISODE"
    RAW = "RAW"
    FACT = "FACT"


@dataclass(frozen=True)
class Candidate:
    """An item a section would like to include, with why."""

    kind: ItemKind
    id: str
    content: str
    reason: str


@dataclass(frozen=True)
class Item:
    """An item in the context: its text as pasted, its token cost (with its line break)."""

    kind: ItemKind
    id: str
    content: str
    tokens: int
    reason: str
    truncated: bool = False


@dataclass(frozen=True)
class Section:
    """One section: its header, why it is there, what it costs in total, and its items."""

    kind: SectionKind
    header: str
    reason: str
    tokens: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class SectionCandidates:
    """What a section offers: a header, a one-line purpose, and candidates best first."""

    kind: SectionKind
    header: str
    purpose: str
    candidates: list[Candidate]


@dataclass
class _Fill:
    source: SectionCandidates
    share: int
    taken: dict[int, Item] = field(default_factory=dict)
    header_tokens: int = 0

    @property
    def used(self) -> int:
        return (self.header_tokens if self.taken else 0) + sum(
            i.tokens for i in self.taken.values()
        )


# After whitespace is collapsed, no token of the estimator spans more than 8 characters, so
# a line of (budget + 2) x 8 characters is already over any budget: longer content is cut
# there before anything is counted, and packing costs the same for 1 KB or 15 MB.
CHARS_PER_TOKEN_BOUND = 8
_WORDS = re.compile(r"\S+")


def one_line(text: str, max_chars: int | None = None) -> str:
    """Whitespace (newlines included) collapsed to single spaces: one item, one line; at most
    about ``max_chars`` characters (read up to there, not further)."""
    if max_chars is None or len(text) <= max_chars:
        return " ".join(text.split())
    # Collapsing never lengthens text: a prefix twice the bound nearly always collapses to
    # more than the bound (split and join run in C); only whitespace-heavy text reads on.
    collapsed = " ".join(text[: 2 * max_chars].split())
    if len(collapsed) >= max_chars:
        return collapsed[:max_chars].rstrip(" ")
    words, length = [], 0
    for match in _WORDS.finditer(text):
        word = match.group()
        words.append(word[: max_chars - length])
        length += len(words[-1]) + 1
        if length >= max_chars:
            break
    return " ".join(words)


class Packer:
    """Packs sections of candidates into ``max_tokens`` with one tokenizer."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._line_break = tokenizer.count("\n")
        self._separator = tokenizer.count(SECTION_SEPARATOR)

    def pack(self, offers: list[SectionCandidates], max_tokens: int) -> tuple[str, list[Section]]:
        """(text, sections) with ``tokenizer.count(text) <= max_tokens``."""
        text, sections, _ = self.pack_counted(offers, max_tokens)
        return text, sections

    def pack_counted(
        self, offers: list[SectionCandidates], max_tokens: int
    ) -> tuple[str, list[Section], int]:
        """(text, sections, tokens of the text) with tokens <= ``max_tokens``."""
        max_chars = (max_tokens + 2) * CHARS_PER_TOKEN_BOUND
        offers = [o for o in offers if o.candidates]
        available = max_tokens - self._separator * max(len(offers) - 1, 0)
        weights = {o.kind: CONTEXT_SHARES[o.kind.value] for o in offers}
        total_weight = sum(weights.values()) or 1.0
        fills = [
            _Fill(o, int(available * weights[o.kind] / total_weight), {}, self._count(o.header))
            for o in offers
        ]
        lines: dict[tuple[int, int], tuple[str, int | None]] = {}  # (fill, index): line, cost
        for number, fill in enumerate(fills):  # first pass: whole items within the share
            for index, candidate in enumerate(fill.source.candidates):
                room = fill.share - fill.used
                lines[number, index] = self._take(
                    fill, index, candidate, room, max_chars, truncate=False
                )
        for number, fill in enumerate(fills):  # second pass: the leftover, truncating
            for index, candidate in enumerate(fill.source.candidates):
                if index not in fill.taken:
                    left = available - sum(f.used for f in fills)
                    self._take(
                        fill,
                        index,
                        candidate,
                        left,
                        max_chars,
                        truncate=True,
                        known=lines[number, index],
                    )
        sections = [self._section(f) for f in fills if f.taken]
        return self._fit(sections, max_tokens)

    def _count(self, text: str) -> int:
        return self.tokenizer.count(text)

    def _take(
        self,
        fill: _Fill,
        index: int,
        candidate: Candidate,
        room: int,
        max_chars: int,
        *,
        truncate: bool,
        known: tuple[str, int | None] | None = None,
    ) -> tuple[str, int | None]:
        """Take the candidate whole if it fits ``room``, else (``truncate``) cut to fit;
        returns its line and cost (None: not counted, it cannot fit) for a later pass."""
        if not fill.taken:
            room -= fill.header_tokens
        line, cost = known or (BULLET + one_line(candidate.content, max_chars), None)
        if cost is None and not self._surely_over(len(line) + 1, room):
            cost = self._count("\n" + line)
        if cost is not None and cost <= room:
            fill.taken[index] = Item(candidate.kind, candidate.id, line, cost, candidate.reason)
            return line, cost
        if not truncate or room < CONTEXT_MIN_TRUNCATED_TOKENS:
            return line, cost
        cut = self._truncated(line, room)
        if cut is not None:
            cut_cost = self._count("\n" + cut)
            fill.taken[index] = Item(
                candidate.kind, candidate.id, cut, cut_cost, candidate.reason, truncated=True
            )
        return line, cost

    def _surely_over(self, chars: int, room: int) -> bool:
        """True when text of ``chars`` characters cannot fit ``room`` tokens, known without
        counting (from the tokenizer's most characters per token, if it declares one)."""
        most = getattr(self.tokenizer, "max_chars_per_token", None)
        return most is not None and chars > (room + 1) * most

    def _truncated(self, line: str, room: int) -> str | None:
        """The line cut to ``room`` tokens, ending in the truncation marker (or None).

        The longest cut that fits, found by bisecting the token budget: a cut's cost grows
        with its budget, and a non-additive tokenizer may need a smaller budget than ``room``
        less the marker. One cut when the tokenizer is additive, else O(log room) cuts, each
        linear in the prefix it keeps."""
        low = self._count(BULLET) + 1
        high = room - self._line_break - self._count(CONTEXT_TRUNCATION_MARKER)
        if high < low:
            return None
        # An additive tokenizer (the estimator) fits at the largest budget: one cut, no search.
        cut = self.tokenizer.truncate(line, high).rstrip() + CONTEXT_TRUNCATION_MARKER
        if self._count("\n" + cut) <= room:
            return cut if len(cut) > len(BULLET) + len(CONTEXT_TRUNCATION_MARKER) else None
        best = None
        high -= 1
        while low <= high:
            budget = (low + high) // 2
            cut = self.tokenizer.truncate(line, budget).rstrip() + CONTEXT_TRUNCATION_MARKER
            if self._count("\n" + cut) <= room:
                if len(cut) > len(BULLET) + len(CONTEXT_TRUNCATION_MARKER):
                    best = cut
                low = budget + 1
            else:
                high = budget - 1
        return best

    def _section(self, fill: _Fill) -> Section:
        items = tuple(fill.taken[i] for i in sorted(fill.taken))
        offered = len(fill.source.candidates)
        cut = sum(1 for i in items if i.truncated)
        reason = (
            f"{fill.source.purpose}; {len(items)} of {offered} candidates "
            f"({cut} truncated), first-pass share {fill.share} tokens"
        )
        return Section(fill.source.kind, fill.source.header, reason, fill.used, items)

    def _fit(self, sections: list[Section], max_tokens: int) -> tuple[str, list[Section], int]:
        """Render; drop trailing items while a non-additive tokenizer overshoots the budget."""
        while True:
            text = SECTION_SEPARATOR.join(
                s.header + "".join("\n" + i.content for i in s.items) for s in sections
            )
            tokens = self._count(text)
            if tokens <= max_tokens or not sections:
                return text, sections, tokens
            last = sections[-1]
            if len(last.items) <= 1:
                sections = sections[:-1]
            else:
                kept = last.items[:-1]
                tokens = self._count(last.header) + sum(i.tokens for i in kept)
                sections = [
                    *sections[:-1],
                    Section(last.kind, last.header, last.reason, tokens, kept),
                ]
