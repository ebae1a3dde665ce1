"""Incremental indexing gives what indexing from scratch gives: SIMILAR_TO updated from the
previous edges, BM25 counts spliced, and the embedded store's in-memory state after a sync."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph.bm25 import BM25, Postings
from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.indexer import (
    SIMILAR_K,
    SIMILAR_THRESHOLD,
    StoredSimilar,
    similar_edges,
    updated_similar_edges,
)
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord
from skillgrove.graph.text import tokenize


def unit(rows: np.ndarray) -> Vectors:
    normed: Vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return normed


def clustered(count: int, rng: np.random.Generator, dims: int = 24) -> Vectors:
    centres = rng.standard_normal((8, dims))
    return unit(centres[rng.integers(8, size=count)] + 0.7 * rng.standard_normal((count, dims)))


def brute_force(ids: Sequence[str], matrix: Vectors) -> list[Edge]:
    """The definition, spelled out: every pair's float64 dot, each node's k best (ties to the
    smaller id) that reach the threshold, one edge per pair."""
    wide = matrix.astype(np.float64)
    pairs: dict[tuple[str, str], float] = {}
    for i in range(len(ids)):
        scored = [(-float((wide[i] * wide[j]).sum()), ids[j], j)
                  for j in range(len(ids)) if j != i]
        for negative, _, j in sorted(scored)[:SIMILAR_K]:
            if -negative >= SIMILAR_THRESHOLD:
                a, b = sorted((ids[i], ids[j]))
                pairs[(a, b)] = round(-negative, 4)
    return [Edge(EdgeKind.SIMILAR_TO, a, b, w) for (a, b), w in sorted(pairs.items())]


def as_tuples(edges: Sequence[Edge]) -> list[tuple[str, str, float]]:
    return sorted((e.src, e.dst, e.weight) for e in edges)


def test_full_computation_equals_the_definition_with_ties() -> None:
    rng = np.random.default_rng(5)
    matrix = clustered(150, rng)
    matrix[10] = matrix[11] = matrix[12]  # exact ties: the smaller id must win
    ids = [f"n{i:03d}" for i in range(len(matrix))]
    assert as_tuples(similar_edges(ids, matrix, block=16)) == as_tuples(brute_force(ids, matrix))


@pytest.mark.parametrize("shared", [0.0, 1.5])
def test_incremental_updates_equal_brute_force_after_each_edit(shared: float) -> None:
    """``shared``: a direction every vector has in common, as sentence embeddings do; with it
    most nodes are above the threshold to each other and only the k-th choices bound what an
    edit can touch."""
    rng = np.random.default_rng(11)
    matrix = unit(clustered(200, rng) + shared * unit(rng.standard_normal((1, 24))))
    ids = [f"s{i:03d}" for i in range(len(matrix))]
    vectors = dict(zip(ids, matrix, strict=True))
    edges = similar_edges(ids, matrix)
    edits = [
        ("change", "s007"), ("remove", "s042"), ("add", "s900"), ("change", "s100"),
        ("add", "s000a"), ("remove", "s199"), ("duplicate", "s050"), ("change", "s050"),
    ]
    for what, nid in edits:
        old_ids, old_matrix = list(vectors), np.stack(list(vectors.values()))
        if what == "remove":
            del vectors[nid]
        elif what == "duplicate":  # a second node with exactly the same vector
            vectors[nid + "-twin"] = vectors[nid].copy()
        else:  # a new vector near an existing one, so it enters other nodes' choices
            near = vectors[ids[int(rng.integers(len(ids)))]]
            vectors[nid] = unit((near + 0.3 * rng.standard_normal(len(near)))[None])[0]
        new_ids, new_matrix = list(vectors), np.stack(list(vectors.values()))
        edges = updated_similar_edges(old_ids, old_matrix, edges, new_ids, new_matrix)
        assert as_tuples(edges) == as_tuples(brute_force(new_ids, new_matrix)), (what, nid)
    assert len(edges) > 150


def test_many_changes_fall_back_to_the_full_computation() -> None:
    rng = np.random.default_rng(2)
    matrix = clustered(120, rng)
    ids = [f"n{i}" for i in range(len(matrix))]
    edges = similar_edges(ids, matrix)
    moved = matrix.copy()
    moved[:60] = clustered(60, rng)
    assert as_tuples(updated_similar_edges(ids, matrix, edges, ids, moved)) == as_tuples(
        brute_force(ids, moved))


def records(texts: dict[str, str]) -> list[NodeRecord]:
    return [NodeRecord(nid, NodeKind.SKILL, nid, text, str(hash(text)), {"n": nid})
            for nid, text in texts.items()]


def test_spliced_bm25_counts_score_as_counting_afresh() -> None:
    docs = {f"d{i}": f"report {i % 7} email team{i % 3} pdf summary " * (1 + i % 4)
            for i in range(40)}
    ids = sorted(docs)
    postings = Postings.of([tokenize(docs[i]) for i in ids])
    new_docs = dict(docs)
    del new_docs["d3"]
    new_docs["d10"] = "translate german text unseen-term"
    new_docs["d99"] = "brand new email chart"
    new_ids = sorted(new_docs)
    where = {nid: i for i, nid in enumerate(new_ids)}
    renumber = np.array([-1 if nid in ("d3", "d10") else where[nid] for nid in ids])
    spliced = postings.replaced(renumber, len(new_ids),
                                {where[n]: tokenize(new_docs[n]) for n in ("d10", "d99")})
    fresh = BM25([tokenize(new_docs[i]) for i in new_ids])
    for query in ["email report", "german chart", "pdf pdf summary", "team1", "nothing"]:
        tokens = tokenize(query)
        assert np.array_equal(BM25(spliced).scores(tokens), fresh.scores(tokens))
        assert BM25(spliced).max_score(tokens) == fresh.max_score(tokens)
    assert sorted(spliced.terms) == sorted(fresh.postings.terms)


def snapshot(store: EmbeddedStore) -> tuple[object, ...]:
    nodes = sorted((n.id, n.text, n.content_hash, dict(n.data)) for n in store.nodes())
    edges = sorted((e.kind.value, e.src, e.dst, e.weight) for e in store.edges())
    vectors = {n: store.vector(n).tobytes() for n, *_ in nodes}  # type: ignore[union-attr]
    texts = [store.text_search(NodeKind.SKILL, q, 5) for q in ("email", "chart pdf", "new")]
    neighbours = {n: [(e.kind.value, e.src, e.dst) for e, _ in store.neighbors(n)]
                  for n, *_ in nodes}
    probe = np.ones(8, dtype=np.float32) / np.sqrt(8)
    return nodes, edges, vectors, texts, neighbours, store.vector_search(NodeKind.SKILL, probe, 5)


def test_the_store_after_incremental_syncs_equals_a_fresh_read(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    texts = {f"s{i:02d}": f"skill {i} email chart pdf report{i % 5}" for i in range(30)}
    vectors = dict(zip(texts, clustered(30, rng, dims=8), strict=True))
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    similar = StoredSimilar(store)
    nodes = records(texts)

    def sync() -> None:
        ids = [n.id for n in nodes]
        edges = similar(NodeKind.SKILL, ids, np.stack([vectors[i] for i in ids]))
        store.sync(nodes, vectors, [*edges, Edge(EdgeKind.CO_USED, ids[0], ids[-1], 2.0)],
                   dict(similar.meta))

    sync()
    store.text_search(NodeKind.SKILL, "email", 3)  # the in-memory index exists before edits
    for step in range(4):
        nodes[step * 3] = replace(nodes[step * 3], text=f"edited {step} new words",
                                  content_hash=f"edit-{step}")
        vectors[nodes[step * 3].id] = clustered(1, rng, dims=8)[0]
        gone = nodes.pop(5 + step)
        del vectors[gone.id]
        added = records({f"s{90 + step}": f"new skill {step} chart"})[0]
        nodes.append(added)
        vectors[added.id] = clustered(1, rng, dims=8)[0]
        sync()
        reopened = EmbeddedStore(tmp_path / "graph.sqlite")
        assert snapshot(store) == snapshot(reopened), step
        reopened.close()
    # An edit that adds and removes nothing rewrites the edited rows of the stored matrix.
    nodes[1] = replace(nodes[1], text="only this one changed", content_hash="only")
    vectors[nodes[1].id] = clustered(1, rng, dims=8)[0]
    sync()
    reopened = EmbeddedStore(tmp_path / "graph.sqlite")
    assert reopened.vector(nodes[1].id).tobytes() == vectors[nodes[1].id].tobytes()  # type: ignore[union-attr]
    assert snapshot(store) == snapshot(reopened)
    ids = [n.id for n in nodes]
    stored = [e for e in store.edges(EdgeKind.SIMILAR_TO)]
    assert as_tuples(sorted(stored, key=lambda e: (e.src, e.dst))) == as_tuples(
        brute_force(ids, np.stack([vectors[i] for i in ids])))


@pytest.mark.parametrize("kind", [NodeKind.SKILL, NodeKind.GROUP])
def test_a_file_without_lexicons_is_counted_and_then_stored(tmp_path: Path,
                                                            kind: NodeKind) -> None:
    import sqlite3

    path = tmp_path / "graph.sqlite"
    texts = {f"n{i}": f"{kind.value} {i} email chart" for i in range(6)}
    nodes = [replace(n, kind=kind) for n in records(texts)]
    vectors = dict(zip(texts, clustered(6, np.random.default_rng(1), dims=4), strict=True))
    EmbeddedStore(path).sync(nodes, vectors, [])
    expected = EmbeddedStore(path).text_search(kind, "email chart 3", 6)
    with sqlite3.connect(path) as db:  # as a file written before the lexicon table
        db.execute("DROP TABLE lexicon")
    older = EmbeddedStore(path)
    assert older.text_search(kind, "email chart 3", 6) == expected
    older.sync(nodes, vectors, [])
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT kind FROM lexicon").fetchall() == [(kind.value,)]
    assert EmbeddedStore(path).text_search(kind, "email chart 3", 6) == expected


def test_the_stored_projection_is_what_a_search_computes(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import skillgrove.graph.embedded as embedded

    monkeypatch.setattr(embedded, "QUANTIZE_FROM", 50)
    rng = np.random.default_rng(4)
    texts = {f"s{i:03d}": f"skill {i}" for i in range(80)}
    vectors = dict(zip(texts, clustered(80, rng, dims=16), strict=True))
    path = tmp_path / "graph.sqlite"
    EmbeddedStore(path).sync(records(texts), vectors, [])
    reopened = EmbeddedStore(path)
    index = reopened._index(NodeKind.SKILL)
    stored = index._stored_projection()
    assert stored is not None
    computed = embedded._project(index.matrix)
    assert all(np.array_equal(a, b) for a, b in zip(stored, computed, strict=True))
    edited = {**texts, "s007": "edited"}
    vectors["s007"] = clustered(1, rng, dims=16)[0]
    reopened.sync(records(edited), vectors, [])
    assert reopened._index(NodeKind.SKILL)._stored_projection() is not None
    again = EmbeddedStore(path)._index(NodeKind.SKILL)
    assert all(np.array_equal(a, b) for a, b in zip(
        again._stored_projection() or (), embedded._project(again.matrix), strict=True))


def test_an_edit_in_place_splices_counts_as_counting_afresh() -> None:
    """The documents keep their numbers (an edit): the edited ones' postings are taken out and
    their new ones put in; a word only the edit used is forgotten, a new one learnt."""
    docs = [f"report {i % 7} email team{i % 3} pdf summary " * (1 + i % 4) for i in range(30)]
    docs[4] = "zebra report"
    postings = Postings.of([tokenize(d) for d in docs])
    edited = list(docs)
    edited[4] = "translate german text quokka"
    edited[17] = "email email chart"
    renumber = np.arange(len(docs))
    renumber[[4, 17]] = -1
    spliced = postings.replaced(renumber, len(docs), {4: tokenize(edited[4]),
                                                      17: tokenize(edited[17])})
    fresh = BM25([tokenize(d) for d in edited])
    assert sorted(spliced.terms) == sorted(fresh.postings.terms)
    assert "zebra" not in spliced.vocabulary and "quokka" in spliced.vocabulary
    assert spliced.vocabulary == {t: i for i, t in enumerate(spliced.terms)}
    for query in ["email report", "german chart", "pdf pdf summary", "team1", "zebra"]:
        tokens = tokenize(query)
        assert np.array_equal(BM25(spliced).scores(tokens), fresh.scores(tokens))
        assert BM25(spliced).max_score(tokens) == fresh.max_score(tokens)
    again = spliced.replaced(np.arange(len(docs)), len(docs), {})  # nothing changed
    assert np.array_equal(BM25(again).scores(tokenize("email chart")),
                          fresh.scores(tokenize("email chart")))


def test_a_lexicon_another_tokenizer_counted_is_counted_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No node changed, but the tokens did (a new version's tokenizer): the stored counts
    # would answer with the old tokens until every skill was edited.
    import skillgrove.graph.embedded as embedded

    path = tmp_path / "graph.sqlite"
    texts = {f"n{i}": f"skill {i} " + ("sends email reports" if i % 3 == 1 else "draws charts")
             for i in range(6)}
    vectors = dict(zip(texts, clustered(6, np.random.default_rng(2), dims=4), strict=True))
    with monkeypatch.context() as patched:
        patched.setattr(embedded, "tokenize", lambda text: [w[::-1] for w in text.split()])
        patched.setattr(embedded, "_TOKENIZER", "another tokenizer")
        EmbeddedStore(path).sync(records(texts), vectors, [])
        assert EmbeddedStore(path).text_search(NodeKind.SKILL, "email", 6) == []
    found = EmbeddedStore(path).text_search(NodeKind.SKILL, "email", 6)
    assert sorted(nid for nid, _ in found) == ["n1", "n4"]
