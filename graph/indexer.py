"""Turning a library into the graph: nodes, embeddings (cached), and the four kinds of edges."""

from __future__ import annotations

import gc
import hashlib
import json
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from itertools import combinations, repeat
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from skillgrove.graph.documents import example_records, group_record, skill_record
from skillgrove.graph.embeddings import Encoder, Vectors, indexing_threads
from skillgrove.graph.learning import (
    QualityStats,
    co_use_weights,
    quality_from_runs,
    runs_as_history,
)
from skillgrove.graph.model import (
    Edge,
    EdgeKind,
    NodeKind,
    NodeRecord,
    SyncReport,
    group_of,
    vector_digest,
)
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, GroupRouter, digest
from skillgrove.graph.stages import FITTED_KEY
from skillgrove.graph.store import GraphStore
from skillgrove.groups.library import Library

Progress = Callable[[str, int, int], None]
SIMILAR_K = 5
SIMILAR_THRESHOLD = 0.55
GENERATION_KEY = "index_generation"
"""Metadata naming the indexed content (a digest of every node and edge): readers may remember
anything derived from the graph while it stays the same."""


@dataclass(frozen=True)
class IndexResult:
    report: SyncReport
    skills: int
    groups: int
    embedded: int
    """Texts the encoder really had to embed (0 when nothing changed)."""
    seconds: float


SIMILAR_BLOCK = 512
"""Rows of the similarity matrix computed at once: ``SIMILAR_BLOCK x N`` floats (200 MB at
100k nodes) instead of the whole ``N x N`` (37 GiB at 100k)."""


def similar_edges(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                  threshold: float = SIMILAR_THRESHOLD, block: int = SIMILAR_BLOCK,
                  ) -> list[Edge]:
    """Top-``k`` neighbours of each node above ``threshold``, one edge per unordered pair.

    A pair's similarity is its exact dot product (:func:`_pair_dots`: the same bits however
    it is computed), and ties go to the smaller id, so the edges are a function of the
    vectors alone: :func:`updated_similar_edges` can reproduce them from an earlier result.
    The float32 matrix product, ``block`` rows at a time (memory grows with ``N``, not
    ``N**2``), only finds the candidates. ``tests/test_scale.py`` and
    ``tests/test_incremental_similar.py`` check against brute force.
    """
    return _computed(list(ids), np.ascontiguousarray(matrix, dtype=np.float32), k, threshold,
                     block).edges


@dataclass(frozen=True)
class _Similar:
    """SIMILAR_TO edges over ``ids`` as an update reads them: beside the edges, each one's
    end rows in ``ids`` and its weight, as arrays (an update's passes are then numpy's, not
    one per edge)."""

    ids: list[str]
    edges: list[Edge]
    src: npt.NDArray[np.int64]
    dst: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    total: int
    """The sum of the edges' ``Edge.digest`` (their part of the index generation)."""

    @classmethod
    def of(cls, ids: list[str], edges: list[Edge], src: npt.NDArray[np.int64],
           dst: npt.NDArray[np.int64], weights: npt.NDArray[np.float64]) -> _Similar:
        return cls(ids, edges, src, dst, weights, sum(map(_DIGEST, edges)))

    @classmethod
    def of_edges(cls, ids: Sequence[str], edges: Sequence[Edge]) -> _Similar:
        """Those of ``edges`` with both ends in ``ids`` (a pass per edge)."""
        position = {nid: i for i, nid in enumerate(ids)}
        src = np.fromiter(map(position.get, map(_SRC, edges), repeat(-1)), dtype=np.int64,
                          count=len(edges))
        dst = np.fromiter(map(position.get, map(_DST, edges), repeat(-1)), dtype=np.int64,
                          count=len(edges))
        ours = np.nonzero((src >= 0) & (dst >= 0))[0]
        weights = np.fromiter(map(_WEIGHT, edges), dtype=np.float64, count=len(edges))
        return cls.of(list(ids), list(map(edges.__getitem__, ours.tolist())), src[ours],
                      dst[ours], weights[ours])

    def reordered(self, ids: list[str]) -> _Similar:
        """The same edges over ``ids``, the same nodes in another order."""
        if ids == self.ids:
            return self
        position = {nid: i for i, nid in enumerate(ids)}
        row = np.fromiter(map(position.__getitem__, self.ids), dtype=np.int64,
                          count=len(self.ids))
        return _Similar(ids, self.edges, row[self.src], row[self.dst], self.weights,
                        self.total)


_NO_ROWS = np.zeros(0, dtype=np.int64)


def _computed(ids: list[str], matrix: Vectors, k: int, threshold: float, block: int,
              rank: npt.NDArray[np.int64] | None = None, slack: float | None = None,
              ) -> _Similar:
    """:func:`similar_edges`, the whole computation, with the edges' rows."""
    if len(ids) < 2:
        return _Similar(ids, [], _NO_ROWS, _NO_ROWS, np.zeros(0), 0)
    rows = np.arange(len(ids), dtype=np.int64)
    rank = _id_ranks(ids) if rank is None else rank
    chosen = _choose(matrix, rows, rank, k, threshold, block, slack)
    return _Similar.of(ids, *_chosen_edges(ids, rank, chosen, None))


def updated_similar_edges(old_ids: Sequence[str], old_matrix: Vectors, old_edges: Sequence[Edge],
                          ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                          threshold: float = SIMILAR_THRESHOLD, block: int = SIMILAR_BLOCK,
                          ) -> list[Edge]:
    """:func:`similar_edges` of ``ids``/``matrix``, given ``old_edges``, its result for
    ``old_ids``/``old_matrix``: only rows whose choice can have changed are computed again
    (see :func:`_updated`). When much has changed the whole computation is cheaper and is
    done instead. The edges come in no particular order; ``old_edges`` may hold others
    (another kind's SIMILAR_TO edges): those with an end outside ``old_ids`` are left out."""
    ids = list(ids)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    old_matrix = np.ascontiguousarray(old_matrix, dtype=np.float32)
    if matrix.shape[1:] == old_matrix.shape[1:]:
        updated = _updated(_Similar.of_edges(old_ids, old_edges), ids, matrix,
                           _unchanged_rows(old_ids, old_matrix, ids, matrix), k, threshold,
                           block)
        if updated is not None:
            return updated.edges
    return similar_edges(ids, matrix, k, threshold, block)


def _unchanged_rows(old_ids: Sequence[str], old_matrix: Vectors, ids: Sequence[str],
                    matrix: Vectors) -> npt.NDArray[np.bool_]:
    """Per row of ``ids``: whether the node was in ``old_ids`` with the same vector."""
    if len(old_ids) == len(ids) and list(old_ids) == list(ids):  # an edit: the same rows
        same: npt.NDArray[np.bool_] = ~(old_matrix != matrix).any(axis=1)
        return same
    old_position = {nid: i for i, nid in enumerate(old_ids)}
    unchanged = np.zeros(len(ids), dtype=bool)
    pairs = [(i, old_position[nid]) for i, nid in enumerate(ids) if nid in old_position]
    if pairs:
        new_rows, old_rows = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True))
        unchanged[new_rows] = ~(old_matrix[old_rows] != matrix[new_rows]).any(axis=1)
    return unchanged


def _updated(old: _Similar, ids: list[str], matrix: Vectors, unchanged: npt.NDArray[np.bool_],
             k: int, threshold: float, block: int, rank: npt.NDArray[np.int64] | None = None,
             slack: float | None = None) -> _Similar | None:
    """:func:`similar_edges` of ``ids``/``matrix`` from ``old``, that of the old nodes, where
    ``unchanged`` flags the rows of ``ids`` whose node had the same vector among them; None
    when so much changed that the whole computation is cheaper.

    A node's choice (its top ``k`` above ``threshold``) changes only if a new vector enters
    it (one at least as similar to the node as its ``k``-th choice, see
    :func:`_entry_floors`) or a vector in it leaves (the node had an edge to a removed or
    changed one); those nodes are "affected". An edge between two unaffected nodes stands as
    it was. An edge touching an affected node exists if either end chooses the other, so the
    choices of the affected nodes and of their old neighbours are computed again: a few rows
    of ``N`` each, not ``N`` rows."""
    count = len(ids)
    if count <= k + 1 or len(old.ids) <= k + 1:
        return None
    # The old nodes numbered as the new rows, one only among the old past the end.
    leaving: list[int] = []
    if old.ids == ids:
        src, dst = old.src, old.dst
        was_old = np.ones(count, dtype=bool)
    else:
        position = {nid: i for i, nid in enumerate(ids)}
        where = np.fromiter(map(position.get, old.ids, repeat(-1)), dtype=np.int64,
                            count=len(old.ids))
        gone_rows = np.nonzero(where < 0)[0]
        where[gone_rows] = count + np.arange(len(gone_rows))
        leaving = where[gone_rows].tolist()
        src, dst = where[old.src], where[old.dst]
        was_old = np.zeros(count + len(gone_rows), dtype=bool)
        was_old[where] = True
    ends = len(was_old)
    entering = np.nonzero(~unchanged)[0]
    changed = entering[was_old[entering]]
    if len(entering) + len(leaving) + len(changed) > max(count // 8, 1):
        return None
    weights = old.weights

    def neighbours_of(marked: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Rows (in ``ids``) with an old edge to a node ``marked`` (a flag per end row)."""
        found = np.concatenate([dst[marked[src]], src[marked[dst]]])
        return np.unique(found[found < count])

    if slack is None:
        slack = _slack(matrix)
    affected = np.zeros(count, dtype=bool)
    affected[entering] = True
    if len(entering):
        floors = _entry_floors(src, dst, weights, count, k, threshold) - slack
        for start in range(0, len(entering), block):
            sims = matrix @ matrix[entering[start:start + block]].T
            affected |= (sims >= floors[:, None]).any(axis=1)
    gone = np.zeros(ends, dtype=bool)
    gone[leaving] = True
    gone[changed] = True
    affected[neighbours_of(gone)] = True
    touched = np.zeros(ends, dtype=bool)
    touched[:count] = affected
    recompute = affected.copy()
    recompute[neighbours_of(touched)] = True
    rank = _id_ranks(ids) if rank is None else rank
    chosen = _choose(matrix, np.nonzero(recompute)[0].astype(np.int64), rank, k, threshold,
                     block, slack)
    staying = (src < count) & (dst < count) & ~touched[src] & ~touched[dst]
    stays = np.nonzero(staying)[0]
    edges, new_src, new_dst, new_weights = _chosen_edges(ids, rank, chosen, affected)
    went = list(map(old.edges.__getitem__, np.nonzero(~staying)[0].tolist()))
    # An edge chosen again as it was is the same object: a store holding it knows it at a
    # glance (a new object for it would be compared on every later sync).
    before = {(e.src, e.dst): e for e in went}
    edges = [found if (found := before.get((e.src, e.dst))) is not None
             and found.weight == e.weight and not found.props else e for e in edges]
    # The digests' sum follows the edges that went and came.
    total = old.total - sum(map(_DIGEST, went)) + sum(map(_DIGEST, edges))
    return _Similar(ids, list(map(old.edges.__getitem__, stays.tolist())) + edges,
                    np.concatenate([src[stays], new_src]), np.concatenate([dst[stays], new_dst]),
                    np.concatenate([weights[stays], new_weights]), total)


def _chosen_edges(ids: Sequence[str], rank: npt.NDArray[np.int64],
                  chosen: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                npt.NDArray[np.float64]],
                  only: npt.NDArray[np.bool_] | None,
                  ) -> tuple[list[Edge], npt.NDArray[np.int64], npt.NDArray[np.int64],
                             npt.NDArray[np.float64]]:
    """An edge per chosen pair (row, column, exact similarity) with an end flagged in
    ``only`` (unless None), from the smaller id to the larger, in the order of the id pairs,
    and their end rows and weights. A pair chosen from both ends has the same similarity
    either way (:func:`_pair_dots`), so it is one edge; the pairs are found by numpy, one
    code per pair, rather than a dictionary entry each (445k at 100k skills)."""
    rows, cols, sims = chosen
    if only is not None:
        ours = only[rows] | only[cols]
        rows, cols, sims = rows[ours], cols[ours], sims[ours]
    first = rank[rows] < rank[cols]
    src, dst = np.where(first, rows, cols), np.where(first, cols, rows)
    _, once = np.unique(rank[src] * len(ids) + rank[dst], return_index=True)
    src, dst = src[once], dst[once]
    weights = [round(sim, 4) for sim in sims[once].tolist()]
    edges = [Edge(EdgeKind.SIMILAR_TO, ids[a], ids[b], weight)
             for a, b, weight in zip(src.tolist(), dst.tolist(), weights, strict=True)]
    return edges, src.astype(np.int64), dst.astype(np.int64), np.array(weights, dtype=np.float64)


_SRC, _DST, _WEIGHT = attrgetter("src"), attrgetter("dst"), attrgetter("weight")
_DIGEST = attrgetter("digest")


def _entry_floors(src: npt.NDArray[np.int64], dst: npt.NDArray[np.int64],
                  weights: npt.NDArray[np.float64], count: int, k: int, threshold: float,
                  ) -> npt.NDArray[np.float64]:
    """Per row: how similar a new vector must be to enter the row's choice, from the old
    edges alone (their end rows, ends at ``count`` or beyond being no row, and weights). A
    node's ``k`` choices are the ``k`` heaviest edges touching it (an edge from a node that
    chose it and outweighed its ``k``-th choice would be one of its choices), so its
    ``k``-th heaviest edge, less the rounding of weights, bounds its ``k``-th choice from
    below; with fewer than ``k`` edges any vector above the threshold may enter. At 10k
    synthetic skills half the library is above the threshold of a typical vector, while a
    handful beat a node's fifth choice."""
    floors = np.full(count, threshold, dtype=np.float64)
    if not len(weights):
        return floors
    end_rows = np.concatenate([src, dst])
    heavy = np.concatenate([weights, weights])
    known = end_rows < count
    end_rows, heavy = end_rows[known], heavy[known]
    # By row, heaviest first: one sort of a float key (weights are cosines, in [-1, 1]).
    order = np.argsort(end_rows * 4.0 - heavy)
    end_rows, heavy = end_rows[order], heavy[order]
    place = np.arange(len(end_rows)) - np.searchsorted(end_rows, end_rows, side="left")
    kth = place == k - 1
    floors[end_rows[kth]] = np.maximum(heavy[kth] - 1e-4, threshold)
    return floors


def _choose(matrix: Vectors, rows: npt.NDArray[np.int64], rank: npt.NDArray[np.int64], k: int,
            threshold: float, block: int, slack: float | None = None,
            ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(row, chosen column, exact similarity) for each of ``rows``: its ``k`` most similar
    other rows by :func:`_pair_dots` (ties: the lower ``rank`` first) that reach
    ``threshold``. The float32 product finds the candidates: every row within ``_slack`` of
    the ``k``-th best or the threshold, a superset of the exact answer."""
    count = len(matrix)
    take = min(k, count - 1)
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    if take <= 0 or not len(rows):
        return empty
    if slack is None:
        slack = _slack(matrix)
    found_rows: list[npt.NDArray[np.int64]] = []
    found_cols: list[npt.NDArray[np.int64]] = []
    found_sims: list[npt.NDArray[np.float64]] = []
    for start in range(0, len(rows), block):
        chunk = rows[start:start + block]
        sims = matrix[chunk] @ matrix.T
        sims[np.arange(len(chunk)), chunk] = -np.inf
        kth = -np.partition(-sims, take - 1, axis=1)[:, take - 1]
        floor = np.maximum(kth, np.float32(threshold)) - slack
        local, cols = np.nonzero(sims >= floor[:, None])
        # Exact dots block by block: all candidates at once took 3 x 8 bytes x dims each
        # (3 GB at 100k skills).
        exact = _pair_dots(matrix, chunk[local], cols)
        keep = exact >= threshold
        found_rows.append(chunk[local][keep])
        found_cols.append(cols[keep].astype(np.int64))
        found_sims.append(exact[keep])
    row_ids, col_ids = np.concatenate(found_rows), np.concatenate(found_cols)
    exact = np.concatenate(found_sims)
    order = np.lexsort((rank[col_ids], -exact, row_ids))
    row_ids, col_ids, exact = row_ids[order], col_ids[order], exact[order]
    place = np.arange(len(row_ids)) - np.searchsorted(row_ids, row_ids, side="left")
    first = place < take
    return row_ids[first], col_ids[first], exact[first]


def _pair_dots(matrix: Vectors, a: npt.NDArray[np.int64], b: npt.NDArray[np.int64],
               ) -> npt.NDArray[np.float64]:
    """Row ``a[i]`` dot row ``b[i]`` in float64, as one definition: the products commute and
    the sum always runs over the same values in the same order, so a pair gets the same bits
    whichever side asks and whichever other pairs are computed with it (a BLAS product's
    last bits depend on the shapes it is called with)."""
    dots: npt.NDArray[np.float64] = (matrix[a].astype(np.float64)
                                     * matrix[b].astype(np.float64)).sum(axis=1)
    return dots


def _slack(matrix: Vectors) -> float:
    """Twice the most a float32 dot product of two rows can be off from the exact one
    (``dims * 2**-24 * |x| |y|``), bounding how far below the k-th best a candidate can rank."""
    if not matrix.size:
        return 0.0
    return _slack_of(float(np.max(_squared_norms(matrix))), matrix)


def _slack_of(largest: float, matrix: Vectors) -> float:
    """:func:`_slack` given the largest squared length of a row."""
    return float(2.0 * matrix.shape[1] * 2.0**-24 * max(largest, 1.0) + 1e-12)


def _id_ranks(ids: Sequence[str]) -> npt.NDArray[np.int64]:
    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank


SIMILAR_VERSION = "exact-dots-1"
"""Names how :func:`similar_edges` decides (in :func:`similar_key`): edges stored by another
definition are computed again, never updated incrementally."""

_MASK = (1 << 128) - 1


def similar_key(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                threshold: float = SIMILAR_THRESHOLD) -> str:
    """What SIMILAR_TO edges over ``ids`` depend on: equal keys, equal edges. It names the
    nodes and vectors by the sum of each row's :func:`graph.model.vector_digest`, whatever
    their order (the edges do not depend on it either), so a key follows an edit by the
    edited rows' parts: :class:`StoredSimilar` computes it from the digests a store keeps
    of its rows and those of the rows that changed, never hashing the whole matrix."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    return _similar_key(len(ids), sum(vector_digest(nid, row)
                                      for nid, row in zip(ids, matrix, strict=True)), k, threshold)


def _similar_key(count: int, total: int, k: int = SIMILAR_K,
                 threshold: float = SIMILAR_THRESHOLD) -> str:
    """:func:`similar_key` of ``count`` nodes whose rows' digests add up to ``total``."""
    line = f"{SIMILAR_VERSION}\0{k}\0{threshold}\0{count}:{total & _MASK:x}"
    return hashlib.sha256(line.encode()).hexdigest()[:32]


def _hashed_similar_key(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                        threshold: float = SIMILAR_THRESHOLD) -> str:
    """The key as files written before :func:`similar_key` added digests hold it (the ids and
    the whole matrix hashed in order): their SIMILAR_TO edges are still updated, not
    computed again (minutes at 100k skills)."""
    hasher = hashlib.sha256(f"{SIMILAR_VERSION}\0{k}\0{threshold}\0".encode())
    hasher.update("\0".join(ids).encode("utf-8", "surrogatepass"))
    hasher.update(np.ascontiguousarray(matrix, dtype=np.float32).data.cast("B"))
    return hasher.hexdigest()[:32]


SimilarSource = Callable[[NodeKind, Sequence[str], Vectors], "list[Edge]"]
"""(kind, ids, matrix) -> the SIMILAR_TO edges of those nodes (see :func:`stored_similar`)."""


def stacked(rows: Sequence[Vectors]) -> Vectors:
    """One float32 matrix of equally long vectors: ``np.stack``, in a third of the time at 10k
    rows (``np.array`` copies them without a view per row)."""
    if not len(rows):
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.array(rows, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors of different shapes: {matrix.shape}")
    return matrix


def co_used_edges(groups: Sequence[Sequence[str]],
                  extra: Mapping[tuple[str, str], float] | None = None,
                  transitions: Mapping[tuple[str, str], float] | None = None) -> list[Edge]:
    """Skill pairs used together: once per group holding both, plus ``extra`` (run history).
    ``transitions`` (directed pairs: how often history fed ``a``'s result to ``b``) become
    the edge's ``forward`` (src to dst) and ``backward`` counts; a pair only ever run in
    order still counts as used together."""
    weights: dict[tuple[str, str], float] = {}
    for members in groups:
        for a, b in combinations(sorted(set(members)), 2):
            weights[(a, b)] = weights.get((a, b), 0.0) + 1.0
    for (x, y), weight in (extra or {}).items():
        key = (x, y) if x <= y else (y, x)
        weights[key] = weights.get(key, 0.0) + weight
    directed: dict[tuple[str, str], dict[str, float]] = {}
    for (x, y), count in (transitions or {}).items():
        if x == y:
            continue
        key, side = ((x, y), "forward") if x <= y else ((y, x), "backward")
        directed.setdefault(key, {})[side] = float(count)
        weights.setdefault(key, 1.0)
    return [Edge(EdgeKind.CO_USED, a, b, float(w), directed.get((a, b), {}))
            for (a, b), w in sorted(weights.items())]


def with_quality(records: Sequence[NodeRecord], stats: Mapping[str, QualityStats],
                 ) -> list[NodeRecord]:
    """Records carrying their run statistics (``data["stats"]``), which the retriever's quality
    filter reads; skills are keyed by name, groups by ``group:<id>``."""
    out = []
    for record in records:
        found = stats.get(record.id if record.kind is NodeKind.GROUP else record.name)
        if found is None:
            out.append(record)
            continue
        data = {**record.data, "stats": found.to_dict()}
        content = hashlib.sha256((record.content_hash + json.dumps(data["stats"], sort_keys=True)
                                  ).encode()).hexdigest()
        out.append(replace(record, content_hash=content, data=data))
    return out


COMPANIONS_MAX_SKILLS = 5000
"""Companions read from the library itself (``graph/companions.py``) are found for libraries
of at most this many skills: the pass reads every skill's instructions (1.4-2.3 s for the
1,300 skills of the corpus), which an edit of one skill would pay again."""
COMPANIONS_KEPT = 8


def with_companions(records: Sequence[NodeRecord], skills: Mapping[str, Any],
                    ) -> list[NodeRecord]:
    """Skill records carrying their companions read from the library itself
    (``data["companions"]``: id, name, source and reason of each, strongest first), the
    "usually used with" of a library that has no groups and no runs yet."""
    if not skills or len(skills) > COMPANIONS_MAX_SKILLS:
        return list(records)
    from skillgrove.graph.companions import companions

    found = companions(skills.values())
    winners = {skill.id: name for name, skill in skills.items()}
    out = []
    for record in records:
        listed = found.get(winners.get(record.id, ""), ())
        if not listed:
            out.append(record)
            continue
        data = {**record.data, "companions": [
            {"id": c.id, "name": c.name, "source": c.source, "reason": c.reason}
            for c in listed[:COMPANIONS_KEPT]]}
        content = hashlib.sha256((record.content_hash + json.dumps(
            data["companions"], sort_keys=True)).encode()).hexdigest()
        out.append(replace(record, content_hash=content, data=data))
    return out


EMBED_CHUNK = 512
"""Texts handed to the encoder per call: large enough that its length-sorted batches pad
little, small enough for progress to move."""


def embed_nodes(nodes: Sequence[NodeRecord], encoder: Encoder,
                progress: Progress | None = None) -> dict[str, Vectors]:
    """Each node's vector, texts taken in order of length: a batch is padded to its longest
    text, so batches of similar lengths cost less (1.9x here on the 10k corpus)."""
    order = sorted(range(len(nodes)), key=lambda i: len(nodes[i].text))
    vectors: dict[str, Vectors] = {}
    with indexing_threads(encoder):
        for start in range(0, len(order), EMBED_CHUNK):
            chunk = [nodes[i] for i in order[start : start + EMBED_CHUNK]]
            for record, vector in zip(chunk, encoder.encode([n.text for n in chunk]),
                                      strict=True):
                vectors[record.id] = vector
            if progress:
                progress("embedding", min(start + EMBED_CHUNK, len(nodes)), len(nodes))
    return vectors


def build_graph(library: Library, encoder: Encoder, progress: Progress | None = None,
                co_use: Mapping[tuple[str, str], float] | None = None,
                runs: Sequence[Mapping[str, Any]] = (),
                similar: SimilarSource | None = None,
                ) -> tuple[list[NodeRecord], dict[str, Vectors], list[Edge]]:
    """``runs`` are run-record dicts (``graph.runlog``): their statistics feed the quality
    filter, and the skills each run used together add to CO_USED."""
    nodes, vectors, others, similar_to = _graph(library, encoder, progress, co_use, runs,
                                                similar)
    return nodes, vectors, others + similar_to


def _graph(library: Library, encoder: Encoder, progress: Progress | None,
           co_use: Mapping[tuple[str, str], float] | None, runs: Sequence[Mapping[str, Any]],
           similar: SimilarSource | None,
           transitions: Mapping[tuple[str, str], float] | None = None,
           ) -> tuple[list[NodeRecord], dict[str, Vectors], list[Edge], list[Edge]]:
    """:func:`build_graph`, the SIMILAR_TO edges apart from the others (see
    :func:`generation_with`)."""
    # Every loaded skill is a node under its own id, a shadowed same-named one too; a name (a
    # group's step, a `depends_on`, a run's step) means the skill that answers for it.
    skills = library.catalog.active
    shadowed_by = {sh.hidden.id: sh.winner.id for sh in library.catalog.shadowed}
    skill_nodes = with_companions([skill_record(s, shadowed_by.get(s.id))
                                   for s in library.catalog.skills], skills)
    group_nodes = [group_record(g, skills) for g in library.groups.values()]
    if runs:
        stats = quality_from_runs(runs)
        winners = {s.id for s in skills.values()}  # runs ran the winner of each name
        skill_nodes = [with_quality([n], stats)[0] if n.id in winners else n
                       for n in skill_nodes]
        group_nodes = with_quality(group_nodes, stats)
        ran = co_use_weights(runs_as_history(runs, {s.name: s.id for s in skills.values()}))
        co_use = {**ran, **{pair: weight + ran.get(pair, 0.0)
                            for pair, weight in (co_use or {}).items()}}
    example_nodes = [e for g in library.groups.values() for e in example_records(g)]
    nodes = skill_nodes + group_nodes + example_nodes
    vectors = embed_nodes(nodes, encoder, progress)

    with gc_paused():
        others, similar_to = _edges(library, skills, skill_nodes, group_nodes, vectors, co_use,
                                    similar, transitions)
        # History may name skills that are not indexed (rejected, removed, an id that
        # changed): an edge is written only between nodes that exist. SIMILAR_TO edges join
        # the nodes they were computed over.
        known = {n.id for n in nodes}
        others = [e for e in others if e.src in known and e.dst in known]
    return nodes, vectors, others, similar_to


def _edges(library: Library, skills: Mapping[str, Any], skill_nodes: Sequence[NodeRecord],
           group_nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
           co_use: Mapping[tuple[str, str], float] | None, similar: SimilarSource | None,
           transitions: Mapping[tuple[str, str], float] | None = None,
           ) -> tuple[list[Edge], list[Edge]]:
    """The edges of :func:`build_graph`: CONTAINS and FLOWS_TO from the groups, declared
    prerequisites and CO_USED; then SIMILAR_TO (from ``similar`` when given), skills' first."""
    edges: list[Edge] = []
    memberships: list[list[str]] = []
    for group in library.groups.values():
        gid = group_record(group, skills).id
        members: list[str] = []
        for order, step in enumerate(group.steps):
            if step.skill and step.skill in skills:
                sid = skills[step.skill].id
                members.append(sid)
                edges.append(Edge(EdgeKind.CONTAINS, gid, sid, 1.0,
                                  {"step": step.id, "order": order}))
        for upstream, downstream in group.edges():
            a, b = group.step(upstream), group.step(downstream)
            if a.skill in skills and b.skill in skills and a.skill and b.skill:
                edges.append(Edge(EdgeKind.FLOWS_TO, skills[a.skill].id, skills[b.skill].id, 1.0,
                                  {"group": group.id, "from_step": a.id, "to_step": b.id}))
        memberships.append(members)
    # Declared prerequisites: the skill a skill depends on flows into it.
    for skill in skills.values():
        for position, name in enumerate(skill.depends_on):
            needed = skills.get(name)
            if needed is not None and needed.id != skill.id:
                edges.append(Edge(EdgeKind.FLOWS_TO, needed.id, skill.id, 1.0,
                                  {"declared": True, "position": position}))
    similar_to: list[Edge] = []
    for kind, kind_nodes in ((NodeKind.SKILL, skill_nodes), (NodeKind.GROUP, group_nodes)):
        ids = [n.id for n in kind_nodes]
        if ids:
            matrix = stacked([vectors[i] for i in ids])
            similar_to.extend(similar(kind, ids, matrix) if similar is not None
                              else similar_edges(ids, matrix))
    edges.extend(co_used_edges(memberships, co_use, transitions))
    return edges, similar_to


def generation(nodes: Sequence[NodeRecord], edges: Sequence[Edge], *also: str) -> str:
    """A digest of the indexed content (and of ``also``: the model, the router), so the same
    library indexed the same way gives the same value. Edges count as a store keeps them: one
    per key, the last given (a group that uses a skill twice lists its edges twice), so the
    value can be checked against what a store holds.

    Order does not matter: the nodes' and the edges' 128-bit digests (``NodeRecord.digest``,
    ``Edge.digest``, each computed once per record) are added up, so a re-index that keeps
    most records pays a sum, not a sort and a hash of every line (0.1 s at 10k skills)."""
    by_key = {edge.key: edge for edge in edges}
    return _generation(nodes, len(by_key), sum(map(_DIGEST, by_key.values())), also)


def generation_with(nodes: Sequence[NodeRecord], others: Sequence[Edge],
                    similar: StoredSimilar, *also: str) -> str:
    """:func:`generation` of ``nodes`` and of ``others`` followed by the SIMILAR_TO edges the
    calls of ``similar`` returned (in their order, one call per kind), without a pass over
    those: each result carries its digests' sum, which an update keeps by taking out the
    edges that went and adding those that came. ``others`` holding a SIMILAR_TO edge, or
    results that could share an edge (a kind asked twice, a node in two), take the pass."""
    parts = [part for _, part in similar.handed]
    kinds = [kind for kind, _ in similar.handed]
    similar_to = EdgeKind.SIMILAR_TO
    if (len(set(kinds)) != len(kinds) or any(edge.kind is similar_to for edge in others)
            or not _disjoint([part.ids for part in parts])):
        return generation(nodes, [*others, *(e for part in parts for e in part.edges)], *also)
    by_key = {edge.key: edge for edge in others}
    return _generation(nodes, len(by_key) + sum(len(part.edges) for part in parts),
                       sum(map(_DIGEST, by_key.values())) + sum(part.total for part in parts),
                       also)


def _disjoint(id_lists: Sequence[Sequence[str]]) -> bool:
    """Whether no id is in two of the lists (the longest is only looked up, not copied)."""
    ordered = sorted(id_lists, key=len)
    seen: set[str] = set()
    for ids in ordered[:-1]:
        if not seen.isdisjoint(ids):
            return False
        seen.update(ids)
    return not ordered or seen.isdisjoint(ordered[-1])


def _generation(nodes: Sequence[NodeRecord], edge_count: int, edge_sum: int,
                also: Sequence[str]) -> str:
    mask = (1 << 128) - 1
    by_id = {node.id: node for node in nodes}
    node_sum = sum(map(_DIGEST, by_id.values())) & mask
    hasher = hashlib.sha256(f"{GENERATION_VERSION}\0".encode())
    hasher.update("\0".join(also).encode("utf-8", "surrogatepass"))
    hasher.update(f"\0{len(by_id)}:{node_sum:x}\0{edge_count}:{edge_sum & mask:x}".encode())
    return hasher.hexdigest()[:16]


GENERATION_VERSION = "sum-128-1"
"""Names how :func:`generation` combines its parts."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a re-index computes, compares and writes its
    tens of thousands of records (edges, keys, rows), which reference counting frees: in a
    process holding a model and a 10k library a full collection took about 80 ms and came
    about once per edited skill, a third of the edit. The encoder runs outside it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def fit_router(nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
               ) -> GroupRouter | None:
    """The group router, fitted on each group's examples and its own text (None with fewer than
    two groups: there is nothing to tell apart)."""
    labels, texts, rows = _router_inputs(nodes, vectors)
    if len(set(labels)) < 2:
        return None
    return GroupRouter.fit(labels, texts, np.stack(rows))


ROUTER_INPUT_KEY = "router_input"
"""Metadata: the digest of what the stored router was fitted on (see :func:`router_input`)."""


def router_input(nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors]) -> str:
    """A digest of everything :func:`fit_router` reads (labels, texts, vectors) and of the
    router's own code: equal digests fit equal routers, so a re-index reuses the stored one."""
    import hashlib
    import inspect

    from skillgrove.graph import router as router_module

    labels, texts, rows = _router_inputs(nodes, vectors)
    h = hashlib.sha256(inspect.getsource(router_module).encode("utf-8"))
    for label, text, row in zip(labels, texts, rows, strict=True):
        h.update(f"{len(label)}:{label}{len(text)}:{text}".encode())
        h.update(np.ascontiguousarray(row, dtype=np.float32).tobytes())
    return h.hexdigest()


def _router_inputs(nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
                   ) -> tuple[list[str], list[str], list[Vectors]]:
    labels: list[str] = []
    texts: list[str] = []
    rows: list[Vectors] = []
    group, example = NodeKind.GROUP, NodeKind.EXAMPLE  # an enum member's lookup costs 80 ns
    for node in nodes:
        kind = node.kind
        if kind is group:
            label = node.id
        elif kind is example:
            label = group_of(node)
        else:
            continue
        if label and node.id in vectors:
            labels.append(label)
            texts.append(node.text)
            rows.append(vectors[node.id])
    return labels, texts, rows


SIMILAR_KEY = "similar_key"
"""Metadata (one per kind) naming the vectors the stored SIMILAR_TO edges were computed from."""


def router_text(store: GraphStore, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
                ) -> tuple[str, str]:
    """The router's text for these nodes ("" without one) and :func:`router_input`: the stored
    router when it was fitted on the same input (fitting is deterministic), else a new fit."""
    fitted_on = router_input(nodes, vectors)
    if store.get_meta(ROUTER_INPUT_KEY) == fitted_on:
        stored = store.get_meta(ROUTER_KEY)
        if stored is not None:
            return stored, fitted_on
    router = fit_router(nodes, vectors)
    return (router.to_text() if router is not None else ""), fitted_on


_LAST_DIGEST: tuple[str, str] = ("", "")


def text_digest(text: str) -> str:
    """The router text's :func:`graph.router.digest` ("" for no router). The stored router,
    handed back by :func:`router_text` on every re-index that kept it, is megabytes (5 ms to
    hash at 1k groups): the digest of the last text is remembered for that very object (the
    same object, so the same text)."""
    global _LAST_DIGEST
    last = _LAST_DIGEST
    if last[0] is text:
        return last[1]
    found = digest(text) if text else ""
    _LAST_DIGEST = (text, found)
    return found


SIMILAR_IDS_KEY = "similar_ids"
"""Metadata (one per kind): the ids, as a JSON list, that the stored SIMILAR_TO edges and
:data:`SIMILAR_KEY` were computed over, so a re-index can find the vectors they came from."""

_Held = tuple[list[str], Vectors, tuple[int, ...]]
"""A store's vectors of one kind: ids, matrix, each row's digest (``vector_digests``)."""


@dataclass(frozen=True)
class _Known:
    """What :class:`StoredSimilar` last computed for one store and kind."""

    key: str
    similar: _Similar
    ids_json: str
    digests: list[int]
    """Each row's :func:`graph.model.vector_digest`, rows as in ``similar.ids``."""
    total: int
    rank: npt.NDArray[np.int64]
    norms: npt.NDArray[np.float64]
    """Each row's squared length (for :func:`_slack`)."""
    held_ids: list[str]
    held_rows: npt.NDArray[np.int64]
    """Each node's row among ``held_ids``, the store's ids of the kind then (-1: none)."""


_KNOWN: weakref.WeakKeyDictionary[GraphStore, dict[NodeKind, _Known]] = (
    weakref.WeakKeyDictionary())


class StoredSimilar:
    """SIMILAR_TO edges computed against what a store holds: the stored edges when the vectors
    are those they were computed from, an incremental update (:func:`_updated`) when a few
    vectors were added, changed or removed, the whole computation otherwise. ``meta``
    collects the entries a sync must write with the edges (:data:`SIMILAR_KEY`,
    :data:`SIMILAR_IDS_KEY` per kind).

    Nothing stored is believed because it says so. The stored edges are used only when the
    stored key is the key of the vectors the store holds, which a store that keeps digests of
    its rows (the embedded store's ``vector_digests``: computed from the bytes it holds,
    carried over row by row as a sync writes) gives by a sum, and which is otherwise
    computed from the vectors read back. What this process computed last for the store is
    remembered (edges, their rows, digests): it is a function of the vectors it was computed
    from, so it is used, in place of the stored edges, whenever the store's digests show it
    holds those vectors, and an edit then costs a comparison of the given matrix with the
    stored one and the few rows that differ, not a pass over every edge and a hash of every
    vector."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.meta: dict[str, str] = {}
        self.handed: list[tuple[NodeKind, _Similar]] = []
        """What each call returned, in order (see :func:`generation_with`)."""
        self._stored_edges: list[Edge] | None = None

    def __call__(self, kind: NodeKind, ids: Sequence[str], matrix: Vectors) -> list[Edge]:
        ids = list(ids)
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        held = self._held(kind)
        known = self._known(kind, held)
        same_ids = known is not None and known.similar.ids == ids
        held_rows = None
        if held is not None:
            held_rows = (known.held_rows if known is not None and same_ids
                         and known.held_ids == held[0] else _rows_in(held[0], ids))
        same, digests = _compared(ids, matrix, held, held_rows)
        total = sum(digests)
        key = _similar_key(len(ids), total)
        ids_json = (known.ids_json if known is not None and same_ids
                    else json.dumps(ids, ensure_ascii=False))
        self.meta[f"{SIMILAR_KEY}:{kind.value}"] = key
        self.meta[f"{SIMILAR_IDS_KEY}:{kind.value}"] = ids_json
        if known is not None and same_ids:  # the rows in place: only the changed differ
            rank, norms = known.rank, known.norms.copy()
            norms[~same] = _squared_norms(matrix[~same])
        else:
            rank, norms = _id_ranks(ids), _squared_norms(matrix)
        slack = _slack_of(float(norms.max()) if len(norms) else 0.0, matrix)
        found = ((known.key, known.similar, same) if known is not None
                 else self._stored(kind, held, ids, matrix, same))
        result: _Similar | None = None
        if found is not None:
            old_key, old, unchanged = found
            if old_key == key:
                result = old.reordered(ids)
            else:
                with one_blas_thread():
                    result = _updated(old, ids, matrix, unchanged, SIMILAR_K, SIMILAR_THRESHOLD,
                                      SIMILAR_BLOCK, rank, slack)
        if result is None:
            result = _computed(ids, matrix, SIMILAR_K, SIMILAR_THRESHOLD, SIMILAR_BLOCK, rank,
                               slack)
        if held is not None and held_rows is not None:  # else it could not be checked
            self._remember(kind, _Known(key, result, ids_json, digests, total, rank, norms,
                                        held[0], held_rows))
        self.handed.append((kind, result))
        return list(result.edges)

    def _held(self, kind: NodeKind) -> _Held | None:
        at_once = getattr(self.store, "vector_digests", None)
        held: _Held | None = at_once(kind) if at_once is not None else None
        return held

    def _known(self, kind: NodeKind, held: _Held | None) -> _Known | None:
        """What was computed last for the store and kind, when the store holds the vectors
        it was computed from: as many rows, digests adding up to the same sum."""
        try:
            known = _KNOWN.get(self.store, {}).get(kind)
        except TypeError:  # a store that cannot be a weak key
            return None
        if (known is None or held is None or len(held[0]) != len(known.similar.ids)
                or sum(held[2]) != known.total):
            return None
        return known

    def _remember(self, kind: NodeKind, known: _Known) -> None:
        with suppress(TypeError):  # a store that cannot be a weak key
            _KNOWN.setdefault(self.store, {})[kind] = known

    def _stored(self, kind: NodeKind, held: _Held | None, ids: list[str], matrix: Vectors,
                same: npt.NDArray[np.bool_],
                ) -> tuple[str, _Similar, npt.NDArray[np.bool_]] | None:
        """(key, edges, which rows of ``ids`` are unchanged) of the kind's stored SIMILAR_TO
        computation, when the stored vectors are those its key names."""
        old_key = self.store.get_meta(f"{SIMILAR_KEY}:{kind.value}")
        listed = self.store.get_meta(f"{SIMILAR_IDS_KEY}:{kind.value}")
        if not old_key or not listed:
            return None
        try:
            old_ids = json.loads(listed)
        except ValueError:
            return None
        if (not isinstance(old_ids, list) or not all(isinstance(i, str) for i in old_ids)
                or len(set(old_ids)) != len(old_ids)):
            return None
        if held is not None and len(held[0]) == len(old_ids) and set(held[0]) == set(old_ids):
            # The store's vectors of the kind are the old nodes': its digests name them, and
            # the given rows the store holds as they are are those compared above.
            if _similar_key(len(old_ids), sum(held[2])) != old_key and _hashed_similar_key(
                    old_ids, held[1][_rows_in(held[0], old_ids)]) != old_key:
                return None
            unchanged = same
        else:
            old_matrix = _stored_matrix(self.store, old_ids)
            if old_matrix is None or old_key not in (similar_key(old_ids, old_matrix),
                                                     _hashed_similar_key(old_ids, old_matrix)):
                return None
            unchanged = (_unchanged_rows(old_ids, old_matrix, ids, matrix)
                         if old_matrix.shape[1:] == matrix.shape[1:]
                         else np.zeros(len(ids), dtype=bool))
        if self._stored_edges is None:
            self._stored_edges = self.store.edges(EdgeKind.SIMILAR_TO)
        return old_key, _Similar.of_edges(old_ids, self._stored_edges), unchanged


_BLAS: ThreadpoolController | None = None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread for the block: an update's products are small (a vector and a
    handful of rows against the matrix), and a second thread's hand-over and spinning cost
    more than it saves. With another process busy on this machine's two cores, an edit at
    10k skills took 163-186 ms with two threads and 94-135 ms with one (of CPU, 160-169 ms
    against 91-94). The whole computation keeps every thread."""
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    with _BLAS.limit(limits=1, user_api="blas"):
        yield


def _rows_in(held_ids: Sequence[str], ids: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each of ``ids``'s row among ``held_ids`` (-1: none)."""
    position = {nid: i for i, nid in enumerate(held_ids)}
    return np.fromiter(map(position.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))


def _compared(ids: Sequence[str], matrix: Vectors, held: _Held | None,
              held_rows: npt.NDArray[np.int64] | None,
              ) -> tuple[npt.NDArray[np.bool_], list[int]]:
    """(per row: whether the store holds the node with the same bytes, each row's digest):
    the store's digest for a row it holds as given, a digest computed for the others."""
    same = np.zeros(len(ids), dtype=bool)
    if held is None or held_rows is None:
        return same, [vector_digest(nid, row) for nid, row in zip(ids, matrix, strict=True)]
    _, held_matrix, held_digests = held
    if held_matrix.shape[1:] == matrix.shape[1:] and held_matrix.dtype == matrix.dtype:
        # Compared as bits (-0.0 is not 0.0 to a digest), a block of rows at a time.
        mine, theirs = matrix.view(np.uint32), held_matrix.view(np.uint32)
        found = np.nonzero(held_rows >= 0)[0]
        every = len(found) == len(ids)  # each row held: blocks of consecutive rows
        for start in range(0, len(found), 1024):
            rows = slice(start, start + 1024) if every else found[start:start + 1024]
            same[rows] = (theirs.take(held_rows[rows], axis=0) == mine[rows]).all(axis=1)
    digests = list(map(held_digests.__getitem__, held_rows.tolist()))
    for row in np.nonzero(~same)[0].tolist():
        digests[row] = vector_digest(ids[row], matrix[row])
    return same, digests


def _squared_norms(matrix: Vectors) -> npt.NDArray[np.float64]:
    norms: npt.NDArray[np.float64] = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
    return norms


def _stored_matrix(store: GraphStore, ids: Sequence[str]) -> Vectors | None:
    """The stored vectors of ``ids`` as one matrix (None if one is missing); a store that
    can hand them over at once (the embedded store's ``matrix_rows``) does."""
    at_once = getattr(store, "matrix_rows", None)
    if at_once is not None:
        matrix: Vectors | None = at_once(ids)
        return matrix
    found = store.vectors(ids)
    if len(found) != len(ids) or not ids:
        return None
    return np.stack([np.asarray(found[i], dtype=np.float32) for i in ids])


def stored_similar(store: GraphStore) -> StoredSimilar:
    """Re-indexing reuses or updates the stored SIMILAR_TO edges instead of the all-pairs
    pass (seconds at 10k skills, minutes at 100k): see :class:`StoredSimilar`."""
    return StoredSimilar(store)


def index_library(library: Library, store: GraphStore, encoder: Encoder,
                  progress: Progress | None = None,
                  co_use: Mapping[tuple[str, str], float] | None = None,
                  runs: Sequence[Mapping[str, Any]] = (),
                  write_lock: AbstractContextManager[Any] | None = None,
                  meta: Mapping[str, str] | None = None,
                  transitions: Mapping[tuple[str, str], float] | None = None,
                  fitted: str | None = None) -> IndexResult:
    """Embed what is new, then write the graph and its metadata in one transaction.

    The slow part (embedding, fitting the router) happens first; only the write runs under
    ``write_lock``, so a server holding the matching read lock around each search keeps
    answering during a re-index and every search sees the old index or the new one. The
    generation, the router and ``meta`` (the engine's library fingerprint and paths) commit
    with the graph: a process killed at any moment leaves a graph whose metadata describes
    it, and a reader that sees a new generation sees the graph it names. ``fitted``: the
    retrieval settings fitted on the library's history (``graph.stages.FITTED_KEY``; "" for
    the defaults), part of the generation so that every reader takes them up with it."""
    started = time.perf_counter()
    before = getattr(encoder, "embedded", 0)
    similar = stored_similar(store)
    nodes, vectors, others, similar_to = _graph(library, encoder, progress, co_use, runs,
                                                similar, transitions)
    edges = others + similar_to
    with gc_paused():
        text, fitted_on = router_text(store, nodes, vectors)
        router_digest = text_digest(text)
        entries = {ROUTER_KEY: text, ROUTER_DIGEST_KEY: router_digest,
                   ROUTER_INPUT_KEY: fitted_on,
                   GENERATION_KEY: generation_with(nodes, others, similar, encoder.name,
                                                   router_digest,
                                                   *([text_digest(fitted)] if fitted else [])),
                   "model": encoder.name, "roots": "\n".join(str(r) for r in library.roots),
                   **similar.meta, **(meta or {}),
                   **({FITTED_KEY: fitted} if fitted is not None else {})}
        with write_lock or nullcontext():
            report = store.sync(nodes, vectors, edges, entries)
    return IndexResult(report, sum(1 for n in nodes if n.kind is NodeKind.SKILL),
                       sum(1 for n in nodes if n.kind is NodeKind.GROUP),
                       getattr(encoder, "embedded", 0) - before, time.perf_counter() - started)
