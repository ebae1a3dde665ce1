"""The group router: which group a request belongs to, learned from the groups' example requests.

Scoring each group by its single best-matching example (1-nearest-neighbour) or by one text made of
all its examples throws most of the evidence away: a group learned from forty past requests knows
what varies between them and what never does. The router is a **linear discriminant** (LDA with a
shared, shrunk covariance) fitted on every example of every group, plus the group's own text as
one more example:

- features of a text: its sentence embedding, and its tf-idf vector reduced to ``lsa_dims``
  dimensions by a truncated SVD fitted on the same examples (latent semantic analysis), so words
  the embedding model blurs together (a city, a product, an ingredient) still count;
- fitting is closed-form (class means, one pooled covariance, one linear solve): about two seconds
  for 17,000 examples and 460 groups, milliseconds for a hand-written library;
- scoring a request is one small matrix product; the scores become a posterior over the groups.

The router says *which* group; whether any group fits at all is still the retriever's
similarity threshold (a discriminant always has a favourite, even for an unrelated request).

>>> router = GroupRouter.fit(["g:a", "g:b"], ["send the weekly mail", "resize the photo"],
...                          np.eye(2, 4, dtype=np.float32))  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from skillgrove.graph.text import query_tokens, tokenize

if TYPE_CHECKING:
    from scipy import sparse  # fitting only: a search never imports scipy

Matrix = npt.NDArray[np.float32]

ROUTER_KEY = "group_router"
ROUTER_DIGEST_KEY = "group_router_digest"
LSA_DIMS = 128
SHRINKAGE = 0.05
"""Share of the pooled covariance replaced by its average variance (Ledoit-Wolf style
shrinkage): keeps the solve stable when groups have only a handful of examples."""
MIN_TERM_DOCS = 2
"""A term seen in fewer examples than this is not a feature (it cannot generalise)."""


class GroupRouter:
    def __init__(self, groups: Sequence[str], vocabulary: dict[str, int], idf: Matrix,
                 projection: Matrix, weights: Matrix, bias: Matrix,
                 temperature: float = 1.0,
                 lexical: tuple[Matrix, Matrix, float] | None = None) -> None:
        self.groups = tuple(groups)
        self.vocabulary = vocabulary
        self.idf = idf
        self.projection = projection
        self.weights = weights
        self.bias = bias
        self.temperature = temperature
        self.lexical = lexical
        """The same discriminant on the words alone (weights, bias, temperature): it can
        answer before the request is embedded (see ``lexical_top``)."""

    # -- fitting ----------------------------------------------------------------------------

    @classmethod
    def fit(cls, labels: Sequence[str], texts: Sequence[str], vectors: Matrix,
            lsa_dims: int = LSA_DIMS, shrinkage: float = SHRINKAGE) -> GroupRouter:
        """Fit on examples: ``labels[i]`` is the group of ``texts[i]``, embedded as
        ``vectors[i]``. Needs at least two groups.

        A discriminant in hundreds of dimensions is far too sure of itself, so its scores are
        divided by a temperature chosen on held-out examples (one in ten, from groups with at
        least three) to make the posterior honest; then the router is refitted on everything.
        """
        router = cls._fit(labels, texts, vectors, lsa_dims, shrinkage)
        held = sorted(_held_out(labels))
        if held:
            skip = set(held)
            keep = [i for i in range(len(labels)) if i not in skip]
            probe = cls._fit([labels[i] for i in keep], [texts[i] for i in keep],
                             np.asarray(vectors)[keep], lsa_dims, shrinkage)
            held_labels = [labels[i] for i in held]
            held_texts = [texts[i] for i in held]
            held_vectors = np.asarray(vectors)[held]
            router.temperature = probe._temperature(held_labels, held_texts, held_vectors)
            if router.lexical is not None and probe.lexical is not None:
                weights, bias, _ = router.lexical
                router.lexical = (weights, bias, probe._temperature(
                    held_labels, held_texts, held_vectors, lexical=True))
        return router

    def _temperature(self, labels: Sequence[str], texts: Sequence[str], vectors: Matrix,
                     lexical: bool = False) -> float:
        """The temperature that minimises the held-out examples' negative log-likelihood."""
        index = {g: i for i, g in enumerate(self.groups)}
        rows = [(index[label], self.lexical_scores(text) if lexical
                 else self.scores(text, vector))
                for label, text, vector in zip(labels, texts, vectors, strict=True)
                if label in index]
        best, best_loss = 1.0, math.inf
        for temperature in np.geomspace(0.1, 1000, 81):
            loss = 0.0
            for gold, scores in rows:
                scaled = scores / temperature
                top = scaled.max()
                loss += float(top + np.log(np.exp(scaled - top).sum()) - scaled[gold])
            if loss < best_loss:
                best, best_loss = float(temperature), loss
        return best

    @classmethod
    def _fit(cls, labels: Sequence[str], texts: Sequence[str], vectors: Matrix,
             lsa_dims: int, shrinkage: float) -> GroupRouter:
        groups = sorted(set(labels))
        if len(groups) < 2:
            raise ValueError("a router needs examples of at least two groups")
        tokens = [tokenize(t) for t in texts]
        df = Counter(term for doc in tokens for term in set(doc))
        kept = sorted(t for t, n in df.items() if n >= min(MIN_TERM_DOCS, len(texts)))
        vocabulary = {term: i for i, term in enumerate(kept)}
        n = len(texts)
        idf = np.array([math.log((1 + n) / (1 + df[t])) + 1 for t in kept], dtype=np.float32)
        tfidf = _tfidf(tokens, vocabulary, idf)
        dims = min(lsa_dims, len(kept) - 1, n - 1)
        projection = (_truncated_svd(tfidf, dims) if dims >= 1
                      else np.zeros((len(kept), 0), dtype=np.float32))
        features = np.hstack([np.asarray(vectors, dtype=np.float64),
                              np.asarray(tfidf @ projection, dtype=np.float64)])
        index = {g: i for i, g in enumerate(groups)}
        y = np.array([index[label] for label in labels])
        weights, bias = _discriminant(features, y, len(groups), shrinkage)
        lexical = None
        if dims >= 1:
            lexical_weights, lexical_bias = _discriminant(
                features[:, -projection.shape[1]:], y, len(groups), shrinkage)
            lexical = (lexical_weights, lexical_bias, 1.0)
        return cls(groups, vocabulary, idf, projection.astype(np.float32), weights, bias,
                   lexical=lexical)

    # -- scoring ----------------------------------------------------------------------------

    def features(self, text: str, vector: Matrix) -> Matrix:
        return np.concatenate([np.asarray(vector, dtype=np.float32).reshape(-1),
                               self._lexical_features(text)])

    def _lexical_features(self, text: str) -> Matrix:
        # One text: its few known terms pick rows of the projection (no sparse matrix needed).
        cols, weights = _term_weights(query_tokens(text), self.vocabulary, self.idf)
        if not len(cols):
            return np.zeros(self.projection.shape[1], dtype=np.float32)
        return np.asarray(weights @ self.projection[cols], dtype=np.float32)

    def lexical_scores(self, text: str) -> npt.NDArray[np.float64]:
        if self.lexical is None:
            raise ValueError("this router has no lexical discriminant")
        weights, bias, _ = self.lexical
        out = self._lexical_features(text) @ weights + bias
        return np.asarray(out, dtype=np.float64)

    def lexical_top(self, text: str, n: int) -> list[tuple[float, str]]:
        """Like ``top``, from the request's words alone (no embedding needed)."""
        assert self.lexical is not None
        return self._top(self.lexical_scores(text) / self.lexical[2], n)

    def scores(self, text: str, vector: Matrix) -> npt.NDArray[np.float64]:
        """The raw discriminant scores, one per group (in ``self.groups`` order)."""
        out = self.features(text, vector) @ self.weights + self.bias
        return np.asarray(out, dtype=np.float64)

    def probabilities(self, text: str, vector: Matrix) -> npt.NDArray[np.float64]:
        """The posterior over ``self.groups`` (summing to 1)."""
        return _softmax(self.scores(text, vector) / self.temperature)

    def posterior(self, text: str, vector: Matrix) -> dict[str, float]:
        """Group id -> probability that the request belongs to it."""
        return {g: float(p) for g, p in zip(self.groups, self.probabilities(text, vector),
                                            strict=True)}

    def top(self, text: str, vector: Matrix, n: int) -> list[tuple[float, str]]:
        """The ``n`` likeliest groups as (probability, id), likeliest first."""
        return self._top(self.scores(text, vector) / self.temperature, n)

    def _top(self, scaled: npt.NDArray[np.float64], n: int) -> list[tuple[float, str]]:
        probabilities = _softmax(scaled)
        n = min(n, len(probabilities))
        part = np.argpartition(-probabilities, n - 1)[:n]
        order = sorted(part, key=lambda i: (-probabilities[i], self.groups[i]))
        return [(float(probabilities[i]), self.groups[i]) for i in order]

    # -- storage ----------------------------------------------------------------------------

    def to_text(self) -> str:
        """The router as one ASCII string (stores keep it as index metadata)."""
        buffer = io.BytesIO()
        terms = np.array(sorted(self.vocabulary, key=self.vocabulary.__getitem__), dtype=str)
        arrays: dict[str, Any] = {
            "groups": np.array(self.groups, dtype=str), "terms": terms, "idf": self.idf,
            "projection": self.projection, "weights": self.weights, "bias": self.bias,
            "temperature": np.array(self.temperature)}
        if self.lexical is not None:
            arrays.update(lexical_weights=self.lexical[0], lexical_bias=self.lexical[1],
                          lexical_temperature=np.array(self.lexical[2]))
        np.savez_compressed(buffer, **arrays)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> GroupRouter:
        with np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False) as data:
            terms = [str(t) for t in data["terms"]]
            lexical = ((data["lexical_weights"], data["lexical_bias"],
                        float(data["lexical_temperature"]))
                       if "lexical_weights" in data.files else None)
            return cls([str(g) for g in data["groups"]], {t: i for i, t in enumerate(terms)},
                       data["idf"], data["projection"], data["weights"], data["bias"],
                       float(data["temperature"]), lexical)


def _held_out(labels: Sequence[str], share: int = 10) -> set[int]:
    """Every ``share``-th example of each group that has at least three (deterministic)."""
    by_group: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_group.setdefault(label, []).append(i)
    held: set[int] = set()
    for members in by_group.values():
        if len(members) >= 3:
            held.update(members[share - 1 :: share] or members[-1:])
    return held if len(held) >= 20 else set()


def _discriminant(features: npt.NDArray[np.float64], y: npt.NDArray[np.int64], groups: int,
                  shrinkage: float) -> tuple[Matrix, Matrix]:
    """LDA: class means, one pooled covariance shrunk towards its average variance, and the
    linear scores ``x @ weights + bias`` they imply (equal priors)."""
    means = np.zeros((groups, features.shape[1]))
    np.add.at(means, y, features)
    means /= np.bincount(y, minlength=groups)[:, None]
    within = features - means[y]
    covariance = within.T @ within / max(len(features) - groups, 1)
    dimension = features.shape[1]
    average = float(np.trace(covariance)) / dimension
    covariance = (1 - shrinkage) * covariance + (shrinkage * average + 1e-6) * np.eye(dimension)
    weights = np.linalg.solve(covariance, means.T)
    bias = -0.5 * np.einsum("gd,dg->g", means, weights)
    return weights.astype(np.float32), bias.astype(np.float32)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def _softmax(scaled: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    weights = np.exp(scaled - scaled.max())
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def _term_weights(doc: Sequence[str], vocabulary: dict[str, int], idf: Matrix,
                  ) -> tuple[npt.NDArray[np.int64], Matrix]:
    """A text's tf-idf: its known terms' columns and their weights (sublinear tf times idf,
    scaled to unit length)."""
    counts = Counter(vocabulary[t] for t in doc if t in vocabulary)
    cols = np.fromiter(counts, dtype=np.int64, count=len(counts))
    if not len(cols):
        return cols, np.zeros(0, dtype=np.float32)
    tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    weights = (1 + np.log(tf)) * idf[cols].astype(np.float64)
    return cols, np.asarray(weights / np.linalg.norm(weights), dtype=np.float32)


def _tfidf(tokens: Sequence[Sequence[str]], vocabulary: dict[str, int],
           idf: Matrix) -> sparse.csr_matrix:
    """The rows of ``_term_weights`` as one sparse matrix (rows without terms stay 0)."""
    from scipy import sparse

    rows: list[npt.NDArray[np.int64]] = []
    cols: list[npt.NDArray[np.int64]] = []
    values: list[Matrix] = []
    for row, doc in enumerate(tokens):
        columns, weights = _term_weights(doc, vocabulary, idf)
        rows.append(np.full(len(columns), row, dtype=np.int64))
        cols.append(columns)
        values.append(weights)
    return sparse.csr_matrix(
        (np.concatenate(values) if values else np.zeros(0, dtype=np.float32),
         (np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
          np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64))),
        shape=(len(tokens), len(vocabulary)), dtype=np.float32)


def _truncated_svd(matrix: sparse.csr_matrix, dims: int, oversample: int = 10,
                   power: int = 4, seed: int = 0) -> Matrix:
    """The top ``dims`` right singular vectors (terms x dims), by seeded randomized SVD
    (Halko, Martinsson and Tropp), so the same examples always give the same router."""
    rng = np.random.default_rng(seed)
    columns = min(dims + oversample, min(matrix.shape))
    sample = matrix @ rng.standard_normal((matrix.shape[1], columns)).astype(np.float32)
    basis, _ = np.linalg.qr(sample)
    for _ in range(power):
        basis, _ = np.linalg.qr(matrix.T @ basis)
        basis, _ = np.linalg.qr(matrix @ basis)
    small = np.asarray((matrix.T @ basis).T)
    _, _, right = np.linalg.svd(small, full_matrices=False)
    return np.ascontiguousarray(right[:dims].T, dtype=np.float32)
