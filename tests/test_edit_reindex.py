"""What makes re-indexing one edited skill cheap keeps its meaning: the index generation is a
function of the nodes and edges as a store keeps them (in any order), a sync given back the
store's own edge objects writes only what changed, and an edit's BM25 counts, stored as a patch
on the lexicon, read back in a new process as counting afresh gives."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.indexer import generation
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord

QUERIES = ["email the team", "chart pdf", "summary report 3", "invoice 12", "translate"]


def skill(nid: str, text: str) -> NodeRecord:
    return NodeRecord(nid, NodeKind.SKILL, nid, text,
                      hashlib.sha256(text.encode()).hexdigest()[:16], {"n": nid})


def library(count: int) -> dict[str, str]:
    words = ["email", "team", "chart", "pdf", "summary", "report", "invoice", "translate"]
    return {f"s{i:03d}": " ".join(words[(i * j) % len(words)] for j in range(1, 4 + i % 5))
            + f" {i}" for i in range(count)}


def vectors_for(ids: list[str], seed: int = 0) -> dict[str, Vectors]:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((len(ids), 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return dict(zip(ids, rows, strict=True))


def searches(store: EmbeddedStore) -> list[list[tuple[str, float]]]:
    return [store.text_search(NodeKind.SKILL, q, 10) for q in QUERIES]


def counted_afresh(texts: dict[str, str]) -> list[list[tuple[str, float]]]:
    fresh = EmbeddedStore(None)
    fresh.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    return searches(fresh)


def lexicon_rows(path: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    with sqlite3.connect(path) as db:
        return (db.execute("SELECT kind, signature FROM lexicon").fetchall(),
                db.execute("SELECT kind, base FROM lexicon_patch").fetchall())


def test_generation_ignores_order_and_counts_edges_as_a_store_keeps_them() -> None:
    nodes = [skill(f"s{i}", f"text {i}") for i in range(6)]
    edges = [Edge(EdgeKind.SIMILAR_TO, f"s{i}", f"s{i + 1}", 0.6 + i / 100) for i in range(5)]
    edges.append(Edge(EdgeKind.FLOWS_TO, "s0", "s2", 1.0, {"group": "g"}))
    base = generation(nodes, edges, "model", "router")
    shuffled = edges[::-1]
    random.Random(3).shuffle(shuffled)
    assert generation(nodes[::-1], shuffled, "model", "router") == base
    # A key given twice counts once, as the last given (what a store keeps).
    doubled = [*edges, replace(edges[0], weight=0.9)]
    assert generation(nodes, doubled, "model", "router") == generation(
        nodes, [replace(edges[0], weight=0.9), *edges[1:]], "model", "router")
    assert generation(nodes, [*edges, edges[0]], "model", "router") == base
    # Anything a store keeps changes it: a weight, an edge, a group, a node's content.
    assert generation(nodes, [replace(edges[1], weight=0.7), *edges[2:], edges[0]],
                      "model", "router") != base
    assert generation(nodes, edges[1:], "model", "router") != base
    assert generation(nodes, [*edges[:-1], replace(edges[-1], props={"group": "h"})],
                      "model", "router") != base
    assert generation([replace(nodes[0], content_hash="other"), *nodes[1:]], edges,
                      "model", "router") != base
    assert generation(nodes, edges, "model", "other router") != base
    # Two edges swapping an end are two other edges.
    a, b = Edge(EdgeKind.SIMILAR_TO, "s0", "s1", 0.7), Edge(EdgeKind.SIMILAR_TO, "s2", "s3", 0.7)
    c, d = Edge(EdgeKind.SIMILAR_TO, "s0", "s3", 0.7), Edge(EdgeKind.SIMILAR_TO, "s2", "s1", 0.7)
    assert generation(nodes, [a, b]) != generation(nodes, [c, d])


def test_the_generation_of_what_a_store_holds_is_the_one_it_was_given(tmp_path: Path) -> None:
    texts = library(12)
    nodes = [skill(i, t) for i, t in texts.items()]
    edges = [Edge(EdgeKind.SIMILAR_TO, "s000", "s001", 0.75),
             Edge(EdgeKind.CONTAINS, "s002", "s003", 1.0, {"step": "a", "order": 0}),
             Edge(EdgeKind.CONTAINS, "s002", "s003", 1.0, {"step": "b", "order": 1})]
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    store.sync(nodes, vectors_for(sorted(texts)), edges)
    again = EmbeddedStore(tmp_path / "graph.sqlite")
    assert generation(again.nodes(), again.edges(), "m") == generation(nodes, edges, "m")


def test_a_sync_given_its_own_edges_back_writes_only_the_changed_ones() -> None:
    texts = library(8)
    nodes = [skill(i, t) for i, t in texts.items()]
    first = [Edge(EdgeKind.SIMILAR_TO, f"s00{i}", f"s00{i + 1}", 0.6) for i in range(7)]
    store = EmbeddedStore(None)
    vectors = vectors_for(sorted(texts))
    store.sync(nodes, vectors, first)
    held = store.edges()
    # The store's own objects, one reweighted, one dropped, one new, one equal but new.
    given = [*held[:4], replace(held[4], weight=0.8), Edge(EdgeKind.SIMILAR_TO, "s005", "s006",
                                                           0.6),
             Edge(EdgeKind.SIMILAR_TO, "s000", "s007", 0.9)]
    report = store.sync(nodes, vectors, given)
    assert (report.edges_added, report.edges_removed) == (2, 1)
    assert sorted((e.src, e.dst, e.weight) for e in store.edges()) == sorted(
        (e.src, e.dst, e.weight) for e in given)
    assert not store.sync(nodes, vectors, store.edges()).changed


def test_an_edit_is_stored_as_a_patch_that_reads_back_as_counting_afresh(
        tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    texts = library(40)
    store = EmbeddedStore(path)
    store.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    (base,), () = lexicon_rows(path)
    edits = [("s003", "translate the invoice 12 to pdf"), ("s017", "email email team chart"),
             ("s040", "a new skill: summary report 3 for the team"), ("s011", None),
             ("s003", "translate invoice"), ("s041", "invoice 12 summary")]
    for nid, text in edits:  # one change per sync, each on top of the last
        if text is None:
            del texts[nid]
        else:
            texts[nid] = text
        report = store.sync([skill(i, t) for i, t in sorted(texts.items())],
                            vectors_for(sorted(texts), seed=len(texts)), [])
        assert report.changed
        lexicon, patch = lexicon_rows(path)
        assert lexicon == [base] and patch == [(base[0], base[1])]  # the lexicon stays
        expected = counted_afresh(texts)
        assert searches(store) == expected
        assert searches(EmbeddedStore(path)) == expected  # a new process applies the patch


def test_a_patch_naming_too_many_nodes_gives_way_to_the_whole_lexicon(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import skillgrove.graph.embedded as embedded

    monkeypatch.setattr(embedded, "PATCH_AT_MOST", 2)
    path = tmp_path / "graph.sqlite"
    texts = library(20)
    store = EmbeddedStore(path)
    store.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    (base,), () = lexicon_rows(path)
    for count, nid in enumerate(["s001", "s002", "s003"], start=1):
        texts[nid] = f"edited chart {count}"
        store.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
        lexicon, patch = lexicon_rows(path)
        if count <= 2:
            assert lexicon == [base] and len(patch) == 1
        else:  # three nodes to count again: the whole lexicon is written, the patch dropped
            assert lexicon != [base] and patch == []
        assert searches(EmbeddedStore(path)) == counted_afresh(texts)


def test_a_patch_that_does_not_apply_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    texts = library(20)
    store = EmbeddedStore(path)
    store.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    texts["s004"] = "invoice 12 email"
    store.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    with sqlite3.connect(path) as db:  # as if another version rewrote the lexicon since
        db.execute("UPDATE lexicon_patch SET base = 'something else'")
    reopened = EmbeddedStore(path)
    assert searches(reopened) == counted_afresh(texts)  # counted from the texts
    texts["s005"] = "chart pdf summary"
    reopened.sync([skill(i, t) for i, t in texts.items()], vectors_for(sorted(texts)), [])
    assert lexicon_rows(path)[1] == []  # the whole lexicon again
    assert searches(EmbeddedStore(path)) == counted_afresh(texts)


def test_gc_is_paused_for_the_block_and_restored_after_it() -> None:
    import gc

    from skillgrove.graph.indexer import gc_paused

    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a failed sync")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_of_edges_given_under_one_key_the_last_counts_held_or_not() -> None:
    """Edges are told apart by identity first; when the store's own object and another are
    given under one key, the order still decides, as with any two edges."""
    texts = library(6)
    nodes = [skill(i, t) for i, t in texts.items()]
    vectors = vectors_for(sorted(texts))
    store = EmbeddedStore(None)
    store.sync(nodes, vectors, [Edge(EdgeKind.SIMILAR_TO, "s000", "s001", 0.6),
                                Edge(EdgeKind.SIMILAR_TO, "s001", "s002", 0.7)])
    held = store.edges()
    heavier = replace(held[0], weight=0.9)
    store.sync(nodes, vectors, [held[0], heavier, held[1]])
    assert [e.weight for e in store.edges()] == [0.9, 0.7]
    held = store.edges()
    store.sync(nodes, vectors, [replace(held[0], weight=0.5), *held])  # the held one last
    assert [e.weight for e in store.edges()] == [0.9, 0.7]
    assert not store.sync(nodes, vectors, store.edges()).changed


def test_a_written_edge_is_kept_as_given_when_it_reads_back_as_itself(tmp_path: Path) -> None:
    texts = library(6)
    nodes = [skill(i, t) for i, t in texts.items()]
    vectors = vectors_for(sorted(texts))
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    store.edges()  # the edges read (none yet)
    plain = Edge(EdgeKind.SIMILAR_TO, "s000", "s001", 0.6)
    with_props = Edge(EdgeKind.CONTAINS, "s002", "s003", 1.0, {"step": "a", "order": 0})
    whole = Edge(EdgeKind.CO_USED, "s000", "s002", 2)  # an int weight reads back as 2.0
    store.sync(nodes, vectors, [plain, with_props, whole])
    kept = {e.key: e for e in store.edges()}
    assert kept[plain.key] is plain
    assert kept[with_props.key] is not with_props and kept[whole.key] is not whole
    assert type(kept[whole.key].weight) is float
    fresh = EmbeddedStore(tmp_path / "graph.sqlite")
    assert [(e.key, e.weight, dict(e.props)) for e in fresh.edges()] == [
        (e.key, e.weight, dict(e.props)) for e in store.edges()]
    assert generation(fresh.nodes(), fresh.edges()) == generation(store.nodes(), store.edges())


def test_the_generation_kept_through_updates_is_the_one_computed_afresh(tmp_path: Path) -> None:
    """generation_with adds the digests' sums the SIMILAR_TO results carry (kept as edges go
    and come) instead of a pass over their edges: after edits, additions and removals it is
    the generation of all the edges."""
    from skillgrove.graph.indexer import StoredSimilar, generation_with

    rng = np.random.default_rng(9)
    centres = rng.standard_normal((5, 12)) + 2.0 * rng.standard_normal(12)

    def vector() -> Vectors:
        row = centres[int(rng.integers(5))] + 0.7 * rng.standard_normal(12)
        unit: Vectors = (row / np.linalg.norm(row)).astype(np.float32)
        return unit

    texts = library(60)
    vectors = {nid: vector() for nid in texts}
    groups = {f"group:g{i}": vector() for i in range(12)}
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    others = [Edge(EdgeKind.CONTAINS, "group:g0", "s001", 1.0, {"step": "a", "order": 0}),
              Edge(EdgeKind.CO_USED, "s001", "s002", 2.0)]
    changes = [("edit", "s003"), ("add", "s100"), ("remove", "s010"), ("edit", "s020"),
               ("add", "group:g99"), ("remove", "group:g3"), ("none", "")]
    for what, nid in [("none", ""), *changes]:
        target = groups if nid.startswith("group:") else texts
        if what == "edit":
            texts[nid] = texts[nid] + " edited"
            vectors[nid] = vector()
        elif what == "add":
            if target is groups:
                groups[nid] = vector()
            else:
                texts[nid], vectors[nid] = f"new {nid}", vector()
        elif what == "remove":
            del target[nid]
            vectors.pop(nid, None)
        nodes = [skill(i, t) for i, t in texts.items()]
        nodes += [NodeRecord(g, NodeKind.GROUP, g, g, g, {}) for g in groups]
        similar = StoredSimilar(store)
        similar_to = [*similar(NodeKind.SKILL, list(texts), np.stack(
                          [vectors[i] for i in texts])),
                      *similar(NodeKind.GROUP, list(groups), np.stack(list(groups.values())))]
        kept = generation_with(nodes, others, similar, "m")
        assert kept == generation(nodes, [*others, *similar_to], "m"), (what, nid)
        store.sync(nodes, {**vectors, **groups}, [*others, *similar_to], similar.meta)
        assert kept == generation(store.nodes(), store.edges(), "m")
    # A SIMILAR_TO edge among the others could share a key: the whole pass decides.
    similar = StoredSimilar(store)
    similar_to = similar(NodeKind.SKILL, list(texts), np.stack([vectors[i] for i in texts]))
    doubled = [*others, replace(similar_to[0], weight=0.1)]
    assert generation_with(nodes, doubled, similar, "m") == generation(
        nodes, [*doubled, *similar_to], "m")
    # A kind asked twice hands out its edges twice.
    twice = StoredSimilar(store)
    ids, matrix = list(texts), np.stack([vectors[i] for i in texts])
    both = [*twice(NodeKind.SKILL, ids, matrix), *twice(NodeKind.SKILL, ids, matrix)]
    assert generation_with(nodes, others, twice, "m") == generation(nodes, [*others, *both], "m")
