"""BM25 with the exact scores of rank-bm25's ``BM25Okapi``, computed on sparse postings.

rank-bm25 scores a query by looping over every document for every term; here each term visits
only the documents that hold it, which makes a query over thousands of documents take well under
a millisecond. ``tests/test_bm25.py`` checks the scores against rank-bm25 itself.

Okapi as rank-bm25 defines it: ``idf = log((N - n + 0.5) / (n + 0.5))``; an idf below zero is
replaced by ``epsilon * mean(idf)``; ``score = sum(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b *
len / avglen)))``, each query token counted as often as it occurs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class BM25:
    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.size = len(corpus)
        lengths = np.array([len(doc) for doc in corpus], dtype=np.float64)
        self.avgdl = float(lengths.mean()) if self.size and lengths.sum() else 0.0
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for index, doc in enumerate(corpus):
            for term, tf in Counter(doc).items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(index)
                tfs.append(tf)
        idf: dict[str, float] = {}
        negative: list[str] = []
        total = 0.0
        for term, (docs, _) in postings.items():
            value = math.log(self.size - len(docs) + 0.5) - math.log(len(docs) + 0.5)
            idf[term] = value
            total += value
            if value < 0:
                negative.append(term)
        average = total / len(idf) if idf else 0.0
        for term in negative:
            idf[term] = self.epsilon * average
        self.idf = idf
        self.average_idf = max(average, 0.0)
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl) if self.avgdl else (
            np.full(self.size, self.k1))
        self._postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        for term, (docs, tfs) in postings.items():
            doc_array = np.array(docs, dtype=np.int64)
            tf_array = np.array(tfs, dtype=np.float64)
            weights = idf[term] * tf_array * (self.k1 + 1) / (tf_array + norm[doc_array])
            self._postings[term] = (doc_array, weights)

    def scores(self, query: Sequence[str]) -> npt.NDArray[np.float64]:
        """Scores of every document for the query tokens (same order as the corpus)."""
        out = np.zeros(self.size, dtype=np.float64)
        for term in query:
            posting = self._postings.get(term)
            if posting is not None:
                out[posting[0]] += posting[1]
        return out

    def max_score(self, query: Sequence[str]) -> float:
        """What a document holding every query term could score: each term's idf times (k1 + 1),
        the limit of its weight as the term fills a short document. A term no document holds
        counts with the vocabulary's average idf, so a request whose words the library mostly
        lacks cannot reach a high share from one lucky word. Dividing by it puts lexical scores
        on a 0..1 scale that means the same for every query."""
        unseen = self.average_idf
        return float(sum(max(self.idf.get(t, unseen), 0.0) * (self.k1 + 1) for t in query))

    def top(self, query: Sequence[str], k: int) -> list[tuple[int, float]]:
        scores = self.scores(query)
        if k >= self.size:
            order = np.argsort(-scores, kind="stable")
        else:
            part = np.argpartition(-scores, k)[:k]
            order = part[np.argsort(-scores[part], kind="stable")]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
