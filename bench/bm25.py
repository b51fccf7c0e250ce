"""BM25Okapi as rank_bm25 computes it, in numpy: the keyword reference of the recall benchmarks
without the dependency.

rank_bm25's ``BM25Okapi`` (k1 1.5, b 0.75, epsilon 0.25): idf = ln((N - n + 0.5) / (n + 0.5))
for a word in n of N documents; a word in more than half of them would get a negative idf and
gets epsilon times the average idf (over the whole vocabulary, before flooring) instead. A word
repeated in the query counts once per repetition, as there.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """The lowercased word tokens of ``text`` (runs of letters, digits and underscores)."""
    return WORD.findall(text.lower())


class BM25Okapi:
    """An index of tokenized documents, scored against a tokenized query."""

    def __init__(
        self,
        corpus: Sequence[Sequence[str]],
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> None:
        self.size = len(corpus)
        self.k1 = k1
        frequencies = [Counter(document) for document in corpus]
        lengths = np.array([len(document) for document in corpus], dtype=np.float64)
        average_length = float(lengths.mean()) if self.size else 0.0
        self._norm = k1 * (1 - b + b * lengths / (average_length or 1.0))
        containing = Counter(word for counts in frequencies for word in counts)
        raw_idf = {
            word: math.log(self.size - n + 0.5) - math.log(n + 0.5)
            for word, n in containing.items()
        }
        floor = epsilon * sum(raw_idf.values()) / len(raw_idf) if raw_idf else 0.0
        self.idf = {word: floor if idf < 0 else idf for word, idf in raw_idf.items()}
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for index, counts in enumerate(frequencies):
            for word, count in counts.items():
                documents, tfs = postings.setdefault(word, ([], []))
                documents.append(index)
                tfs.append(count)
        self._postings = {
            word: (np.array(documents), np.array(tfs, dtype=np.float64))
            for word, (documents, tfs) in postings.items()
        }

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """Every document's score for ``query``, in corpus order."""
        scores = np.zeros(self.size)
        for word in query:
            if word not in self._postings:
                continue
            documents, tf = self._postings[word]
            scores[documents] += self.idf[word] * tf * (self.k1 + 1) / (tf + self._norm[documents])
        return scores

    def top(self, query: Sequence[str], n: int) -> list[int]:
        """The indices of the ``n`` best documents scoring above 0, best first; equal scores
        in corpus order."""
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")
        return [int(i) for i in order[:n] if scores[i] > 0]
