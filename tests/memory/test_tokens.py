"""The default token estimator: BPE-shaped counts, and truncation that never overshoots."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gql_memory.memory.tokens import DEFAULT_TOKENIZER, EstimatingTokenizer, Tokenizer


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
