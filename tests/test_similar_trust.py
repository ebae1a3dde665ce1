"""What a re-index believes about stored SIMILAR_TO edges: only what the vectors the store holds
confirm. The store's row digests are always those of its rows; a stored key that does not name
the stored vectors (stale, tampered) is never used; what this process computed last is used only
while the store holds the vectors it was computed from; and every path gives the edges of the
whole computation."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import skillgrove.graph.indexer as indexer
from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.indexer import (
    SIMILAR_IDS_KEY,
    SIMILAR_KEY,
    StoredSimilar,
    similar_edges,
    similar_key,
)
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, vector_digest
from tests.test_incremental_similar import unit


class Library:
    """Skills with clustered vectors (a shared direction, as sentence embeddings have), edited
    in place, added to and removed from."""

    def __init__(self, count: int, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.standard_normal((6, 16)) + 1.5 * self.rng.standard_normal(16)
        self.nodes: dict[str, NodeRecord] = {}
        self.vectors: dict[str, Vectors] = {}
        for i in range(count):
            self.put(f"s{i:03d}")

    def put(self, nid: str) -> None:
        """A new skill, or a new text and vector for an existing one."""
        version = self.nodes[nid].content_hash + "'" if nid in self.nodes else f"v{self.seed}"
        centre = self.centres[int(self.rng.integers(len(self.centres)))]
        self.vectors[nid] = unit((centre + 0.8 * self.rng.standard_normal(16))[None])[0]
        self.nodes[nid] = NodeRecord(nid, NodeKind.SKILL, nid, f"skill {nid} {version}",
                                     version, {})

    def drop(self, nid: str) -> None:
        del self.nodes[nid], self.vectors[nid]

    def ids(self) -> list[str]:
        return list(self.nodes)

    def matrix(self) -> Vectors:
        return np.stack([self.vectors[i] for i in self.nodes])

    def expected(self) -> list[tuple[str, str, float]]:
        """The whole computation's edges (not counted by ``full_computations``)."""
        return as_tuples(WHOLE(self.ids(), self.matrix(), indexer.SIMILAR_K,
                               indexer.SIMILAR_THRESHOLD, indexer.SIMILAR_BLOCK).edges)


WHOLE = indexer._computed


def as_tuples(edges: list[Edge]) -> list[tuple[str, str, float]]:
    return sorted((e.src, e.dst, e.weight) for e in edges)


def index(store: EmbeddedStore, library: Library) -> list[Edge]:
    """What ``index_library`` does with SIMILAR_TO: compute against the store, then sync."""
    similar = StoredSimilar(store)
    edges = similar(NodeKind.SKILL, library.ids(), library.matrix())
    store.sync(list(library.nodes.values()), library.vectors, edges, similar.meta)
    return edges


@pytest.fixture
def full_computations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the whole computations StoredSimilar falls back to."""
    calls: list[int] = []

    def counted(ids: list[str], *args: Any, **kwargs: Any) -> object:
        calls.append(len(ids))
        return WHOLE(ids, *args, **kwargs)

    monkeypatch.setattr(indexer, "_computed", counted)
    yield calls


def test_the_key_names_the_vectors_whatever_their_order() -> None:
    library = Library(30)
    ids, matrix = library.ids(), library.matrix()
    key = similar_key(ids, matrix)
    assert similar_key(ids[::-1], matrix[::-1]) == key
    moved = matrix.copy()
    moved[3, 0] = np.nextafter(moved[3, 0], np.float32(2))  # one bit of one row
    assert similar_key(ids, moved) != key
    swapped = matrix.copy()
    swapped[[0, 1]] = swapped[[1, 0]]  # the same vectors on other nodes
    assert similar_key(ids, swapped) != key
    assert similar_key(ids[:-1], matrix[:-1]) != key


def test_the_stores_row_digests_are_those_of_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    library = Library(40)
    store = EmbeddedStore(path)
    index(store, library)

    def computed(on: EmbeddedStore) -> tuple[int, ...]:
        held = on.vector_digests(NodeKind.SKILL)
        assert held is not None
        ids, matrix, digests = held
        assert list(ids) == sorted(library.nodes)
        assert all(np.array_equal(matrix[i], library.vectors[nid]) for i, nid in enumerate(ids))
        assert digests == tuple(vector_digest(nid, row) for nid, row in zip(ids, matrix,
                                                                            strict=True))
        return digests

    computed(store)
    for step in range(4):  # carried over by each sync: an edit, an addition, a removal
        library.put(f"s{step * 7:03d}")
        library.put(f"n{step}")
        library.drop(f"s{step * 5 + 1:03d}")
        index(store, library)
        assert computed(store) == computed(EmbeddedStore(path)), step
    held = store.vector_digests(NodeKind.SKILL)
    assert held is not None and not held[1].flags.writeable  # a view the caller cannot change


def test_every_path_gives_the_whole_computation(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    library = Library(120, seed=1)
    store = EmbeddedStore(path)
    assert as_tuples(index(store, library)) == library.expected()
    changes: list[Callable[[], None]] = [
        lambda: library.put("s010"), lambda: library.put("s111"), lambda: library.drop("s050"),
        lambda: library.put("new-a"), lambda: (library.put("s020"), library.drop("s021")),
        lambda: None,
    ]
    for step, change in enumerate(changes):
        change()
        assert as_tuples(index(store, library)) == library.expected(), step
        reopened = EmbeddedStore(path)  # a new process: the stored edges, checked
        assert as_tuples(reopened.edges(EdgeKind.SIMILAR_TO)) == library.expected(), step
    library.put("s030")
    assert as_tuples(index(EmbeddedStore(path), library)) == library.expected()


def test_an_edit_in_the_same_process_is_updated_not_recomputed(
        tmp_path: Path, full_computations: list[int]) -> None:
    library = Library(120, seed=2)
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index(store, library)
    assert full_computations == [120]
    for nid in ("s001", "s060", "s119"):
        library.put(nid)
        assert as_tuples(index(store, library)) == library.expected()
    library.put("another")
    library.drop("s002")
    assert as_tuples(index(store, library)) == library.expected()
    assert full_computations == [120]
    library.put("s003")  # a new process: the stored edges, their key checked, are updated
    assert as_tuples(index(EmbeddedStore(tmp_path / "graph.sqlite"), library)) == (
        library.expected())
    assert full_computations == [120]


def test_a_stale_stored_key_is_not_believed(tmp_path: Path, full_computations: list[int]) -> None:
    """The vectors change under a stored key (a sync without the SIMILAR_TO metadata): the
    stored edges belong to other vectors, so they are neither kept nor updated."""
    path = tmp_path / "graph.sqlite"
    library = Library(80, seed=3)
    index(EmbeddedStore(path), library)
    stale = EmbeddedStore(path)
    for nid in ("s004", "s005"):
        library.put(nid)
    stale.sync(list(library.nodes.values()), library.vectors, stale.edges())  # old edges, meta
    assert as_tuples(stale.edges(EdgeKind.SIMILAR_TO)) != library.expected()
    for store in (stale, EmbeddedStore(path)):  # the process that wrote it, and a new one
        full_computations.clear()
        similar = StoredSimilar(store)
        edges = similar(NodeKind.SKILL, library.ids(), library.matrix())
        assert as_tuples(edges) == library.expected()
        assert full_computations == [80]


@pytest.mark.parametrize("tamper", ["key", "ids", "vectors"])
def test_a_tampered_index_is_not_believed(tmp_path: Path, full_computations: list[int],
                                          tamper: str) -> None:
    import sqlite3

    path = tmp_path / "graph.sqlite"
    library = Library(80, seed=4)
    index(EmbeddedStore(path), library)
    with sqlite3.connect(path) as db:
        if tamper == "key":
            db.execute("UPDATE meta SET value = ? WHERE key = ?",
                       ("0" * 32, f"{SIMILAR_KEY}:skill"))
        elif tamper == "ids":
            db.execute("UPDATE meta SET value = '[\"s000\", \"s001\"]' WHERE key = ?",
                       (f"{SIMILAR_IDS_KEY}:skill",))
        else:  # one stored vector rewritten behind the index's back
            row = np.frombuffer(db.execute("SELECT vectors FROM matrix").fetchone()[0],
                                dtype=np.float32).copy()
            row[0] = -row[0]
            db.execute("UPDATE matrix SET vectors = ?", (row.tobytes(),))
    library.put("s010")
    edges = StoredSimilar(EmbeddedStore(path))(NodeKind.SKILL, library.ids(), library.matrix())
    assert as_tuples(edges) == library.expected()
    assert full_computations == [80, 80]


def test_what_was_computed_last_is_not_used_once_the_store_holds_other_vectors(
        tmp_path: Path, full_computations: list[int]) -> None:
    """The same process computed edges for some vectors, then the store got others (another
    sync, or another process): the remembered edges no longer describe the store."""
    path = tmp_path / "graph.sqlite"
    library = Library(80, seed=5)
    store = EmbeddedStore(path)
    index(store, library)
    other = Library(80, seed=6)  # the same ids, other vectors, synced by another process
    EmbeddedStore(path).sync(list(other.nodes.values()), other.vectors, [])
    held = store.vector_digests(NodeKind.SKILL)
    assert held is not None and np.array_equal(held[1], other.matrix())
    other.put("s007")
    edges = StoredSimilar(store)(NodeKind.SKILL, other.ids(), other.matrix())
    assert as_tuples(edges) == other.expected()
    assert full_computations == [80, 80]


def test_a_key_written_before_row_digests_is_still_updated(
        tmp_path: Path, full_computations: list[int]) -> None:
    """A file whose key hashes the ids and the whole matrix in order (the previous
    definition): its edges are updated, not computed again (minutes at 100k skills)."""
    path = tmp_path / "graph.sqlite"
    library = Library(80, seed=7)
    store = EmbeddedStore(path)
    edges = similar_edges(library.ids(), library.matrix())
    hasher = hashlib.sha256(f"{indexer.SIMILAR_VERSION}\0{indexer.SIMILAR_K}\0"
                            f"{indexer.SIMILAR_THRESHOLD}\0".encode())
    hasher.update("\0".join(library.ids()).encode())
    hasher.update(library.matrix().data.cast("B"))
    import json

    store.sync(list(library.nodes.values()), library.vectors, edges,
               {f"{SIMILAR_KEY}:skill": hasher.hexdigest()[:32],
                f"{SIMILAR_IDS_KEY}:skill": json.dumps(library.ids())})
    full_computations.clear()
    library.put("s011")
    assert as_tuples(index(EmbeddedStore(path), library)) == library.expected()
    assert full_computations == []


def test_an_edited_content_hash_alone_keeps_the_edges(tmp_path: Path) -> None:
    """A node whose text changed but not its vector: the key is the same, the edges kept."""
    library = Library(40, seed=8)
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index(store, library)
    library.nodes["s001"] = replace(library.nodes["s001"], content_hash="other")
    similar = StoredSimilar(store)
    edges = similar(NodeKind.SKILL, library.ids(), library.matrix())
    assert as_tuples(edges) == library.expected()
    assert similar.meta[f"{SIMILAR_KEY}:skill"] == store.get_meta(f"{SIMILAR_KEY}:skill")


class WithoutDigests:
    """A store that keeps no row digests and hands vectors over one by one (as the Neo4j
    store does): the stored key is checked against the vectors read back."""

    def __init__(self, store: EmbeddedStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name in ("vector_digests", "matrix_rows"):
            raise AttributeError(name)
        return getattr(self.store, name)


def test_a_store_without_row_digests_gets_the_same_edges(
        tmp_path: Path, full_computations: list[int]) -> None:
    path = tmp_path / "graph.sqlite"
    library = Library(90, seed=10)
    index(EmbeddedStore(path), library)
    for change in ("s004", "s050", "added"):
        library.put(change)
        plain = WithoutDigests(EmbeddedStore(path))
        similar = StoredSimilar(plain)  # type: ignore[arg-type]
        edges = similar(NodeKind.SKILL, library.ids(), library.matrix())
        assert as_tuples(edges) == library.expected(), change
        plain.store.sync(list(library.nodes.values()), library.vectors, edges, similar.meta)
    assert full_computations == [90]
    with_stale_key = WithoutDigests(EmbeddedStore(path))
    library.put("s005")
    with_stale_key.store.sync(list(library.nodes.values()), library.vectors,
                              with_stale_key.store.edges())  # new vectors, the old key
    library.put("s006")
    edges = StoredSimilar(with_stale_key)(  # type: ignore[arg-type]
        NodeKind.SKILL, library.ids(), library.matrix())
    assert as_tuples(edges) == library.expected()
    assert full_computations == [90, 91]


def test_the_edges_an_edit_keeps_are_the_objects_the_store_holds(tmp_path: Path) -> None:
    """Edges an update hands back unchanged, those chosen again among them, are the store's
    own objects, so a sync knows them without comparing: after many edits, only the edges
    that changed are new objects."""
    library = Library(150, seed=11)
    store = EmbeddedStore(tmp_path / "graph.sqlite")
    index(store, library)
    for step in range(12):
        library.put(f"s{step * 11:03d}")
        similar = StoredSimilar(store)
        edges = similar(NodeKind.SKILL, library.ids(), library.matrix())
        held = {e.key: e for e in store.edges(EdgeKind.SIMILAR_TO)}
        strangers = [e for e in edges if held.get(e.key) is not e]
        assert all(e.key not in held or held[e.key].weight != e.weight for e in strangers)
        store.sync(list(library.nodes.values()), library.vectors, edges, similar.meta)
        assert as_tuples(edges) == library.expected()
