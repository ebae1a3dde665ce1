"""The embedded store: networkx in memory, one SQLite file on disk. No server; the default.

The SQLite file is the source of truth, so a second process opens the index without rebuilding
anything: it reads the nodes, edges, vectors and metadata back (a few hundred milliseconds for
thousands of skills) and builds the lexical index in memory. A sync is one SQLite transaction
holding the graph and its metadata (generation, router, fingerprint), so a failed or interrupted
sync — even a process killed halfway — leaves the previous graph and its metadata intact.

A process that keeps the store open sees another process's re-index: :meth:`get_meta` (which the
retriever calls before each search) asks SQLite whether another connection committed since
(``PRAGMA data_version``, a few microseconds) and then reads everything back, and a sync starts
from what is on disk, not from what this process last read.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import networkx as nx
import numpy as np
from threadpoolctl import threadpool_limits

from skillgrove.graph.bm25 import BM25
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.errors import StoreError
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.runlog import make_private_folder
from skillgrove.graph.text import query_tokens, tokenize

_SCHEMA = """
CREATE TABLE IF NOT EXISTS node (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, text TEXT NOT NULL,
    content_hash TEXT NOT NULL, data TEXT NOT NULL, vector BLOB);
CREATE TABLE IF NOT EXISTS edge (
    kind TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL, grp TEXT NOT NULL DEFAULT '',
    weight REAL NOT NULL, props TEXT NOT NULL, PRIMARY KEY (kind, src, dst, grp));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS matrix (
    kind TEXT PRIMARY KEY, ids TEXT NOT NULL, dims INTEGER NOT NULL, vectors BLOB NOT NULL);
"""
"""``matrix`` holds each kind's vectors as one float32 blob, rows in the order of ``ids``
(a JSON list, sorted): opening 100k skills reads one blob instead of 100k rows. Files
written before it keep their vectors in ``node.vector``, which is read when a kind has no
matrix row; a sync then writes the matrix."""


class EmbeddedStore:
    """``EmbeddedStore(Path(".skillgrove/graph.sqlite"))``; ``EmbeddedStore(None)`` is in memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            make_private_folder(path.parent)
        try:
            self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False)
            self._db.executescript(_SCHEMA)
            self._lock = threading.RLock()
            self._load()
        except sqlite3.DatabaseError as exc:
            what = ("is not a SQLite database" if "not a database" in str(exc)
                    else f"cannot be read ({exc})")
            raise StoreError(f"the index {path} {what}: move it aside and run `skillgrove "
                             "index` to rebuild it") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the index at {path}: {exc}") from exc
        except (ValueError, KeyError) as exc:  # rows this version cannot read
            raise StoreError(f"the index {path} holds rows this version cannot read ({exc}): "
                             "move it aside and run `skillgrove index` to rebuild it") from exc

    # -- loading ------------------------------------------------------------------------------

    def _load(self, *, in_transaction: bool = False) -> None:
        """Reads the graph, vectors and metadata back as of one moment (one read transaction,
        unless the caller already holds one). Node records are parsed, and edges read, on
        first use: a process that only searches never pays for what it does not touch."""
        if not in_transaction:
            self._db.execute("BEGIN")
        try:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            rows = {nid: (kind, name, text, digest, data) for nid, kind, name, text, digest, data
                    in self._db.execute("SELECT id, kind, name, text, content_hash, data "
                                        "FROM node ORDER BY id")}
            matrices: dict[NodeKind, tuple[list[str], Vectors]] = {}
            for kind, ids, dims, blob in self._db.execute(
                    "SELECT kind, ids, dims, vectors FROM matrix"):
                names = [str(i) for i in json.loads(ids)]
                matrices[NodeKind(kind)] = (names, np.frombuffer(blob, dtype=np.float32).reshape(
                    len(names), int(dims)))
            kinds = {NodeKind(row[0]) for row in rows.values()}
            if kinds - set(matrices):  # a file from before the matrix table
                matrices.update(_row_matrices(self._db, kinds - set(matrices)))
            edges = _edge_rows(self._db)
            meta = {str(k): str(v) for k, v in self._db.execute("SELECT key, value FROM meta")}
        finally:
            if not in_transaction:
                self._db.rollback()
        self._nodes: Mapping[str, NodeRecord] = _LazyNodes(rows)
        self._matrices = matrices
        self._vectors: Mapping[str, Vectors] = _RowVectors(matrices)
        self._edge_rows = edges
        self._edge_map: dict[tuple[str, str, str, str], Edge] | None = None
        self._graph_cache: nx.MultiDiGraph | None = None
        self._meta = meta
        self._indexes: dict[NodeKind, _KindIndex] = {}
        self._data_version = version

    @property
    def _edges(self) -> dict[tuple[str, str, str, str], Edge]:
        edges = self._edge_map
        if edges is None:
            with self._lock:
                edges = self._edge_map
                if edges is None:
                    edges = {}
                    for kind, src, dst, _grp, weight, props in self._edge_rows:
                        edge = Edge(EdgeKind(kind), src, dst, weight,
                                    json.loads(props) if props != "{}" else {})
                        edges[edge.key] = edge
                    self._edge_map = edges
        return edges

    @property
    def _graph(self) -> nx.MultiDiGraph:
        graph = self._graph_cache
        if graph is None:
            edges = self._edges
            with self._lock:
                graph = self._graph_cache
                if graph is None:
                    graph = nx.MultiDiGraph()
                    graph.add_nodes_from(self._nodes)
                    graph.add_edges_from((e.src, e.dst, (e.kind.value, k[3]), {"edge": e})
                                         for k, e in edges.items())
                    self._graph_cache = graph
        return graph

    def _changed_elsewhere(self) -> bool:
        """Whether another connection (another process) committed since this one last read."""
        return bool(self._db.execute("PRAGMA data_version").fetchone()[0] != self._data_version)

    def _refresh(self) -> None:
        with self._lock:
            try:
                if self._changed_elsewhere():
                    self._load()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the index at {self.path}: {exc}") from exc

    def _index(self, kind: NodeKind) -> _KindIndex:
        index = self._indexes.get(kind)
        if index is None:
            with self._lock:
                index = self._indexes.get(kind)
                if index is None:
                    records = [r for r in self._nodes.values() if r.kind is kind]
                    ids, matrix = self._matrices.get(kind, ([], None))
                    index = _KindIndex(records, ids, matrix)
                    self._indexes[kind] = index
        return index

    # -- the Protocol -------------------------------------------------------------------------

    def sync(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
             edges: Sequence[Edge], meta: Mapping[str, str] | None = None) -> SyncReport:
        with self._lock:
            try:
                # The write lock first, then what is on disk now: the difference is taken
                # against the graph this transaction replaces, whoever wrote it.
                self._db.execute("BEGIN IMMEDIATE")
                if self._changed_elsewhere():
                    self._load(in_transaction=True)
                report = self._sync_in_transaction(nodes, vectors, edges, meta or {})
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"sync failed, the previous index is intact: {exc}") from exc
            except BaseException:
                self._db.rollback()
                raise
            self._load()
            return report

    def _sync_in_transaction(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
                             edges: Sequence[Edge], meta: Mapping[str, str]) -> SyncReport:
        wanted = {n.id: n for n in nodes}
        added = [n for n in nodes if n.id not in self._nodes]
        updated = [n for n in nodes if n.id in self._nodes
                   and self._nodes[n.id].content_hash != n.content_hash]
        removed = [nid for nid in self._nodes if nid not in wanted]
        for record in (*added, *updated):
            if record.id not in vectors and record.id not in self._vectors:
                raise StoreError(f"sync: no vector for node {record.id!r}")
        wanted_edges = {e.key: e for e in edges}
        new_edges = [e for k, e in wanted_edges.items()
                     if k not in self._edges or _edge_changed(self._edges[k], e)]
        gone_edges = [k for k in self._edges if k not in wanted_edges]
        self._db.executemany("DELETE FROM node WHERE id = ?", [(i,) for i in removed])
        self._db.executemany(
            "INSERT OR REPLACE INTO node VALUES (?, ?, ?, ?, ?, ?, NULL)",
            [(n.id, n.kind.value, n.name, n.text, n.content_hash,
              json.dumps(dict(n.data), ensure_ascii=False, sort_keys=True))
             for n in (*added, *updated)])
        fresh = {n.id for n in (*added, *updated)}
        touched = ({n.kind for n in (*added, *updated)}
                   | {self._nodes[i].kind for i in removed}
                   | ({n.kind for n in nodes} - set(self._stored_matrix_kinds())))
        for kind in sorted(touched, key=lambda k: k.value):
            rows = []
            for nid in sorted(n.id for n in nodes if n.kind is kind):
                given, old = vectors.get(nid), self._vectors.get(nid)
                vector = (given if given is not None else old) if nid in fresh else (
                    old if old is not None else given)
                if vector is not None:
                    rows.append((nid, np.asarray(vector, dtype=np.float32)))
            if rows:
                blob = np.ascontiguousarray(np.stack([v for _, v in rows]), dtype=np.float32)
                self._db.execute("INSERT OR REPLACE INTO matrix VALUES (?, ?, ?, ?)",
                                 (kind.value, json.dumps([i for i, _ in rows]), blob.shape[1],
                                  blob.tobytes()))
            else:
                self._db.execute("DELETE FROM matrix WHERE kind = ?", (kind.value,))
        self._db.executemany(
            "DELETE FROM edge WHERE kind = ? AND src = ? AND dst = ? AND grp = ?",
            gone_edges)
        self._db.executemany(
            "INSERT OR REPLACE INTO edge VALUES (?, ?, ?, ?, ?, ?)",
            [(*e.key, e.weight, json.dumps(dict(e.props), sort_keys=True))
             for e in new_edges])
        self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             [(key, value) for key, value in meta.items()])
        return SyncReport(tuple(n.id for n in added), tuple(n.id for n in updated),
                          tuple(removed), len(nodes) - len(added) - len(updated),
                          len(new_edges), len(gone_edges))

    def _stored_matrix_kinds(self) -> list[NodeKind]:
        return [NodeKind(k) for (k,) in self._db.execute("SELECT kind FROM matrix")]

    def node(self, node_id: str) -> NodeRecord | None:
        return self._nodes.get(node_id)

    def nodes(self, kind: NodeKind | None = None) -> list[NodeRecord]:
        return [n for n in self._nodes.values() if kind is None or n.kind is kind]

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        return [e for e in self._edges.values() if kind is None or e.kind is kind]

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        if node_id not in self._graph:
            return []
        out: list[tuple[Edge, NodeRecord]] = []
        for _, other, data in self._graph.out_edges(node_id, data=True):
            edge: Edge = data["edge"]
            if kinds is None or edge.kind in kinds:
                out.append((edge, self._nodes[other]))
        for other, _, data in self._graph.in_edges(node_id, data=True):
            edge = data["edge"]
            if kinds is None or edge.kind in kinds:
                out.append((edge, self._nodes[other]))
        return out

    def vector_search(self, kind: NodeKind, vector: Vectors, k: int) -> list[tuple[str, float]]:
        return self._index(kind).vector_top(vector, k)

    def text_search(self, kind: NodeKind, query: str, k: int) -> list[tuple[str, float]]:
        return self._index(kind).text_top(query, k)

    def vector(self, node_id: str) -> Vectors | None:
        return self._vectors.get(node_id)

    def nodes_by_id(self, ids: Iterable[str]) -> dict[str, NodeRecord]:
        return {nid: record for nid in ids if (record := self.node(nid)) is not None}

    def vectors(self, ids: Iterable[str]) -> dict[str, Vectors]:
        return {nid: vector for nid in ids if (vector := self.vector(nid)) is not None}

    def neighbors_of(self, ids: Iterable[str], kinds: Sequence[EdgeKind] | None = None,
                     ) -> dict[str, list[tuple[Edge, NodeRecord]]]:
        return {nid: self.neighbors(nid, kinds) for nid in ids}

    def text_searches(self, query: str, limits: Mapping[NodeKind, int],
                      ) -> dict[NodeKind, list[tuple[str, float]]]:
        return {kind: self.text_search(kind, query, k) for kind, k in limits.items()}

    def vector_searches(self, vector: Vectors, limits: Mapping[NodeKind, int],
                        ) -> dict[NodeKind, list[tuple[str, float]]]:
        return {kind: self.vector_search(kind, vector, k) for kind, k in limits.items()}

    def get_meta(self, key: str) -> str | None:
        self._refresh()
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            try:
                with self._db:
                    self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write to the index at {self.path}: {exc}") from exc
            self._meta = {**self._meta, key: value}

    def close(self) -> None:
        self._db.close()


def _edge_changed(old: Edge, new: Edge) -> bool:
    return old.weight != new.weight or dict(old.props) != dict(new.props)


def _row_matrices(db: sqlite3.Connection, kinds: set[NodeKind],
                  ) -> dict[NodeKind, tuple[list[str], Vectors]]:
    """Per-kind matrices from the per-row vectors of a file written before ``matrix``."""
    found: dict[NodeKind, tuple[list[str], list[Vectors]]] = {k: ([], []) for k in kinds}
    for nid, kind, blob in db.execute("SELECT id, kind, vector FROM node "
                                      "WHERE vector IS NOT NULL ORDER BY id"):
        entry = found.get(NodeKind(kind))
        if entry is not None:
            entry[0].append(nid)
            entry[1].append(np.frombuffer(blob, dtype=np.float32))
    return {kind: (ids, np.stack(rows)) for kind, (ids, rows) in found.items() if ids}


def _edge_rows(db: sqlite3.Connection) -> list[tuple[str, str, str, str, float, str]]:
    return list(db.execute("SELECT kind, src, dst, grp, weight, props FROM edge "
                           "ORDER BY kind, src, dst, grp"))


class _LazyNodes(Mapping[str, NodeRecord]):
    """Node records by id, each parsed (its JSON data decoded) on first access."""

    def __init__(self, rows: dict[str, tuple[str, str, str, str, str]]) -> None:
        self._rows = rows
        self._parsed: dict[str, NodeRecord] = {}

    def __getitem__(self, node_id: str) -> NodeRecord:
        record = self._parsed.get(node_id)
        if record is None:
            kind, name, text, digest, data = self._rows[node_id]
            record = NodeRecord(node_id, NodeKind(kind), name, text, digest, json.loads(data))
            self._parsed[node_id] = record
        return record

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class _RowVectors(Mapping[str, Vectors]):
    """A node's vector: a read-only view of its row in its kind's matrix."""

    def __init__(self, matrices: Mapping[NodeKind, tuple[list[str], Vectors]]) -> None:
        self._matrices = matrices
        self._where: dict[str, tuple[Vectors, int]] | None = None

    def _index(self) -> dict[str, tuple[Vectors, int]]:
        where = self._where
        if where is None:
            where = {nid: (matrix, row) for ids, matrix in self._matrices.values()
                     for row, nid in enumerate(ids)}
            self._where = where
        return where

    def __getitem__(self, node_id: str) -> Vectors:
        matrix, row = self._index()[node_id]
        vector: Vectors = matrix[row]
        return vector

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._index()

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


_BLAS_LIMITED = False


def _single_blas_thread() -> None:
    """Searching uses one BLAS thread, set once per process: for a matrix-vector product the
    idle workers' busy-waiting costs more than they save, and halved the speed of the next
    query's embedding (52 ms against 24 ms here). Checking per call costs milliseconds."""
    global _BLAS_LIMITED
    if not _BLAS_LIMITED:
        threadpool_limits(limits=1, user_api="blas")
        _BLAS_LIMITED = True


QUANTIZE_FROM = 20_000
"""Rows from which vector search scans a low-dimensional projection first and rescores the
best :data:`RESCORE` candidates exactly; below it the exact scan is as fast."""
PROJECTED_DIMS = 128
RESCORE = 1000


class _KindIndex:
    """Lexical (BM25) and vector search over the nodes of one kind, built on first use.

    Above :data:`QUANTIZE_FROM` rows the exact float32 scan is limited by memory bandwidth
    (15 ms for 100k x 384 here); the index then also keeps the matrix projected on its
    :data:`PROJECTED_DIMS` principal directions (a third of the bytes), ranks every row by the
    projection and rescores the top :data:`RESCORE` with the full vectors. Scores returned
    are always exact cosines; recall@10 against the exact scan is measured by
    ``bench/scale.py`` and tested in ``tests/test_scale.py``."""

    def __init__(self, records: Sequence[NodeRecord], vector_ids: Sequence[str],
                 matrix: Vectors | None) -> None:
        self.ids = [r.id for r in records]
        self.bm25 = BM25([tokenize(r.text) for r in records])
        self.vector_ids = list(vector_ids)
        self.matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)
        self._projection: tuple[Vectors, Vectors] | None = None
        self._lock = threading.Lock()

    def text_top(self, query: str, k: int) -> list[tuple[str, float]]:
        tokens = query_tokens(query)
        best = self.bm25.max_score(tokens)
        if best <= 0:
            return []
        return [(self.ids[i], score / best) for i, score in self.bm25.top(tokens, k)]

    def projected(self) -> tuple[Vectors, Vectors]:
        """(basis, matrix @ basis): the top principal directions of the uncentred rows, which
        keep dot products best in the least squares sense."""
        with self._lock:
            if self._projection is None:
                _single_blas_thread()
                dims = min(PROJECTED_DIMS, self.matrix.shape[1])
                second_moment = self.matrix.T @ self.matrix
                _, basis = np.linalg.eigh(second_moment.astype(np.float64))
                top = np.ascontiguousarray(basis[:, ::-1][:, :dims], dtype=np.float32)
                self._projection = (top, np.ascontiguousarray(self.matrix @ top))
            return self._projection

    def vector_top(self, vector: Vectors, k: int, *, exact: bool = False,
                   ) -> list[tuple[str, float]]:
        if not len(self.matrix):
            return []
        _single_blas_thread()
        query = np.asarray(vector, dtype=np.float32)
        k = min(k, len(self.matrix))
        if exact or len(self.matrix) < QUANTIZE_FROM or k * 4 > RESCORE:
            sims = self.matrix @ query
            part = np.argpartition(-sims, k - 1)[:k]
        else:
            basis, projected = self.projected()
            rough = projected @ (query @ basis)
            candidates = np.argpartition(-rough, RESCORE - 1)[:RESCORE]
            sims = np.full(len(self.matrix), -np.inf, dtype=np.float32)
            sims[candidates] = self.matrix[candidates] @ query
            part = candidates[np.argpartition(-sims[candidates], k - 1)[:k]]
        order = part[np.argsort(-sims[part], kind="stable")]
        return [(self.vector_ids[i], float(sims[i])) for i in order]
