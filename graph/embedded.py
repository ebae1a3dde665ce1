"""The embedded store: in memory, one SQLite file on disk. No server; the default.

The SQLite file is the source of truth, so a second process opens the index without rebuilding
anything: it reads the nodes, edges, vectors and metadata back (a few hundred milliseconds for
thousands of skills), and on first use the BM25 term counts and projected vectors the sync
stored. A sync is one SQLite transaction holding the graph, what is derived from it and its
metadata (generation, router, fingerprint), so a failed or interrupted sync — even a process
killed halfway — leaves the previous graph and its metadata intact. It writes only what changed
(rows of nodes and edges, the rows of an edited node's vector inside the stored matrix) and
makes the same change in memory instead of reading the file back.

A process that keeps the store open sees another process's re-index: :meth:`get_meta` (which the
retriever calls before each search) asks SQLite whether another connection committed since
(``PRAGMA data_version``, a few microseconds) and then reads everything back, and a sync starts
from what is on disk, not from what this process last read.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from skillgrove.graph.bm25 import BM25, Postings
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.errors import StoreError
from skillgrove.graph.model import (
    Edge,
    EdgeKind,
    NodeKind,
    NodeRecord,
    SyncReport,
    vector_digest,
)
from skillgrove.graph.runlog import make_private_folder
from skillgrove.graph.text import query_tokens, tokenize, tokenizer_signature

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
CREATE TABLE IF NOT EXISTS lexicon (
    kind TEXT PRIMARY KEY, ids TEXT NOT NULL, signature TEXT NOT NULL, terms TEXT NOT NULL,
    indptr BLOB NOT NULL, docs BLOB NOT NULL, tfs BLOB NOT NULL, lengths BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS lexicon_patch (
    kind TEXT PRIMARY KEY, base TEXT NOT NULL, signature TEXT NOT NULL, ids TEXT NOT NULL,
    fresh TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS projection (
    kind TEXT PRIMARY KEY, signature TEXT NOT NULL, dims INTEGER NOT NULL, basis BLOB NOT NULL,
    projected BLOB NOT NULL);
"""
"""``matrix`` holds each kind's vectors as one float32 blob, rows in the order of ``ids``
(a JSON list, sorted): opening 100k skills reads one blob instead of 100k rows. Files
written before it keep their vectors in ``node.vector``, which is read when a kind has no
matrix row; a sync then writes the matrix.

``lexicon`` holds each kind's BM25 term counts (:class:`graph.bm25.Postings`, documents in the
order of ``ids``), written by the sync that writes the texts, so a new process's first text
search reads arrays instead of tokenizing every text (27 s at 100k skills). ``signature``
names the nodes (ids and content hashes) they were counted from; a lexicon that does not
match the nodes (a file from before it, or one another version wrote) is not used, and the
next sync counts it again.

``lexicon_patch`` spares an edit rewriting the whole lexicon (megabytes at 10k skills, most of
an edit's sync): it names the ``lexicon`` row it applies to (``base``, that row's signature),
the nodes it describes (``signature``, ``ids``) and the ``fresh`` ids, a JSON list of the
nodes whose texts are counted again from the node table (those added or edited since the base
was counted); the other documents of the base are renumbered to ``ids`` and the removed
dropped (:meth:`graph.bm25.Postings.replaced`, as a sync splices an edit in memory). Once the
patch would name more than :data:`PATCH_AT_MOST` nodes the next sync writes the whole lexicon
again.

``projection`` holds, for a kind of at least :data:`QUANTIZE_FROM` nodes, the projected matrix
the vector search scans first (:meth:`_KindIndex.projected`), computed by the sync as a search
would compute it (one BLAS thread: the same bits) and named by the same signature."""


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
            listed: dict[NodeKind, str] = {}
            for kind, ids, dims, blob in self._db.execute(
                    "SELECT kind, ids, dims, vectors FROM matrix"):
                names = [str(i) for i in json.loads(ids)]
                matrices[NodeKind(kind)] = (names, np.frombuffer(blob, dtype=np.float32).reshape(
                    len(names), int(dims)))
                listed[NodeKind(kind)] = ids
            kinds = {NodeKind(row[0]) for row in rows.values()}
            if kinds - set(matrices):  # a file from before the matrix table
                matrices.update(_row_matrices(self._db, kinds - set(matrices)))
            edges = _edge_rows(self._db)
            meta = {str(k): str(v) for k, v in self._db.execute("SELECT key, value FROM meta")}
        finally:
            if not in_transaction:
                self._db.rollback()
        self._nodes = _LazyNodes(rows)
        self._lexicons: dict[NodeKind, tuple[str, Postings]] = {}
        self._projections: dict[NodeKind, tuple[str, Vectors, Vectors]] = {}
        self._signatures: dict[NodeKind, str] = {}
        self._matrices = matrices
        self._listed = listed
        self._digests: dict[NodeKind, tuple[int, ...]] = {}
        self._vectors = _RowVectors(matrices)
        self._edge_rows = edges
        self._edge_map: dict[tuple[str, str, str, str], Edge] | None = None
        self._held_edges: dict[int, Edge] | None = None
        self._adjacency_cache: _EdgeIndex | None = None
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
                    edges = {row[:4]: _row_edge(row) for row in self._edge_rows}
                    self._edge_map = edges
        return edges

    @property
    def _adjacency(self) -> _EdgeIndex:
        """The edges touching each node (no networkx: a search need not import it)."""
        adjacency = self._adjacency_cache
        if adjacency is None:
            with self._lock:
                adjacency = self._adjacency_cache
                if adjacency is None:
                    adjacency = self._adjacency_cache = _EdgeIndex(self._edge_rows)
        return adjacency

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
                    nodes = self._nodes
                    ids = nodes.ids_of(kind)
                    vector_ids, matrix = self._matrices.get(kind, ([], None))
                    index = _KindIndex(ids, lambda: self._postings(kind, ids, nodes),
                                       vector_ids, matrix,
                                       lambda: self._stored_projection(kind, nodes))
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
                report, change = self._sync_in_transaction(nodes, vectors, edges, meta or {})
                self._db.commit()
            except sqlite3.Error as exc:
                self._db.rollback()
                raise StoreError(f"sync failed, the previous index is intact: {exc}") from exc
            except BaseException:
                self._db.rollback()
                raise
            self._apply(change)
            return report

    def _sync_in_transaction(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
                             edges: Sequence[Edge], meta: Mapping[str, str],
                             ) -> tuple[SyncReport, _Change]:
        """Writes the difference between what is stored and ``nodes``/``edges``: the rows of
        the nodes and edges that changed, and the matrix and lexicon of each kind that did.
        Returns the report and the change, which :meth:`_apply` makes in memory once the
        transaction committed (reading the whole file back costs more than the edit)."""
        rows = self._nodes.rows
        wanted = {n.id: n for n in nodes}
        added: list[NodeRecord] = []
        updated: list[NodeRecord] = []
        for record in wanted.values():
            row = rows.get(record.id)
            if row is None:
                added.append(record)
            elif row[3] != record.content_hash:
                updated.append(record)
        # Every stored node is wanted when as many of the wanted are stored (an edit).
        removed = ([] if len(wanted) - len(added) == len(rows)
                   else [nid for nid in rows if nid not in wanted])
        for record in (*added, *updated):
            if record.id not in vectors and record.id not in self._vectors:
                raise StoreError(f"sync: no vector for node {record.id!r}")
        new_edges, gone_edges = self._edge_difference(edges)
        new_rows = [(*e.key, float(e.weight),
                     json.dumps(dict(e.props), sort_keys=True) if e.props else "{}")
                    for e in new_edges]
        node_rows = {n.id: (n.kind.value, n.name, n.text, n.content_hash,
                            json.dumps(dict(n.data), ensure_ascii=False, sort_keys=True))
                     for n in (*added, *updated)}
        self._db.executemany("DELETE FROM node WHERE id = ?", [(i,) for i in removed])
        self._db.executemany("INSERT OR REPLACE INTO node VALUES (?, ?, ?, ?, ?, ?, NULL)",
                             [(nid, *row) for nid, row in node_rows.items()])
        fresh = set(node_rows)
        by_kind: dict[NodeKind, list[str]] = {}
        if not added and not removed and all(rows[n.id][0] == n.kind.value for n in updated):
            by_kind = self._nodes.by_kind()  # the same nodes: the stored ids of each kind
        else:
            for nid in sorted(wanted):
                by_kind.setdefault(wanted[nid].kind, []).append(nid)
        changed_kinds = ({n.kind for n in (*added, *updated)}
                         | {NodeKind(rows[i][0]) for i in removed})
        signatures = {kind: (_signature(ids, [wanted[nid].content_hash for nid in ids])
                             if kind in changed_kinds else self._signature(kind))
                      for kind, ids in by_kind.items()}
        stored_lexicons = dict(self._db.execute("SELECT kind, signature FROM lexicon"))
        patches = {kind: (base, signature, fresh) for kind, base, signature, fresh
                   in self._db.execute("SELECT kind, base, signature, fresh FROM lexicon_patch")}
        for kind_value, (base, signature, _) in patches.items():
            if stored_lexicons.get(kind_value) == base:
                stored_lexicons[kind_value] = signature
        stored_projections = dict(self._db.execute("SELECT kind, signature FROM projection"))
        touched = (changed_kinds | (set(by_kind) - set(self._stored_matrix_kinds()))
                   | {k for k, s in signatures.items() if stored_lexicons.get(k.value) != s}
                   | {k for k, s in signatures.items() if len(by_kind[k]) >= QUANTIZE_FROM
                      and stored_projections.get(k.value) != s})
        matrices: dict[NodeKind, tuple[list[str], Vectors]] = {}
        lexicons: dict[NodeKind, tuple[str, Postings]] = {}
        projections: dict[NodeKind, tuple[str, Vectors, Vectors]] = {}
        digests: dict[NodeKind, tuple[int, ...]] = {}
        listed: dict[NodeKind, str] = {}
        for kind in sorted(touched, key=lambda k: k.value):
            ids = by_kind.get(kind, [])
            vector_ids, matrix, origin = self._new_matrix(kind, ids, vectors, fresh)
            if vector_ids:
                blob = np.ascontiguousarray(matrix, dtype=np.float32)
                if not self._write_rows_in_place(kind, vector_ids, blob, origin):
                    listed[kind] = json.dumps(vector_ids)
                    self._db.execute("INSERT OR REPLACE INTO matrix VALUES (?, ?, ?, ?)",
                                     (kind.value, listed[kind], blob.shape[1], blob.tobytes()))
                matrices[kind] = (vector_ids, blob)
                kept_digests = self._digests.get(kind)
                if kept_digests is not None:
                    digests[kind] = _carried_digests(kept_digests, origin, vector_ids, blob)
            else:
                self._db.execute("DELETE FROM matrix WHERE kind = ?", (kind.value,))
                matrices[kind] = ([], np.zeros((0, 0), dtype=np.float32))
            if ids:
                postings = self._new_postings(kind, ids, wanted, fresh)
                patch = self._lexicon_patch(kind, ids, fresh, patches)
                if patch is not None:
                    self._db.execute("INSERT OR REPLACE INTO lexicon_patch VALUES (?, ?, ?, ?, ?)",
                                     (kind.value, patch[0], signatures[kind], json.dumps(ids),
                                      json.dumps(patch[1])))
                else:
                    self._db.execute(
                        "INSERT OR REPLACE INTO lexicon VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (kind.value, json.dumps(ids), signatures[kind], *postings.to_row()))
                    self._db.execute("DELETE FROM lexicon_patch WHERE kind = ?", (kind.value,))
                lexicons[kind] = (signatures[kind], postings)
            else:
                self._db.execute("DELETE FROM lexicon WHERE kind = ?", (kind.value,))
                self._db.execute("DELETE FROM lexicon_patch WHERE kind = ?", (kind.value,))
            if ids and len(vector_ids) >= QUANTIZE_FROM:
                basis, projected = _project(matrices[kind][1])
                self._db.execute("INSERT OR REPLACE INTO projection VALUES (?, ?, ?, ?, ?)",
                                 (kind.value, signatures[kind], basis.shape[1],
                                  basis.tobytes(), projected.tobytes()))
                projections[kind] = (signatures[kind], basis, projected)
            else:
                self._db.execute("DELETE FROM projection WHERE kind = ?", (kind.value,))
        self._db.executemany(
            "DELETE FROM edge WHERE kind = ? AND src = ? AND dst = ? AND grp = ?",
            gone_edges)
        self._db.executemany("INSERT OR REPLACE INTO edge VALUES (?, ?, ?, ?, ?, ?)", new_rows)
        # Unchanged entries are not written again: the router alone is megabytes at 1k groups.
        self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             [(key, value) for key, value in meta.items()
                              if self._meta.get(key) != value])
        report = SyncReport(tuple(n.id for n in added), tuple(n.id for n in updated),
                            tuple(removed), len(wanted) - len(added) - len(updated),
                            len(new_rows), len(gone_edges))
        return report, _Change(node_rows, removed, matrices, lexicons, new_rows, new_edges,
                               gone_edges, dict(meta), signatures, projections, digests,
                               listed)

    def _edge_difference(self, edges: Sequence[Edge],
                         ) -> tuple[list[Edge], list[tuple[str, str, str, str]]]:
        """(the given edges to write, the keys of the stored edges to delete). An edge given as
        the very object this store holds is unchanged: a re-index hands most of them back
        (the SIMILAR_TO edges it kept), so they are told apart by identity, a pass of
        ``id`` over the given edges, and only the others are compared by key. Of edges given
        under one key the last counts; when the store's object is given with another under
        its key, whose order decides, every edge is compared by key."""
        stored = self._edges
        held = self._held_edges
        if held is None:
            held = self._held_edges = {id(e): e for e in stored.values()}
        given = set(map(id, edges))
        others: dict[tuple[str, str, str, str], Edge] = {}
        for e in edges:
            if id(e) not in held:
                others[e.key] = e
        new_edges: list[Edge] = []
        for key, e in others.items():
            old = stored.get(key)
            if old is not None and id(old) in given:  # two given under one key: by key
                return self._edge_difference_by_key(edges)
            if old is None or _edge_changed(old, e):
                new_edges.append(e)
        gone = sorted(key for key in (held[i].key for i in held.keys() - given)
                      if key not in others)
        return new_edges, gone

    def _edge_difference_by_key(self, edges: Sequence[Edge],
                                ) -> tuple[list[Edge], list[tuple[str, str, str, str]]]:
        """:meth:`_edge_difference`, every given edge compared by key."""
        stored = self._edges
        wanted = {e.key: e for e in edges}
        new_edges = [e for key, e in wanted.items()
                     if (old := stored.get(key)) is not e
                     and (old is None or _edge_changed(old, e))]
        return new_edges, sorted(stored.keys() - wanted.keys())

    def _write_rows_in_place(self, kind: NodeKind, vector_ids: Sequence[str], matrix: Vectors,
                             origin: npt.NDArray[np.int64]) -> bool:
        """When the kind's stored matrix has the same ids and shape, overwrites the rows not
        copied from it (``origin`` -1) inside the stored blob (a page or two each) instead of
        the whole blob (15 MB at 10k skills); False when it cannot."""
        old_ids, old_matrix = self._matrices.get(kind, ([], None))
        rows = np.nonzero(origin != np.arange(len(origin)))[0].tolist()
        if (old_matrix is None or old_matrix.shape != matrix.shape or old_ids != vector_ids
                or len(rows) > 64 or kind not in self._listed):
            return False
        found = self._db.execute("SELECT rowid, ids, dims FROM matrix WHERE kind = ?",
                                 (kind.value,)).fetchone()
        # The row as this store last read or wrote it (its ids compared as text).
        if found is None or int(found[2]) != matrix.shape[1] or found[1] != self._listed[kind]:
            return False
        width = matrix.shape[1] * 4
        with self._db.blobopen("matrix", "vectors", int(found[0])) as blob:
            if len(blob) != len(vector_ids) * width:
                return False
            for row in rows:
                blob.seek(row * width)
                blob.write(matrix[row].tobytes())
        return True

    def _new_matrix(self, kind: NodeKind, ids: Sequence[str], vectors: Mapping[str, Vectors],
                    fresh: set[str]) -> tuple[list[str], Vectors, npt.NDArray[np.int64]]:
        """The kind's matrix after the sync: the stored rows of unchanged nodes (copied by
        numpy), the given vectors of new and updated ones; and each row's origin, its row in
        the stored matrix or -1 for a given vector."""
        old_ids, old_matrix = self._matrices.get(kind, ([], None))
        if old_matrix is not None and len(old_ids) == len(ids) and old_ids == list(ids):
            # The same nodes (an edit): a copy of the stored rows, the fresh ones replaced.
            matrix = old_matrix.copy()
            origin = np.arange(len(ids), dtype=np.int64)
            where = self._vectors.where()
            for nid in fresh:
                found = where.get(nid)
                vector = vectors.get(nid)
                if found is not None and found[0] is kind and vector is not None:
                    matrix[found[1]] = np.asarray(vector, dtype=np.float32)
                    origin[found[1]] = -1
            return list(ids), matrix, origin
        old_row = {nid: i for i, nid in enumerate(old_ids)}
        vector_ids: list[str] = []
        keep_new: list[int] = []
        keep_old: list[int] = []
        given: list[tuple[int, Vectors]] = []
        for nid in ids:
            row = old_row.get(nid)
            vector = vectors.get(nid) if nid in fresh or row is None else None
            if vector is None and row is None:
                vector = self._vectors.get(nid)  # a file from before the matrix table
            if vector is not None:
                given.append((len(vector_ids), vector))
            elif row is not None:
                keep_new.append(len(vector_ids))
                keep_old.append(row)
            else:
                continue
            vector_ids.append(nid)
        origin = np.full(len(vector_ids), -1, dtype=np.int64)
        if not vector_ids:
            return [], np.zeros((0, 0), dtype=np.float32), origin
        dims = (old_matrix.shape[1] if keep_old and old_matrix is not None
                else len(np.asarray(given[0][1])))
        matrix = np.empty((len(vector_ids), dims), dtype=np.float32)
        if keep_old and old_matrix is not None:
            matrix[keep_new] = old_matrix[keep_old]
            origin[keep_new] = keep_old
        for row, vector in given:
            matrix[row] = np.asarray(vector, dtype=np.float32)
        return vector_ids, matrix, origin

    def _lexicon_patch(self, kind: NodeKind, ids: Sequence[str], fresh: set[str],
                       patches: Mapping[str, tuple[str, str, str]],
                       ) -> tuple[str, list[str]] | None:
        """(the base's signature, the fresh ids) of a ``lexicon_patch`` row taking the
        stored lexicon to ``ids`` after this sync, or None when the whole lexicon must be
        written: no stored lexicon (or patch) describes the nodes as they were before the
        sync, or the patch would name too many nodes."""
        before = self._signature(kind)
        stored = self._db.execute("SELECT signature FROM lexicon WHERE kind = ?",
                                  (kind.value,)).fetchone()
        if stored is None:
            return None
        base = str(stored[0])
        earlier: set[str] = set()
        patch = patches.get(kind.value)
        if base != before:
            if patch is None or patch[0] != base or patch[1] != before:
                return None
            earlier = {str(i) for i in json.loads(patch[2])}
        renewed = sorted((earlier | fresh) & set(ids))  # ``fresh``: the added and updated
        if len(renewed) > max(PATCH_AT_MOST, 1):
            return None
        return base, renewed

    def _new_postings(self, kind: NodeKind, ids: Sequence[str], wanted: Mapping[str, NodeRecord],
                      fresh: set[str]) -> Postings:
        """The kind's BM25 counts after the sync: the stored ones with the new and updated
        texts spliced in, or all texts counted when none match what is stored."""
        old_ids = self._nodes.ids_of(kind)
        old = self._stored_postings(kind, old_ids, self._nodes, in_transaction=True)
        if old is None:
            return Postings.of(tokenize(wanted[nid].text) for nid in ids)
        if ids is old_ids or (len(ids) == len(old_ids) and ids == old_ids):
            # The same documents (an edit): the fresh ones, found in the sorted ids, recounted.
            renumber = np.arange(len(ids), dtype=np.int64)
            added = {}
            for nid in fresh:
                at = bisect.bisect_left(ids, nid)
                if at < len(ids) and ids[at] == nid:
                    renumber[at] = -1
                    added[at] = tokenize(wanted[nid].text)
            return old.replaced(renumber, len(ids), added)
        position = {nid: i for i, nid in enumerate(ids)}
        renumber = np.array([-1 if nid in fresh else position.get(nid, -1) for nid in old_ids],
                            dtype=np.int64)
        known = set(old_ids)
        added = {i: tokenize(wanted[nid].text) for i, nid in enumerate(ids)
                 if nid in fresh or nid not in known}
        return old.replaced(renumber, len(ids), added)

    def _signature(self, kind: NodeKind) -> str:
        """The signature of the kind's nodes as read now (remembered until the next read)."""
        found = self._signatures.get(kind)
        if found is None:
            rows = self._nodes.rows
            ids = self._nodes.ids_of(kind)
            found = self._signatures[kind] = _signature(ids, [rows[nid][3] for nid in ids])
        return found

    def _stored_postings(self, kind: NodeKind, ids: Sequence[str], nodes: _LazyNodes,
                         in_transaction: bool = False) -> Postings | None:
        """The kind's BM25 counts for ``nodes`` (as read at one moment): those kept in memory
        or stored in the file, when their signature matches; else None."""
        signature = (self._signature(kind) if nodes is self._nodes
                     else _signature(ids, [nodes.rows[nid][3] for nid in ids]))
        kept = self._lexicons.get(kind)
        if kept is not None and kept[0] == signature:
            return kept[1]
        with self._lock:
            try:
                row = self._db.execute("SELECT ids, signature, terms, indptr, docs, tfs, lengths "
                                       "FROM lexicon WHERE kind = ?", (kind.value,)).fetchone()
            except sqlite3.Error:
                if in_transaction:
                    raise
                row = None
        if row is None:
            return None
        try:
            if row[1] == signature and json.loads(row[0]) == list(ids):
                postings = Postings.from_row(*row[2:])
            else:
                found = self._patched_postings(kind, ids, nodes, row, signature, in_transaction)
                if found is None:
                    return None
                postings = found
        except ValueError:
            return None
        if postings.size != len(ids):
            return None
        if nodes is self._nodes:
            self._lexicons[kind] = (signature, postings)
        return postings

    def _patched_postings(self, kind: NodeKind, ids: Sequence[str], nodes: _LazyNodes,
                          row: tuple[str, str, str, bytes, bytes, bytes, bytes], signature: str,
                          in_transaction: bool) -> Postings | None:
        """The stored lexicon ``row`` with its ``lexicon_patch`` applied, when the patch
        applies to the row and describes ``ids`` as ``signature`` names them; else None."""
        with self._lock:
            try:
                patch = self._db.execute("SELECT base, signature, ids, fresh FROM lexicon_patch "
                                         "WHERE kind = ?", (kind.value,)).fetchone()
            except sqlite3.Error:
                if in_transaction:
                    raise
                patch = None
        if (patch is None or patch[0] != row[1] or patch[1] != signature
                or json.loads(patch[2]) != list(ids)):
            return None
        renewed = {str(i) for i in json.loads(patch[3])}
        base = Postings.from_row(*row[2:])
        base_ids = json.loads(row[0])
        position = {nid: i for i, nid in enumerate(ids)}
        if base.size != len(base_ids) or not renewed <= position.keys():
            return None
        renumber = np.array([-1 if nid in renewed else position.get(nid, -1) for nid in base_ids],
                            dtype=np.int64)
        added = {position[nid]: tokenize(nodes.rows[nid][2]) for nid in renewed}
        return base.replaced(renumber, len(ids), added)

    def _stored_projection(self, kind: NodeKind, nodes: _LazyNodes,
                           ) -> tuple[Vectors, Vectors] | None:
        """The kind's projected matrix as the last sync computed it, when it describes
        ``nodes`` (kept in memory, or read from the file); else None (the index computes it)."""
        if nodes is not self._nodes:
            return None
        signature = self._signature(kind)
        kept = self._projections.get(kind)
        if kept is not None and kept[0] == signature:
            return kept[1], kept[2]
        with self._lock:
            try:
                row = self._db.execute("SELECT signature, dims, basis, projected FROM projection "
                                       "WHERE kind = ?", (kind.value,)).fetchone()
            except sqlite3.Error:
                row = None
        _, matrix = self._matrices.get(kind, ([], None))
        if row is None or row[0] != signature or matrix is None:
            return None
        dims = int(row[1])
        basis = np.frombuffer(row[2], dtype=np.float32)
        projected = np.frombuffer(row[3], dtype=np.float32)
        if (dims <= 0 or basis.size != matrix.shape[1] * dims
                or projected.size != matrix.shape[0] * dims):
            return None
        return basis.reshape(matrix.shape[1], dims), projected.reshape(matrix.shape[0], dims)

    def _postings(self, kind: NodeKind, ids: Sequence[str], nodes: _LazyNodes) -> Postings:
        found = self._stored_postings(kind, ids, nodes)
        return found if found is not None else Postings.of(
            tokenize(nodes.rows[nid][2]) for nid in ids)

    def _apply(self, change: _Change) -> None:
        """Makes in memory the change a sync just committed: what a fresh read of the file
        would give, at the cost of the change (plus copying the tables of ids)."""
        rows = dict(self._nodes.rows)
        for nid in change.removed:
            del rows[nid]
        rows.update(change.node_rows)
        if change.removed or any(nid not in self._nodes.rows for nid in change.node_rows):
            rows = dict(sorted(rows.items()))
        gone = set(change.node_rows) | set(change.removed)
        same_kinds = not change.removed and all(
            nid in self._nodes.rows and self._nodes.rows[nid][0] == row[0]
            for nid, row in change.node_rows.items())
        parsed = dict(self._nodes.parsed)
        for nid in gone:
            parsed.pop(nid, None)
        self._nodes = _LazyNodes(rows, parsed, self._nodes.by_kind() if same_kinds else None)
        self._matrices = {**self._matrices, **change.matrices}
        self._matrices = {k: v for k, v in self._matrices.items() if v[0]}
        self._listed = {k: v for k, v in {**self._listed, **change.listed}.items()
                        if k in self._matrices}
        self._digests = {k: v for k, v in {**self._digests, **change.digests}.items()
                         if k in self._matrices and (k in change.digests
                                                     or k not in change.matrices)}
        self._vectors = self._vectors.with_matrices(self._matrices)
        self._lexicons = {**self._lexicons, **change.lexicons}
        self._projections = {**self._projections, **change.projections}
        if change.new_edges or change.gone_edges:
            replaced = set(change.gone_edges) | {row[:4] for row in change.new_edges}
            if len(replaced) < 256:  # a few rows found by bisection in the sorted list
                kept = list(self._edge_rows)
                for key in replaced:
                    at = bisect.bisect_left(kept, key)
                    if at < len(kept) and kept[at][:4] == key:
                        del kept[at]
                for row in change.new_edges:
                    bisect.insort(kept, row)
                self._edge_rows = kept
            else:
                kept = [row for row in self._edge_rows if row[:4] not in replaced]
                self._edge_rows = sorted([*kept, *change.new_edges])
            if self._edge_map is not None:  # keep the Edge objects of the edges that stay
                edge_map = dict(self._edge_map)
                held = self._held_edges  # changed in place: only a sync, under the lock, reads it
                for key in replaced:
                    old = edge_map.pop(key, None)
                    if old is not None and held is not None:
                        held.pop(id(old), None)
                # A given edge that reads back as itself is kept as given: handed back by the
                # next re-index (SIMILAR_TO edges it keeps), it is known at a glance.
                for row, edge in zip(change.new_edges, change.new_edge_records, strict=True):
                    kept_edge = edge if _reads_back(edge) else _row_edge(row)
                    edge_map[row[:4]] = kept_edge
                    if held is not None:
                        held[id(kept_edge)] = kept_edge
                self._edge_map = edge_map
            self._adjacency_cache = None
        self._meta = {**self._meta, **change.meta}
        self._signatures = dict(change.signatures)
        touched = set(change.matrices) | set(change.lexicons)
        self._indexes = {k: v for k, v in self._indexes.items() if k not in touched}

    def _stored_matrix_kinds(self) -> list[NodeKind]:
        return [NodeKind(k) for (k,) in self._db.execute("SELECT kind FROM matrix")]

    def node(self, node_id: str) -> NodeRecord | None:
        return self._nodes.get(node_id)

    def nodes(self, kind: NodeKind | None = None) -> list[NodeRecord]:
        return [n for n in self._nodes.values() if kind is None or n.kind is kind]

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        """In stored order (kind, src, dst, group), as a fresh read gives them."""
        edges = self._edges
        value = kind.value if kind is not None else None
        return [edges[row[:4]] for row in self._edge_rows if value is None or row[0] == value]

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        out: list[tuple[Edge, NodeRecord]] = []
        for edge in self._adjacency.touching(node_id):
            if kinds is None or edge.kind in kinds:
                out.append((edge, self._nodes[edge.dst if edge.src == node_id else edge.src]))
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

    def vector_digests(self, kind: NodeKind,
                       ) -> tuple[list[str], Vectors, tuple[int, ...]] | None:
        """(ids, matrix, digests): the kind's stored vectors, one row per id in that order (a
        read-only view), and each row's :func:`graph.model.vector_digest` (None without
        vectors of the kind). The digests are computed here from the bytes this store holds,
        once per matrix it reads, and a sync carries those of the rows it keeps over to the
        new matrix, computing only the written rows': they always describe the vectors a
        search uses, so ``graph.indexer.StoredSimilar`` checks a stored SIMILAR_TO key
        against them instead of hashing the matrix again."""
        self._refresh()
        with self._lock:
            found = self._matrices.get(kind)
            if found is None or not found[0]:
                return None
            ids, matrix = found
            digests = self._digests.get(kind)
            if digests is None:
                digests = self._digests[kind] = tuple(
                    vector_digest(nid, row) for nid, row in zip(ids, matrix, strict=True))
            view = matrix.view()
            view.flags.writeable = False
            return ids, view, digests

    def matrix_rows(self, ids: Sequence[str]) -> Vectors | None:
        """The stored vectors of ``ids`` (of one kind) as one matrix, rows in that order, or
        None when one has none: what ``np.stack(vectors(ids))`` gives, without a view per row
        (the indexer reads the previous vectors of every node on each re-index)."""
        where = self._vectors.where()
        try:
            found = [where[nid] for nid in ids]
        except KeyError:
            return None
        if not found:
            return None
        kind = found[0][0]
        if any(k is not kind for k, _ in found):
            return np.stack([self._vectors[nid] for nid in ids])
        rows: Vectors = self._vectors.matrix(kind)[
            np.array([row for _, row in found], dtype=np.int64)]
        return rows

    def neighbors_of(self, ids: Iterable[str], kinds: Sequence[EdgeKind] | None = None,
                     ) -> dict[str, list[tuple[Edge, NodeRecord]]]:
        return {nid: self.neighbors(nid, kinds) for nid in ids}

    def text_searches(self, query: str, limits: Mapping[NodeKind, int],
                      ) -> dict[NodeKind, list[tuple[str, float]]]:
        return {kind: self.text_search(kind, query, k) for kind, k in limits.items()}

    def vector_searches(self, vector: Vectors, limits: Mapping[NodeKind, int],
                        ) -> dict[NodeKind, list[tuple[str, float]]]:
        return {kind: self.vector_search(kind, vector, k) for kind, k in limits.items()}

    def hybrid_searches(self, query: str, vector: Vectors | None,
                        text_limits: Mapping[NodeKind, int],
                        vector_limits: Mapping[NodeKind, int],
                        ) -> tuple[dict[NodeKind, list[tuple[str, float]]],
                                   dict[NodeKind, list[tuple[str, float]]]]:
        dense = (self.vector_searches(vector, vector_limits) if vector is not None
                 else {kind: [] for kind in vector_limits})
        return self.text_searches(query, text_limits), dense

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


def _reads_back(edge: Edge) -> bool:
    """Whether reading the row written for ``edge`` gives an equal record: a float weight and
    no props (the row's JSON gives other dicts and numbers)."""
    return type(edge.weight) is float and not edge.props and type(edge.kind) is EdgeKind


def _edge_changed(old: Edge, new: Edge) -> bool:
    return old.weight != new.weight or (
        bool(old.props or new.props) and dict(old.props) != dict(new.props))


_EDGE_KINDS = {kind.value: kind for kind in EdgeKind}


def _row_edge(row: _EdgeRow) -> Edge:
    kind, src, dst, _grp, weight, props = row
    edge = Edge(_EDGE_KINDS[kind], src, dst, weight, json.loads(props) if props != "{}" else {})
    edge.__dict__["key"] = row[:4]  # the cached ``Edge.key``: the row holds it already
    return edge


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


class _EdgeIndex:
    """The edges touching each node, found through arrays built from the stored rows; an
    :class:`Edge` is made (its props parsed) only for the nodes searches ask about. Building
    every Edge and a dict of dicts for 446k edges (100k skills) took 8.8 s of a first search.

    A node's edges come as networkx listed them: its outgoing edges grouped by the node at
    the other end (in order of first appearance, rows in stored order), then its incoming."""

    def __init__(self, rows: Sequence[_EdgeRow]) -> None:
        self._rows = rows
        where: dict[str, int] = {}
        src = np.fromiter((where.setdefault(r[1], len(where)) for r in rows), dtype=np.int64,
                          count=len(rows))
        dst = np.fromiter((where.setdefault(r[2], len(where)) for r in rows), dtype=np.int64,
                          count=len(rows))
        self._where = where
        self._sides = ((*_grouped_rows(src, len(where)), 2), (*_grouped_rows(dst, len(where)), 1))
        self._made: dict[int, Edge] = {}

    def _edge(self, row: int) -> Edge:
        edge = self._made.get(row)
        if edge is None:
            edge = self._made[row] = _row_edge(self._rows[row])
        return edge

    def touching(self, node_id: str) -> list[Edge]:
        at = self._where.get(node_id)
        if at is None:
            return []
        out: list[Edge] = []
        for order, indptr, other in self._sides:
            by_other: dict[str, list[int]] = {}
            for row in order[indptr[at]:indptr[at + 1]].tolist():
                by_other.setdefault(self._rows[row][other], []).append(row)
            out.extend(self._edge(row) for rows in by_other.values() for row in rows)
        return out


def _grouped_rows(ends: npt.NDArray[np.int64], count: int,
                  ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(rows ordered by ``ends``, stably; where each end's rows start): CSR by end."""
    indptr = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=count), out=indptr[1:])
    return np.argsort(ends, kind="stable"), indptr


_NodeRow = tuple[str, str, str, str, str]
"""A node as stored: kind, name, text, content hash, data (JSON)."""
_EdgeRow = tuple[str, str, str, str, float, str]
"""An edge as stored: kind, src, dst, group, weight, props (JSON)."""


@dataclass(frozen=True)
class _Change:
    """What a committed sync changed, for :meth:`EmbeddedStore._apply`."""

    node_rows: dict[str, _NodeRow]
    removed: list[str]
    matrices: dict[NodeKind, tuple[list[str], Vectors]]
    lexicons: dict[NodeKind, tuple[str, Postings]]
    new_edges: list[_EdgeRow]
    new_edge_records: list[Edge]
    """The given edges ``new_edges`` were written from, in the same order."""
    gone_edges: list[tuple[str, str, str, str]]
    meta: dict[str, str]
    signatures: dict[NodeKind, str]
    projections: dict[NodeKind, tuple[str, Vectors, Vectors]]
    digests: dict[NodeKind, tuple[int, ...]]
    """The new matrices' row digests, where the old ones were known (see
    :meth:`EmbeddedStore.vector_digests`)."""
    listed: dict[NodeKind, str]
    """The ids column of each matrix row written whole."""


def _carried_digests(old: tuple[int, ...], origin: npt.NDArray[np.int64], ids: Sequence[str],
                     matrix: Vectors) -> tuple[int, ...]:
    """The row digests of a new matrix: a row copied from the old matrix (``origin``, its old
    row, or -1) keeps its digest, the others are computed."""
    kept = origin >= 0
    if len(origin) == len(old) and np.array_equal(origin[kept], np.nonzero(kept)[0]):
        digests = list(old)  # the rows in place (an edit)
    else:
        digests = [old[row] if row >= 0 else 0 for row in origin.tolist()]
    for row in np.nonzero(~kept)[0].tolist():
        digests[row] = vector_digest(ids[row], matrix[row])
    return tuple(digests)


_TOKENIZER = tokenizer_signature()


def _signature(ids: Sequence[str], digests: Sequence[str]) -> str:
    """Names nodes by their ids and content hashes, and the tokenizer: what a kind's lexicon
    and projection were computed from (a lexicon another tokenizer counted is stale though
    no node changed)."""
    hasher = hashlib.sha256(json.dumps([len(ids), len(digests), _TOKENIZER]).encode())
    hasher.update("\0".join(ids).encode("utf-8", "surrogatepass"))
    hasher.update("\0".join(digests).encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()[:32]


class _LazyNodes(Mapping[str, NodeRecord]):
    """Node records by id, each parsed (its JSON data decoded) on first access."""

    def __init__(self, rows: dict[str, _NodeRow], parsed: dict[str, NodeRecord] | None = None,
                 kinds: dict[NodeKind, list[str]] | None = None) -> None:
        self.rows = rows
        self.parsed: dict[str, NodeRecord] = parsed if parsed is not None else {}
        self._kinds = kinds

    def by_kind(self) -> dict[NodeKind, list[str]]:
        """The ids of each kind present, in id order, without parsing a record (computed once:
        the lists are shared, not to be changed)."""
        kinds = self._kinds
        if kinds is None:
            found: dict[str, list[str]] = {}
            for nid, row in self.rows.items():
                found.setdefault(row[0], []).append(nid)
            kinds = self._kinds = {NodeKind(kind): ids for kind, ids in found.items()}
        return kinds

    def ids_of(self, kind: NodeKind) -> list[str]:
        """The ids of ``kind``, in id order (shared, not to be changed)."""
        return self.by_kind().get(kind, [])

    def __getitem__(self, node_id: str) -> NodeRecord:
        record = self.parsed.get(node_id)
        if record is None:
            kind, name, text, digest, data = self.rows[node_id]
            record = NodeRecord(node_id, NodeKind(kind), name, text, digest, json.loads(data))
            self.parsed[node_id] = record
        return record

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


class _RowVectors(Mapping[str, Vectors]):
    """A node's vector: a read-only view of its row in its kind's matrix."""

    def __init__(self, matrices: Mapping[NodeKind, tuple[list[str], Vectors]],
                 where: dict[str, tuple[NodeKind, int]] | None = None) -> None:
        self._matrices = matrices
        self._where = where

    def where(self) -> dict[str, tuple[NodeKind, int]]:
        """Node id -> (its kind, its row in the kind's matrix)."""
        return self._index()

    def matrix(self, kind: NodeKind) -> Vectors:
        return self._matrices[kind][1]

    def with_matrices(self, matrices: Mapping[NodeKind, tuple[list[str], Vectors]],
                      ) -> _RowVectors:
        """The same for new matrices; the row index is kept when every kind keeps its ids
        (an edit: rebuilding it costs 11k dict entries at 10k skills)."""
        same = self._where is not None and set(matrices) == set(self._matrices) and all(
            matrices[k][0] is self._matrices[k][0] or matrices[k][0] == self._matrices[k][0]
            for k in matrices)
        return _RowVectors(matrices, self._where if same else None)

    def _index(self) -> dict[str, tuple[NodeKind, int]]:
        where = self._where
        if where is None:
            where = {nid: (kind, row) for kind, (ids, _) in self._matrices.items()
                     for row, nid in enumerate(ids)}
            self._where = where
        return where

    def __getitem__(self, node_id: str) -> Vectors:
        kind, row = self._index()[node_id]
        vector: Vectors = self._matrices[kind][1][row]
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


PATCH_AT_MOST = 256
"""Nodes a ``lexicon_patch`` may name (counted again when a new process reads the lexicon,
about 0.3 ms each) before a sync writes the whole lexicon again."""

QUANTIZE_FROM = 20_000
"""Rows from which vector search scans a low-dimensional projection first and rescores the
best :data:`RESCORE` candidates exactly; below it the exact scan is as fast."""
PROJECTED_DIMS = 128
RESCORE = 1000


def _project(matrix: Vectors) -> tuple[Vectors, Vectors]:
    """(basis, matrix @ basis) of :meth:`_KindIndex.projected`, on one BLAS thread wherever it
    runs (a search's setting), so a sync stores what a search would compute."""
    with threadpool_limits(limits=1, user_api="blas"):
        dims = min(PROJECTED_DIMS, matrix.shape[1])
        second_moment = matrix.T @ matrix
        _, basis = np.linalg.eigh(second_moment.astype(np.float64))
        top = np.ascontiguousarray(basis[:, ::-1][:, :dims], dtype=np.float32)
        return top, np.ascontiguousarray(matrix @ top)


class _KindIndex:
    """Lexical (BM25) and vector search over the nodes of one kind, built on first use.

    Above :data:`QUANTIZE_FROM` rows the exact float32 scan is limited by memory bandwidth
    (15 ms for 100k x 384 here); the index then also keeps the matrix projected on its
    :data:`PROJECTED_DIMS` principal directions (a third of the bytes), ranks every row by the
    projection and rescores the top :data:`RESCORE` with the full vectors. Scores returned
    are always exact cosines; recall@10 against the exact scan is measured by
    ``bench/scale.py`` and tested in ``tests/test_scale.py``."""

    def __init__(self, ids: Sequence[str], postings: Callable[[], Postings],
                 vector_ids: Sequence[str], matrix: Vectors | None,
                 stored_projection: Callable[[], tuple[Vectors, Vectors] | None] = lambda: None,
                 ) -> None:
        self.ids = list(ids)
        self._postings = postings
        self._stored_projection = stored_projection
        self._bm25: BM25 | None = None
        self.vector_ids = list(vector_ids)
        self.matrix = matrix if matrix is not None else np.zeros((0, 0), dtype=np.float32)
        self._projection: tuple[Vectors, Vectors] | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, records: Sequence[NodeRecord], vector_ids: Sequence[str],
           matrix: Vectors | None) -> _KindIndex:
        """The index of ``records`` (their texts counted now)."""
        postings = Postings.of(tokenize(r.text) for r in records)
        return cls([r.id for r in records], lambda: postings, vector_ids, matrix)

    @property
    def bm25(self) -> BM25:
        """Built on the first text search, from the stored term counts where they match."""
        bm25 = self._bm25
        if bm25 is None:
            with self._lock:
                bm25 = self._bm25
                if bm25 is None:
                    bm25 = self._bm25 = BM25(self._postings())
        return bm25

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
                self._projection = self._stored_projection() or _project(self.matrix)
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
