"""Token counting for context budgets: a small interface and a fast, dependency-free estimator.

The estimator mimics how BPE tokenizers (cl100k-style) split text: a common word is one token
(its leading space included), longer or upper-case words split into pieces, digits go in
groups of three, each punctuation mark costs about one token and runs of one repeated mark
(``-----``) are merged, every newline is a token and non-ASCII characters count one each.
Calibrated against OpenAI's cl100k_base on prose, Python, GraphQL SDL, German design notes and
chat turns; measured on this repository's own text (``bench/token_estimate.py``, results in
docs/benchmarks-context.md) it overestimates by ~20% at the median, lies within 1.00x..1.45x
for 90% of snippets and rarely underestimates, so a budget in estimated tokens is a slightly
conservative budget in real ones; it costs ~0.14 ms per 1,000 characters. Plug in an exact
tokenizer (e.g. tiktoken) by implementing ``Tokenizer``.
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

# A word piece is ~6 letters; all-caps identifiers split every ~3; digits in groups of 3.
_WORD_CHARS = 6
_UPPER_WORD_CHARS = 3
_DIGIT_CHARS = 3
# A lone punctuation mark merges with a neighbour often enough to cost ~0.8 on average;
# a run of one repeated mark costs one token per 8 characters. Costs are summed in tenths
# of a token (integers: no floating-point drift) and rounded up once at the end.
_TENTHS = 10
_PUNCTUATION_TENTHS = 8
_REPEATED_MARK_CHARS = 8

# A piece longer than this is no word (base64, minified code): truncation may cut it.
_LONGEST_WORD_CHARS = 64

_PIECES = re.compile(r"[A-Za-z]+|[0-9]+|([^\sA-Za-z0-9])\1*|\s+")


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens and cuts text to a token budget."""

    name: str

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` with at most ``max_tokens`` tokens."""
        ...


def _tenths(piece: str) -> int:
    """The cost of one piece in tenths of a token."""
    first = piece[0]
    if first.isascii() and first.isalpha():
        per = _UPPER_WORD_CHARS if len(piece) > 1 and piece.isupper() else _WORD_CHARS
        return _TENTHS * -(-len(piece) // per)
    if first.isdigit() and first.isascii():
        return _TENTHS * -(-len(piece) // _DIGIT_CHARS)
    if first.isspace():
        if "\n" in piece:
            return _TENTHS * piece.count("\n")
        return 0 if len(piece) == 1 else _TENTHS  # a single space joins the next word
    if not first.isascii():
        return _TENTHS * len(piece)
    if len(piece) == 1:
        return _PUNCTUATION_TENTHS
    return _TENTHS * -(-len(piece) // _REPEATED_MARK_CHARS)


# The same sum as over the pieces, counted by the regex engine: a letter run of L costs
# ceil(L / 6) words, which is how many times [A-Za-z]{1,6} matches in it (all-caps runs are
# corrected, they are few); likewise digits; whitespace costs its newlines, plus one per
# run of 2+ blanks without one; non-ASCII characters one each; ASCII marks 0.8 alone and
# 1 per 8 in a run of one repeated mark. ~10x faster than a Python loop over the pieces
# (tests/memory/context/test_tokens.py checks both agree on any text).
_WORD_CHUNKS = re.compile(rf"[A-Za-z]{{1,{_WORD_CHARS}}}")
_CAPS_WORDS = re.compile(r"(?<![A-Za-z])[A-Z]{2,}(?![A-Za-z])")
_DIGIT_CHUNKS = re.compile(rf"[0-9]{{1,{_DIGIT_CHARS}}}")
_BLANK_RUNS = re.compile(r"(?<!\s)[^\S\n]{2,}(?!\s)")
_NON_ASCII = re.compile(r"[^\x00-\x7f\s]")
_MARKS = re.compile(r"[^\sA-Za-z0-9\x80-\U0010ffff]")
_MARK_RUNS = re.compile(r"([^\sA-Za-z0-9\x80-\U0010ffff])\1+")


def _total_tenths(text: str) -> int:
    words = len(_WORD_CHUNKS.findall(text))
    for caps in _CAPS_WORDS.finditer(text):
        length = len(caps.group())
        words += -(-length // _UPPER_WORD_CHARS) + (length // -_WORD_CHARS)
    marks = len(_MARKS.findall(text))
    runs = 0
    for run in _MARK_RUNS.finditer(text):
        marks -= len(run.group())
        runs += _TENTHS * -(-len(run.group()) // _REPEATED_MARK_CHARS)
    return (
        _TENTHS
        * (
            words
            + len(_DIGIT_CHUNKS.findall(text))
            + text.count("\n")
            + len(_BLANK_RUNS.findall(text))
            + len(_NON_ASCII.findall(text))
        )
        + _PUNCTUATION_TENTHS * marks
        + runs
    )


def count_by_pieces(text: str) -> int:
    """The estimate as defined: the sum over the pieces (the reference of the fast count)."""
    return _tokens(sum(_tenths(m.group()) for m in _PIECES.finditer(text)))


def truncate_by_pieces(text: str, max_tokens: int) -> str:
    """The cut as defined: piece by piece (the reference of the vectorized cut)."""
    used = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        cost = _tenths(piece)
        if _tokens(used + cost) > max_tokens:
            return _cut(text, match.start(), piece, cost, used, max_tokens)
        used += cost
    return text


def _tokens(tenths: int) -> int:
    return -(-tenths // _TENTHS)


def _cut(text: str, start: int, piece: str, cost: int, used: int, max_tokens: int) -> str:
    """``text`` cut before ``piece`` (at ``start``), the first piece over the budget; a piece
    longer than any word is cut inside, where the budget ends."""
    if len(piece) <= _LONGEST_WORD_CHARS:
        return text[:start]
    per_char = cost / len(piece)
    fits = max(int((max_tokens * _TENTHS - used) / per_char), 0)
    # rounding up to whole tokens may overshoot by one: at most one token's worth less
    while fits and _tokens(used + _tenths(piece[:fits])) > max_tokens:
        fits -= 1
    return text[: start + fits]


# --- the same pieces, vectorized, for long texts -----------------------------------------
# Above this many characters, pieces are found and priced with numpy (array passes in C,
# ~15x faster than the regex sums on adversarial text such as random alphanumerics, whose
# pieces are one or two characters each); below it the regex sums are cheaper.
VECTORIZED_ABOVE_CHARS = 4096
_LETTER, _DIGIT, _SPACE, _MARK, _OTHER = 0, 1, 2, 3, 4  # _OTHER: non-ASCII, not whitespace
_NON_ASCII_SPACES = np.array(
    [c for c in range(128, 0x3001) if chr(c).isspace()], dtype=np.uint32
)  # no code point above U+3000 is whitespace
_ASCII_CLASS = np.array(
    [
        _LETTER
        if chr(c).isalpha()
        else _DIGIT
        if chr(c).isdigit()
        else _SPACE
        if chr(c).isspace()
        else _MARK
        for c in range(128)
    ],
    dtype=np.int8,
)


def _pieces(text: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(start of each piece, its cost in tenths): _PIECES and _tenths, as array passes."""
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    ascii_ = points < 128
    kinds = np.where(ascii_, _ASCII_CLASS[np.minimum(points, 127)], _OTHER)
    kinds[~ascii_ & np.isin(points, _NON_ASCII_SPACES)] = _SPACE
    runs_of_one_char = (kinds == _MARK) | (kinds == _OTHER)
    new = np.ones(len(points), dtype=bool)
    new[1:] = (kinds[1:] != kinds[:-1]) | (runs_of_one_char[1:] & (points[1:] != points[:-1]))
    starts = np.flatnonzero(new)
    lengths = np.diff(np.append(starts, len(points)))
    kind = kinds[starts]

    def in_piece(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        sums = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
        return sums[starts + lengths] - sums[starts]

    capitals = in_piece((points >= 65) & (points <= 90))
    newlines = in_piece(points == 10)
    caps_word = (lengths > 1) & (capitals == lengths)
    per = np.where(
        kind == _LETTER,
        np.where(caps_word, _UPPER_WORD_CHARS, _WORD_CHARS),
        np.where(kind == _DIGIT, _DIGIT_CHARS, _REPEATED_MARK_CHARS),
    )
    runs = _TENTHS * -(-lengths // per)
    tenths = np.select(
        [
            kind == _SPACE,
            kind == _OTHER,
            (kind == _MARK) & (lengths == 1),
        ],
        [
            np.where(newlines > 0, _TENTHS * newlines, np.where(lengths == 1, 0, _TENTHS)),
            _TENTHS * lengths,
            _PUNCTUATION_TENTHS,
        ],
        runs,
    )
    return starts, tenths


class EstimatingTokenizer:
    """The default: a BPE-shaped estimate in pure Python (~1 µs per word, no vocabulary)."""

    name = "estimate"
    # With whitespace collapsed (as the packer's lines are), no piece spans more characters
    # per token than a run of one repeated mark (8) and the single blank after it (free):
    # such a line of n characters has at least n / 9 tokens.
    max_chars_per_token = _REPEATED_MARK_CHARS + 1

    def count(self, text: str) -> int:
        if len(text) > VECTORIZED_ABOVE_CHARS:
            return _tokens(int(_pieces(text)[1].sum()))
        return _tokens(_total_tenths(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """Whole pieces only: a word or number is never cut in the middle, except a piece
        longer than any word (a blob without spaces), which is cut where the budget ends.
        Linear in the prefix it keeps (or, vectorized, in the text), never worse."""
        if len(text) > VECTORIZED_ABOVE_CHARS:
            return self._truncate_vectorized(text, max_tokens)
        return truncate_by_pieces(text, max_tokens)

    @staticmethod
    def _truncate_vectorized(text: str, max_tokens: int) -> str:
        starts, tenths = _pieces(text)
        totals = np.cumsum(tenths)
        # the first piece whose running total rounds up past the budget
        over = int(np.searchsorted(totals, max_tokens * _TENTHS, side="right"))
        if over == len(starts):
            return text
        start = int(starts[over])
        end = int(starts[over + 1]) if over + 1 < len(starts) else len(text)
        used = int(totals[over - 1]) if over else 0
        return _cut(text, start, text[start:end], int(tenths[over]), used, max_tokens)


DEFAULT_TOKENIZER: Tokenizer = EstimatingTokenizer()
