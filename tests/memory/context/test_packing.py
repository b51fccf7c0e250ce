"""Packing under a token budget, property-based: whatever the candidates and the tokenizer,
the text never exceeds the budget, items keep their order and costs are stated."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gql_memory.memory.context.packing import (
    Candidate,
    ItemKind,
    Packer,
    SectionCandidates,
    SectionKind,
)
from gql_memory.memory.context.tokens import DEFAULT_TOKENIZER, EstimatingTokenizer

texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=400
) | st.builds(
    lambda w, n: " ".join([w] * n), st.sampled_from(["tea", "Berlin,", "ÄÖÜ"]), st.integers(1, 600)
)


@st.composite
def offers(draw: st.DrawFn) -> list[SectionCandidates]:
    kinds = draw(st.lists(st.sampled_from(list(SectionKind)), unique=True, min_size=1))
    result = []
    for kind in sorted(kinds, key=list(SectionKind).index):
        contents = draw(st.lists(texts, max_size=12))
        candidates = [
            Candidate(ItemKind.INSIGHT, str(i), c, f"reason {i}") for i, c in enumerate(contents)
        ]
        result.append(SectionCandidates(kind, f"## {kind.value}", "purpose", candidates))
    return result


class LumpyTokenizer(EstimatingTokenizer):
    """Not additive at all: every 7th character of the whole text costs an extra token."""

    name = "lumpy"

    def count(self, text: str) -> int:
        return super().count(text) + math.ceil(len(text) / 7)

    def truncate(self, text: str, max_tokens: int) -> str:
        while text and self.count(text) > max_tokens:
            text = text[: len(text) * 3 // 4]
        return text


@hypothesis_settings(max_examples=300, deadline=None)
@given(sections=offers(), max_tokens=st.integers(min_value=1, max_value=2500))
def test_the_text_never_exceeds_the_budget(
    sections: list[SectionCandidates], max_tokens: int
) -> None:
    packer = Packer(DEFAULT_TOKENIZER)
    text, packed = packer.pack(sections, max_tokens)
    assert DEFAULT_TOKENIZER.count(text) <= max_tokens
    for section in packed:
        ids = [int(i.id) for i in section.items]
        assert ids == sorted(ids)  # priority order is kept
        assert section.items and section.tokens >= sum(i.tokens for i in section.items)
        for item in section.items:
            assert item.tokens == DEFAULT_TOKENIZER.count("\n" + item.content)
            assert "\n" not in item.content and item.reason
            assert not item.truncated or item.content.endswith("… [truncated]")


@hypothesis_settings(max_examples=150, deadline=None)
@given(sections=offers(), max_tokens=st.integers(min_value=1, max_value=2500))
def test_a_non_additive_tokenizer_still_stays_within_the_budget(
    sections: list[SectionCandidates], max_tokens: int
) -> None:
    tokenizer = LumpyTokenizer()
    text, _ = Packer(tokenizer).pack(sections, max_tokens)
    assert tokenizer.count(text) <= max_tokens


def offer(kind: SectionKind, *contents: str) -> SectionCandidates:
    candidates = [Candidate(ItemKind.INSIGHT, str(i), c, "r") for i, c in enumerate(contents)]
    return SectionCandidates(kind, f"## {kind.value}", "purpose", candidates)


def test_each_section_gets_its_share_first() -> None:
    many = [f"working memory item number {i} with some words" for i in range(50)]
    hits = [f"search hit number {i} with some words" for i in range(50)]
    _, packed = Packer(DEFAULT_TOKENIZER).pack(
        [offer(SectionKind.WORKING, *many), offer(SectionKind.SEARCH, *hits)], 400
    )
    working, search = packed
    # shares 0.30 : 0.40 renormalised -> 3/7 and 4/7 of the budget
    assert 0.35 < working.tokens / 400 < 0.5 and 0.5 < search.tokens / 400 < 0.65


def test_a_section_without_candidates_gives_its_share_away() -> None:
    many = [f"search hit number {i} with some words" for i in range(200)]
    text, [search] = Packer(DEFAULT_TOKENIZER).pack(
        [offer(SectionKind.WORKING), offer(SectionKind.SEARCH, *many)], 1000
    )
    assert search.tokens > 950 and DEFAULT_TOKENIZER.count(text) <= 1000


def test_leftover_goes_to_items_that_did_not_fit_their_share() -> None:
    big = "alpha " * 300  # ~300 tokens: more than the working share of 30% x 500
    text, [working, _] = Packer(DEFAULT_TOKENIZER).pack(
        [offer(SectionKind.WORKING, big), offer(SectionKind.SEARCH, "one short hit")], 500
    )
    assert not working.items[0].truncated  # taken whole in the second pass
    assert DEFAULT_TOKENIZER.count(text) <= 500


class MeteredTokenizer(EstimatingTokenizer):
    """Counts the characters every count() and truncate() call is handed."""

    name = "metered"

    def __init__(self) -> None:
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return super().count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        kept = super().truncate(text, max_tokens)
        self.chars += len(kept)  # it reads what it keeps (and one piece more)
        return kept


def pack_one_item(content: str, max_tokens: int) -> tuple[int, str]:
    tokenizer = MeteredTokenizer()
    working = SectionCandidates(
        SectionKind.WORKING,
        "## Working memory",
        "purpose",
        [Candidate(ItemKind.WORKING_MEMORY, "1", content, "reason")],
    )
    text, _ = Packer(tokenizer).pack([working], max_tokens)
    return tokenizer.chars, text


def test_packing_work_does_not_grow_with_the_item() -> None:
    """The reproducer: a 1 MB item without spaces at maxTokens 2000 re-scanned the whole text
    once per token of the budget. Now the work depends on the budget, not on the item."""
    for max_tokens in (2000, 8000):
        small, small_text = pack_one_item("x" * 1_000_000, max_tokens)
        large, large_text = pack_one_item("x" * 15_000_000, max_tokens)
        assert small == large  # 15x the item, the same work
        assert small < 40 * (max_tokens + 2) * 8  # a few dozen passes over the kept prefix
        assert small_text == large_text and "xxxx" in small_text  # cut inside the blob
        assert DEFAULT_TOKENIZER.count(small_text) <= max_tokens


def test_a_blob_without_spaces_is_truncated_not_dropped() -> None:
    tokenizer = EstimatingTokenizer()
    cut = tokenizer.truncate("a" * 10_000, 100)
    assert 0 < len(cut) <= 600 and tokenizer.count(cut) <= 100
    assert tokenizer.truncate("short words only", 2).rstrip() == "short words"  # words stay whole
