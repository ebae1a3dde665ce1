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
from collections.abc import Mapping, Sequence
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
"""


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
        unless the caller already holds one)."""
        if not in_transaction:
            self._db.execute("BEGIN")
        try:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            graph = nx.MultiDiGraph()
            nodes: dict[str, NodeRecord] = {}
            vectors: dict[str, Vectors] = {}
            for nid, kind, name, text, digest, data, blob in self._db.execute(
                    "SELECT id, kind, name, text, content_hash, data, vector FROM node "
                    "ORDER BY id"):
                nodes[nid] = NodeRecord(nid, NodeKind(kind), name, text, digest, json.loads(data))
                graph.add_node(nid, kind=kind)
                if blob is not None:
                    vectors[nid] = np.frombuffer(blob, dtype=np.float32)
            edges: dict[tuple[str, str, str, str], Edge] = {}
            for kind, src, dst, grp, weight, props in self._db.execute(
                    "SELECT kind, src, dst, grp, weight, props FROM edge "
                    "ORDER BY kind, src, dst, grp"):
                edge = Edge(EdgeKind(kind), src, dst, weight, json.loads(props))
                edges[edge.key] = edge
                graph.add_edge(src, dst, key=(kind, grp), edge=edge)
            meta = {str(k): str(v) for k, v in self._db.execute("SELECT key, value FROM meta")}
        finally:
            if not in_transaction:
                self._db.rollback()
        self._nodes, self._vectors, self._edges, self._meta = nodes, vectors, edges, meta
        self._graph = graph
        self._indexes: dict[NodeKind, _KindIndex] = {}
        self._data_version = version

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
            records = [r for r in self._nodes.values() if r.kind is kind]
            index = _KindIndex(records, self._vectors)
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
            "INSERT OR REPLACE INTO node VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(n.id, n.kind.value, n.name, n.text, n.content_hash,
              json.dumps(dict(n.data), ensure_ascii=False, sort_keys=True),
              _vector_blob(vectors.get(n.id), self._vectors.get(n.id)))
             for n in (*added, *updated)])
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


def _vector_blob(new: Vectors | None, old: Vectors | None) -> bytes | None:
    vector = new if new is not None else old
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


_BLAS_LIMITED = False


def _single_blas_thread() -> None:
    """Searching uses one BLAS thread, set once per process: for a matrix-vector product the
    idle workers' busy-waiting costs more than they save, and halved the speed of the next
    query's embedding (52 ms against 24 ms here). Checking per call costs milliseconds."""
    global _BLAS_LIMITED
    if not _BLAS_LIMITED:
        threadpool_limits(limits=1, user_api="blas")
        _BLAS_LIMITED = True


class _KindIndex:
    """Lexical (BM25) and vector search over the nodes of one kind, built on first use."""

    def __init__(self, records: Sequence[NodeRecord], vectors: Mapping[str, Vectors]) -> None:
        self.ids = [r.id for r in records]
        self.bm25 = BM25([tokenize(r.text) for r in records])
        with_vectors = [i for i, r in enumerate(records) if r.id in vectors]
        self.vector_rows = with_vectors
        dims = len(next(iter(vectors.values()))) if vectors else 0
        self.matrix = (np.stack([vectors[records[i].id] for i in with_vectors])
                       if with_vectors else np.zeros((0, dims), dtype=np.float32))

    def text_top(self, query: str, k: int) -> list[tuple[str, float]]:
        tokens = query_tokens(query)
        best = self.bm25.max_score(tokens)
        if best <= 0:
            return []
        return [(self.ids[i], score / best) for i, score in self.bm25.top(tokens, k)]

    def vector_top(self, vector: Vectors, k: int) -> list[tuple[str, float]]:
        if not len(self.matrix):
            return []
        _single_blas_thread()
        sims = self.matrix @ np.asarray(vector, dtype=np.float32)
        k = min(k, len(sims))
        part = np.argpartition(-sims, k - 1)[:k]
        order = part[np.argsort(-sims[part], kind="stable")]
        return [(self.ids[self.vector_rows[i]], float(sims[i])) for i in order]
