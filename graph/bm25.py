"""BM25 with the exact scores of rank-bm25's ``BM25Okapi``, computed on sparse postings.

rank-bm25 scores a query by looping over every document for every term; here each term visits
only the documents that hold it, which makes a query over thousands of documents take well under
a millisecond. ``tests/test_bm25.py`` checks the scores against rank-bm25 itself.

Okapi as rank-bm25 defines it: ``idf = log((N - n + 0.5) / (n + 0.5))``; an idf below zero is
replaced by ``epsilon * mean(idf)``; ``score = sum(idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b *
len / avglen)))``, each query token counted as often as it occurs.

The term counts (:class:`Postings`) are plain arrays, so a store keeps them next to the graph
and a new process scores its first query without tokenizing the library again; an edit to a few
documents is spliced in (:meth:`Postings.replaced`) rather than recounted. Scores depend only on
the counts, never on the order terms or documents were added in: the mean idf is an exactly
rounded sum (``math.fsum``), and each term's documents are distinct, so adding a term's weights
into the score array gives the same bits whatever the order.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.signedinteger[Any]]


@dataclass(frozen=True)
class Postings:
    """A corpus's term counts, term by term: term ``terms[t]`` occurs in documents
    ``docs[indptr[t]:indptr[t + 1]]`` (each once, in no particular order) with the counts in
    ``tfs`` at the same positions; ``lengths[d]`` is document ``d``'s number of tokens.

    >>> p = Postings.of([["email", "team"], ["email", "email"]])
    >>> p.terms, p.indptr.tolist(), p.docs.tolist(), p.tfs.tolist(), p.lengths.tolist()
    (('email', 'team'), [0, 2, 3], [0, 1, 0], [1, 2, 1], [2, 2])
    """

    terms: tuple[str, ...]
    indptr: Ints
    docs: Ints
    tfs: Ints
    lengths: Ints

    @classmethod
    def of(cls, corpus: Iterable[Sequence[str]]) -> Postings:
        """The counts of ``corpus``, read once: a generator of token lists keeps one document's
        tokens in memory at a time (all of them at once took 1.6 GB at 100k skills)."""
        vocabulary: dict[str, int] = {}
        # Machine integers, not lists of int objects: 5.7M postings at 100k skills.
        term_ids, doc_ids, counts, sizes = array("q"), array("q"), array("q"), array("q")
        for index, doc in enumerate(corpus):
            sizes.append(len(doc))
            for term, tf in Counter(doc).items():
                term_ids.append(vocabulary.setdefault(term, len(vocabulary)))
                doc_ids.append(index)
                counts.append(tf)
        lengths = np.frombuffer(sizes, dtype=np.int64)
        return cls._grouped(tuple(vocabulary), np.frombuffer(term_ids, dtype=np.int64),
                            np.frombuffer(doc_ids, dtype=np.int64),
                            np.frombuffer(counts, dtype=np.int64), lengths)

    @classmethod
    def _grouped(cls, terms: tuple[str, ...], term_ids: Ints, docs: Ints, tfs: Ints,
                 lengths: Ints) -> Postings:
        order = np.argsort(term_ids, kind="stable")
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_ids, minlength=len(terms)), out=indptr[1:])
        return cls(terms, indptr, docs[order], tfs[order], lengths)

    @property
    def size(self) -> int:
        return len(self.lengths)

    @cached_property
    def vocabulary(self) -> dict[str, int]:
        """Each term's index in ``terms`` (shared: not to be changed)."""
        return {term: i for i, term in enumerate(self.terms)}

    def replaced(self, renumber: Ints, size: int,
                 added: Mapping[int, Sequence[str]]) -> Postings:
        """The counts after an edit: old document ``d`` becomes document ``renumber[d]`` (-1:
        dropped), the documents of ``added`` (new number -> its tokens) are counted in, and
        ``size`` documents remain. Work is a few passes of numpy over the stored counts (one
        to find the dropped documents' postings, the copies that take them out and put the
        added in; a renumbering only when documents move), plus the tokens added; terms no
        document holds any more are forgotten."""
        kept = renumber >= 0
        in_place = len(renumber) == size and np.array_equal(renumber[kept],
                                                            np.nonzero(kept)[0])
        counts = np.diff(self.indptr)
        gone = np.nonzero(~kept[self.docs])[0]  # the dropped documents' postings
        docs, tfs = self.docs, self.tfs
        if len(gone):
            counts = counts - np.bincount(np.searchsorted(self.indptr, gone, side="right") - 1,
                                          minlength=len(self.terms))
            docs, tfs = np.delete(docs, gone), np.delete(tfs, gone)
        if not in_place:
            docs = renumber[docs]
        lengths = np.zeros(size, dtype=np.int64)
        lengths[renumber[kept]] = self.lengths[kept]
        vocabulary = dict(self.vocabulary)
        new_terms, new_docs, new_tfs = [], [], []
        for doc in sorted(added):
            tokens = added[doc]
            lengths[doc] = len(tokens)
            for term, tf in Counter(tokens).items():
                new_terms.append(vocabulary.setdefault(term, len(vocabulary)))
                new_docs.append(doc)
                new_tfs.append(tf)
        terms = tuple(vocabulary) if len(vocabulary) > len(self.terms) else self.terms
        if len(terms) > len(counts):
            counts = np.concatenate([counts, np.zeros(len(terms) - len(counts), dtype=np.int64)])
        if new_terms:
            fresh = np.array(new_terms, dtype=np.int64)
            order = np.argsort(fresh, kind="stable")
            fresh = fresh[order]
            ends = np.cumsum(counts)  # where each term's block ends in the kept arrays
            docs = np.insert(docs, ends[fresh], np.array(new_docs, dtype=np.int64)[order])
            tfs = np.insert(tfs, ends[fresh], np.array(new_tfs, dtype=np.int64)[order])
            counts = counts + np.bincount(fresh, minlength=len(terms))
        alive = counts > 0
        indptr = np.zeros(int(alive.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[alive], out=indptr[1:])
        if not alive.all():
            terms = tuple(t for t, a in zip(terms, alive.tolist(), strict=True) if a)
        out = Postings(terms, indptr, docs, tfs, lengths)
        if len(terms) == len(vocabulary):  # no term forgotten: the dictionary stands
            out.__dict__["vocabulary"] = vocabulary
        return out

    def to_row(self) -> tuple[str, bytes, bytes, bytes, bytes]:
        """(terms as JSON, then the arrays as little-endian int32 bytes; indptr as int64)."""
        return (json.dumps(self.terms, ensure_ascii=False),
                self.indptr.astype("<i8").tobytes(), self.docs.astype("<i4").tobytes(),
                self.tfs.astype("<i4").tobytes(), self.lengths.astype("<i4").tobytes())

    @classmethod
    def from_row(cls, terms: str, indptr: bytes, docs: bytes, tfs: bytes,
                 lengths: bytes) -> Postings:
        # Views of the stored bytes (int32 documents and counts index as well as int64 ones).
        out = cls(tuple(json.loads(terms)), np.frombuffer(indptr, dtype="<i8"),
                  np.frombuffer(docs, dtype="<i4"), np.frombuffer(tfs, dtype="<i4"),
                  np.frombuffer(lengths, dtype="<i4"))
        if (len(out.indptr) != len(out.terms) + 1 or len(out.docs) != len(out.tfs)
                or int(out.indptr[-1]) != len(out.docs)
                or (len(out.docs) and int(out.docs.max()) >= out.size)):
            raise ValueError("inconsistent BM25 postings")
        return out


class BM25:
    def __init__(self, corpus: Sequence[Sequence[str]] | Postings, k1: float = 1.5,
                 b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        postings = corpus if isinstance(corpus, Postings) else Postings.of(corpus)
        self.postings = postings
        self.size = postings.size
        lengths = postings.lengths.astype(np.float64)
        self.avgdl = float(lengths.mean()) if self.size and lengths.sum() else 0.0
        df = np.diff(postings.indptr)
        # idf depends on the document frequency alone: one log per distinct frequency.
        distinct = np.unique(df)
        table = np.array([math.log(self.size - d + 0.5) - math.log(d + 0.5)
                          for d in distinct.tolist()], dtype=np.float64)
        idf = table[np.searchsorted(distinct, df)] if len(df) else np.zeros(0)
        average = math.fsum(idf.tolist()) / len(idf) if len(idf) else 0.0
        idf[idf < 0] = self.epsilon * average
        self._idf = idf
        self._where = postings.vocabulary
        self._idf_map: dict[str, float] | None = None
        self.average_idf = max(average, 0.0)
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl) if self.avgdl else (
            np.full(self.size, self.k1))
        tfs = postings.tfs.astype(np.float64)
        self._weights = (np.repeat(idf, df) * tfs * (self.k1 + 1)
                         / (tfs + norm[postings.docs]))

    @property
    def idf(self) -> dict[str, float]:
        """Each term's idf (as rank-bm25's ``idf``)."""
        if self._idf_map is None:
            self._idf_map = dict(zip(self.postings.terms, self._idf.tolist(), strict=True))
        return self._idf_map

    def scores(self, query: Sequence[str]) -> npt.NDArray[np.float64]:
        """Scores of every document for the query tokens (same order as the corpus)."""
        out = np.zeros(self.size, dtype=np.float64)
        indptr, docs = self.postings.indptr, self.postings.docs
        for term in query:
            t = self._where.get(term)
            if t is not None:
                start, stop = indptr[t], indptr[t + 1]
                out[docs[start:stop]] += self._weights[start:stop]
        return out

    def max_score(self, query: Sequence[str]) -> float:
        """What a document holding every query term could score: each term's idf times (k1 + 1),
        the limit of its weight as the term fills a short document. A term no document holds
        counts with the vocabulary's average idf, so a request whose words the library mostly
        lacks cannot reach a high share from one lucky word. Dividing by it puts lexical scores
        on a 0..1 scale that means the same for every query."""
        unseen = self.average_idf
        total = 0.0
        for term in query:
            t = self._where.get(term)
            total += max(float(self._idf[t]) if t is not None else unseen, 0.0) * (self.k1 + 1)
        return total

    def top(self, query: Sequence[str], k: int) -> list[tuple[int, float]]:
        scores = self.scores(query)
        if k >= self.size:
            order = np.argsort(-scores, kind="stable")
        else:
            part = np.argpartition(-scores, k)[:k]
            order = part[np.argsort(-scores[part], kind="stable")]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
