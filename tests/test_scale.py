"""What keeps the embedded store and indexing fast at scale behaves like the simple version:
blocked similarity, the projected vector search, the query-vector cache, the stored matrices."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph.embedded import EmbeddedStore, _KindIndex
from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, Vectors
from skillgrove.graph.indexer import SIMILAR_K, SIMILAR_THRESHOLD, embed_nodes, similar_edges
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord


def unit_rows(count: int, dims: int = 32, seed: int = 0, clusters: int = 12) -> Vectors:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dims))
    rows = centres[rng.integers(clusters, size=count)] + 0.6 * rng.standard_normal((count, dims))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def brute_force_similar(ids: Sequence[str], matrix: Vectors) -> list[Edge]:
    """The whole N x N matrix at once: the definition the blocked version must match."""
    sims = matrix.astype(np.float64) @ matrix.T.astype(np.float64)
    np.fill_diagonal(sims, -1.0)
    pairs: dict[tuple[str, str], float] = {}
    for row in range(len(ids)):
        for col in np.argsort(-sims[row], kind="stable")[:SIMILAR_K]:
            if sims[row, col] >= SIMILAR_THRESHOLD:
                a, b = sorted((ids[row], ids[int(col)]))
                pairs[(a, b)] = round(float(sims[row, col]), 4)
    return [Edge(EdgeKind.SIMILAR_TO, a, b, w) for (a, b), w in sorted(pairs.items())]


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
def test_blocked_similarity_equals_brute_force(block: int) -> None:
    matrix = unit_rows(300)
    ids = [f"s{i:03d}" for i in range(len(matrix))]
    blocked = similar_edges(ids, matrix, block=block)
    expected = brute_force_similar(ids, matrix)
    assert [(e.src, e.dst) for e in blocked] == [(e.src, e.dst) for e in expected]
    assert all(abs(a.weight - b.weight) <= 1e-4 for a, b in zip(blocked, expected, strict=True))
    assert len(blocked) > 300  # the threshold leaves plenty of edges to compare


def test_projected_search_keeps_recall_and_exact_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    import skillgrove.graph.embedded as embedded

    monkeypatch.setattr(embedded, "QUANTIZE_FROM", 100)
    monkeypatch.setattr(embedded, "PROJECTED_DIMS", 24)
    monkeypatch.setattr(embedded, "RESCORE", 200)
    # Sentence embeddings put most of their energy in a few directions; so does this set.
    spectrum = np.exp(-np.arange(48) / 10.0).astype(np.float32)
    matrix = unit_rows(3000, dims=48, seed=1) * spectrum
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"n{i}" for i in range(len(matrix))]
    records = [NodeRecord(i, NodeKind.SKILL, i, "text", i, {}) for i in ids]
    index = _KindIndex.of(records, ids, matrix)
    queries = unit_rows(50, dims=48, seed=2) * spectrum
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    recalls = []
    for query in queries:
        exact = index.vector_top(query, 10, exact=True)
        fast = index.vector_top(query, 10)
        recalls.append(len({i for i, _ in exact} & {i for i, _ in fast}) / 10)
        for nid, score in fast:  # scores are exact cosines, not the projection's estimate
            assert score == pytest.approx(float(matrix[ids.index(nid)] @ query), abs=1e-5)
    assert np.mean(recalls) >= 0.99


class CountingEncoder:
    name = "counting"
    dimensions = 4

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        rows = np.array([[len(t), t.count("a") + 1, 1, 1] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def cached_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM embedding").fetchone()[0])


def test_searches_do_not_write_the_embedding_cache(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    inner = CountingEncoder()
    encoder = CachedEncoder(inner, EmbeddingCache(path), query_memory=2)
    records = [NodeRecord(f"n{i}", NodeKind.SKILL, f"n{i}", f"skill text {i}", str(i), {})
               for i in range(5)]
    embed_nodes(records, encoder)  # indexing writes, in one transaction per chunk
    assert cached_rows(path) == 5 and encoder.writes == 1
    for request in ("find a pdf", "find a pdf", "make a chart", "find a pdf"):
        encoder.encode([request])
    assert cached_rows(path) == 5 and encoder.writes == 1
    assert inner.calls == 1 + 2  # the repeated request came from memory
    for request in ("one", "two", "three"):
        encoder.encode([request])
    calls = inner.calls
    encoder.encode(["find a pdf"])  # pushed out of the two-entry memory: embedded again
    assert inner.calls == calls + 1
    encoder.encode(["skill text 3"])  # indexed texts are read from the cache
    assert inner.calls == calls + 1


def test_reopened_store_holds_the_same_graph_and_vectors(tmp_path: Path) -> None:
    matrix = unit_rows(40, dims=16, seed=4)
    nodes = [NodeRecord(f"s{i}", NodeKind.SKILL if i < 30 else NodeKind.GROUP, f"s{i}",
                        f"text {i}", f"h{i}", {"n": i}) for i in range(40)]
    vectors = {n.id: matrix[i] for i, n in enumerate(nodes)}
    edges = similar_edges([n.id for n in nodes[:30]], matrix[:30])
    path = tmp_path / "graph.sqlite"
    store = EmbeddedStore(path)
    store.sync(nodes, vectors, edges, {"k": "v"})
    edited = [*nodes[:3], NodeRecord("s3", NodeKind.SKILL, "s3", "new", "h3b", {}), *nodes[4:39]]
    edited_vectors = {**vectors, "s3": matrix[0]}
    store.sync(edited, edited_vectors, edges)
    query = matrix[5]
    before = (store.nodes(), store.edges(), {n.id: store.vector(n.id) for n in edited},
              store.vector_search(NodeKind.SKILL, query, 5),
              store.text_search(NodeKind.GROUP, "text 33", 3), store.neighbors("s5"))
    store.close()
    again = EmbeddedStore(path)
    after = (again.nodes(), again.edges(), {n.id: again.vector(n.id) for n in edited},
             again.vector_search(NodeKind.SKILL, query, 5),
             again.text_search(NodeKind.GROUP, "text 33", 3), again.neighbors("s5"))
    assert before[0] == after[0] and before[1] == after[1] and before[3:] == after[3:]
    assert before[2].keys() == after[2].keys()
    assert all(np.array_equal(before[2][i], after[2][i]) for i in before[2])
    assert np.array_equal(again.vector("s3"), matrix[0]) and again.vector("s39") is None
    assert again.get_meta("k") == "v"
    again.close()


def test_a_file_with_per_row_vectors_still_opens(tmp_path: Path) -> None:
    """Files written before the matrix table keep vectors in ``node.vector``."""
    path = tmp_path / "graph.sqlite"
    store = EmbeddedStore(path)
    matrix = unit_rows(3, dims=8)
    nodes = [NodeRecord(f"s{i}", NodeKind.SKILL, f"s{i}", f"t{i}", f"h{i}", {}) for i in range(3)]
    store.sync(nodes, {n.id: matrix[i] for i, n in enumerate(nodes)}, [])
    store.close()
    with sqlite3.connect(path) as db:
        for i in range(3):
            db.execute("UPDATE node SET vector = ? WHERE id = ?", (matrix[i].tobytes(), f"s{i}"))
        db.execute("DELETE FROM matrix")
    old = EmbeddedStore(path)
    assert np.array_equal(old.vector("s2"), matrix[2])
    assert old.vector_search(NodeKind.SKILL, matrix[1], 1)[0][0] == "s1"
    old.close()
