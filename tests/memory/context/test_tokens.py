"""The default token estimator: BPE-shaped counts, and truncation that never overshoots."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from gql_memory.memory.context.tokens import (
    DEFAULT_TOKENIZER,
    VECTORIZED_ABOVE_CHARS,
    EstimatingTokenizer,
    Tokenizer,
    count_by_pieces,
    truncate_by_pieces,
)


def test_the_default_is_the_dependency_free_estimator() -> None:
    assert isinstance(DEFAULT_TOKENIZER, EstimatingTokenizer)
    assert isinstance(DEFAULT_TOKENIZER, Tokenizer)


def test_common_shapes_count_like_a_bpe_tokenizer() -> None:
    count = DEFAULT_TOKENIZER.count
    assert count("") == 0
    # (cl100k_base counts in the comments)
    assert count("the user likes dark mode") == 5  # 5: one token per common word
    assert count("internationalization") == 4  # 2: long words split (conservatively)
    assert count("MIN_CANDIDATES") == 6  # 5: upper-case identifiers split more
    assert count("20250929") == 3  # 3: digits in groups of three
    assert count("# " + "-" * 80) == 11  # 2: a run of one mark merges (here: per 8)
    assert count("记忆服务") == 4  # 4: one per non-ASCII character
    assert count("a\n\nb") == 4  # 3


@given(st.text(max_size=300), st.integers(min_value=0, max_value=120))
def test_truncation_fits_and_is_a_prefix(text: str, budget: int) -> None:
    cut = DEFAULT_TOKENIZER.truncate(text, budget)
    assert text.startswith(cut)
    assert DEFAULT_TOKENIZER.count(cut) <= budget
    if DEFAULT_TOKENIZER.count(text) <= budget:
        assert cut == text


@given(st.text(max_size=200), st.text(max_size=200))
def test_joining_on_a_line_break_never_costs_more_than_the_parts(a: str, b: str) -> None:
    count = DEFAULT_TOKENIZER.count
    assert count(a + "\n" + b) <= count(a) + count("\n" + b)


MIXED = st.lists(
    st.sampled_from(
        ["a", "Z", "QQ", "7", "-", "=", ".", " ", "  ", "\n", "\t", "\u00a0", "é", "记", "\x1c"]
    ),
    max_size=200,
).map("".join)


@given(st.one_of(st.text(max_size=300), MIXED))
def test_the_fast_count_is_the_sum_over_the_pieces(text: str) -> None:
    """count() runs its sums in the regex engine; it must equal the definition exactly."""
    assert DEFAULT_TOKENIZER.count(text) == count_by_pieces(text)


@given(st.one_of(st.text(max_size=300), MIXED))
def test_no_line_has_more_characters_per_token_than_declared(text: str) -> None:
    """The packer skips counting lines longer than this bound allows (packing.Packer); its
    lines have their whitespace collapsed (a long blank run alone would cost one token)."""
    line = " ".join(text.split())
    bound = EstimatingTokenizer.max_chars_per_token
    assert len(line) <= (DEFAULT_TOKENIZER.count(line) + 1) * bound


def test_a_blob_is_cut_to_exactly_fit_after_a_mark() -> None:
    """A blob cut where the budget ends, after a piece of a fractional cost (a mark costs
    0.8): the cut rounds down, never over the budget."""
    for budget in range(1, 200):
        cut = DEFAULT_TOKENIZER.truncate("- " + "x" * 10_000, budget)
        assert DEFAULT_TOKENIZER.count(cut) <= budget
        assert DEFAULT_TOKENIZER.count(cut + "xxxxxx") > budget


def test_long_texts_are_counted_and_cut_the_same_vectorized() -> None:
    """Above VECTORIZED_ABOVE_CHARS, pieces are found and priced with numpy: the same count
    and the same cut as the definition, on every kind of piece (seeded random texts)."""
    rng = random.Random(20261123)
    parts = ["a", "A", "AB", "1", "--", "  ", "\n", "é", "记", "==", ".", "\u00a0", "\x1c"]
    parts += ["x" * 70, "Q" * 80, "7" * 100, "-" * 20, "\u3000", "\x00"]
    for _ in range(40):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1500, 4000)))
        assert len(text) > VECTORIZED_ABOVE_CHARS
        total = count_by_pieces(text)
        assert DEFAULT_TOKENIZER.count(text) == total
        for budget in (0, 1, rng.randint(2, total), total, total + 1):
            cut = DEFAULT_TOKENIZER.truncate(text, budget)
            assert text.startswith(cut)
            assert count_by_pieces(cut) <= budget or cut == ""
            assert cut == truncate_by_pieces(text, budget)
