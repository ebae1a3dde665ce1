"""Turning a library into the graph: nodes, embeddings (cached), and the four kinds of edges."""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from itertools import combinations, repeat
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from skillgrove.graph.documents import example_records, group_record, skill_record
from skillgrove.graph.embeddings import Encoder, Vectors, indexing_threads
from skillgrove.graph.learning import (
    QualityStats,
    co_use_weights,
    quality_from_runs,
    runs_as_history,
)
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, GroupRouter, digest
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
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if len(ids) < 2:
        return []
    rows = np.arange(len(ids), dtype=np.int64)
    chosen = _choose(matrix, rows, _id_ranks(ids), k, threshold, block)
    return _as_edges(ids, {}, chosen, None)


def updated_similar_edges(old_ids: Sequence[str], old_matrix: Vectors, old_edges: Sequence[Edge],
                          ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                          threshold: float = SIMILAR_THRESHOLD, block: int = SIMILAR_BLOCK,
                          ) -> list[Edge]:
    """:func:`similar_edges` of ``ids``/``matrix``, given ``old_edges``, its result for
    ``old_ids``/``old_matrix``: only rows whose choice can have changed are computed again.

    A node's choice (its top ``k`` above ``threshold``) changes only if a new vector enters
    it (one at least as similar to the node as its ``k``-th choice, see
    :func:`_entry_floors`) or a vector in it leaves (the node had an edge to a removed or
    changed one); those nodes are "affected". An edge between two unaffected nodes stands as
    it was. An edge touching an affected node exists if either end chooses the other, so the
    choices of the affected nodes and of their old neighbours are computed again: a few rows
    of ``N`` each, not ``N`` rows. When much has changed the whole computation is cheaper
    and is done instead. The edges come in no particular order; ``old_edges`` may hold
    others (another kind's SIMILAR_TO edges): those with an end outside ``old_ids`` are left
    out."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    old_matrix = np.ascontiguousarray(old_matrix, dtype=np.float32)
    if (len(ids) <= k + 1 or len(old_ids) <= k + 1 or matrix.shape[1:] != old_matrix.shape[1:]):
        return similar_edges(ids, matrix, k, threshold, block)
    position = {nid: i for i, nid in enumerate(ids)}
    if len(old_ids) == len(ids) and list(old_ids) == list(ids):  # an edit: the same rows
        common = list(ids)
        new_rows = old_rows = np.arange(len(ids), dtype=np.int64)
        same = ~(old_matrix != matrix).any(axis=1)
    else:
        old_position = {nid: i for i, nid in enumerate(old_ids)}
        common = [nid for nid in ids if nid in old_position]
        new_rows = np.array([position[nid] for nid in common], dtype=np.int64)
        old_rows = np.array([old_position[nid] for nid in common], dtype=np.int64)
        same = (~(old_matrix[old_rows] != matrix[new_rows]).any(axis=1) if common
                else np.zeros(0, dtype=bool))
    unchanged = np.zeros(len(ids), dtype=bool)
    unchanged[new_rows[same]] = True
    entering = np.nonzero(~unchanged)[0]
    leaving = [nid for nid in old_ids if nid not in position]
    changed = [common[i] for i in np.nonzero(~same)[0].tolist()]
    if len(entering) + len(leaving) + len(changed) > max(len(ids) // 8, 1):
        return similar_edges(ids, matrix, k, threshold, block)

    # The old edges as arrays of end rows, so that the passes below are numpy's, not one
    # per edge: a node of ``ids`` at its row, one only in ``old_ids`` past the end; an edge
    # with an end in neither (another kind's) is left out.
    where = dict(position)
    for nid in old_ids:
        where.setdefault(nid, len(where))
    src_all = np.fromiter(map(where.get, map(_SRC, old_edges), repeat(-1)), dtype=np.int64,
                          count=len(old_edges))
    dst_all = np.fromiter(map(where.get, map(_DST, old_edges), repeat(-1)), dtype=np.int64,
                          count=len(old_edges))
    in_old = np.zeros(len(where) + 1, dtype=bool)  # the last: an end in neither (-1)
    in_old[[where[nid] for nid in old_ids]] = True
    ours = np.nonzero(in_old[src_all] & in_old[dst_all])[0]
    src, dst = src_all[ours], dst_all[ours]
    weights = np.fromiter(map(_WEIGHT, old_edges), dtype=np.float64,
                          count=len(old_edges))[ours]

    def neighbours_of(marked: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Rows (in ``ids``) with an old edge to a node ``marked`` (a flag per end row)."""
        found = np.concatenate([dst[marked[src]], src[marked[dst]]])
        return np.unique(found[found < len(ids)])

    slack = _slack(matrix)
    affected = np.zeros(len(ids), dtype=bool)
    affected[entering] = True
    if len(entering):
        floors = _entry_floors(src, dst, weights, len(ids), k, threshold) - slack
        for start in range(0, len(entering), block):
            sims = matrix @ matrix[entering[start:start + block]].T
            affected |= (sims >= floors[:, None]).any(axis=1)
    gone = np.zeros(len(where), dtype=bool)
    gone[np.array([where[nid] for nid in (*leaving, *changed)], dtype=np.int64)] = True
    affected[neighbours_of(gone)] = True
    touched = np.zeros(len(where), dtype=bool)
    touched[:len(ids)] = affected
    recompute = affected.copy()
    recompute[neighbours_of(touched)] = True
    chosen = _choose(matrix, np.nonzero(recompute)[0].astype(np.int64), _id_ranks(ids), k,
                     threshold, block, slack)
    stays = (src < len(ids)) & (dst < len(ids)) & ~touched[src] & ~touched[dst]
    kept = [old_edges[i] for i in ours[stays].tolist()]
    return kept + _as_edges(ids, {}, chosen, set(np.nonzero(affected)[0].tolist()))


_SRC, _DST, _WEIGHT = attrgetter("src"), attrgetter("dst"), attrgetter("weight")


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


def _as_edges(ids: Sequence[str], kept: dict[tuple[str, str], float],
              chosen: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                            npt.NDArray[np.float64]],
              only: set[int] | None) -> list[Edge]:
    """``kept`` plus an edge per chosen pair (with an end in ``only``, unless None)."""
    pairs = dict(kept)
    for row, col, sim in zip(*(part.tolist() for part in chosen), strict=True):
        if only is None or row in only or col in only:
            a, b = (ids[row], ids[col]) if ids[row] < ids[col] else (ids[col], ids[row])
            pairs[(a, b)] = round(sim, 4)
    return [Edge(EdgeKind.SIMILAR_TO, a, b, w) for (a, b), w in sorted(pairs.items())]


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
    largest = float(np.max(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)))
    return float(2.0 * matrix.shape[1] * 2.0**-24 * max(largest, 1.0) + 1e-12)


def _id_ranks(ids: Sequence[str]) -> npt.NDArray[np.int64]:
    rank = np.empty(len(ids), dtype=np.int64)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    return rank


SIMILAR_VERSION = "exact-dots-1"
"""Names how :func:`similar_edges` decides (in :func:`similar_key`): edges stored by another
definition are computed again, never updated incrementally."""


def similar_key(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                threshold: float = SIMILAR_THRESHOLD) -> str:
    """What SIMILAR_TO edges over ``ids`` depend on: equal keys, equal edges."""
    hasher = hashlib.sha256(f"{SIMILAR_VERSION}\0{k}\0{threshold}\0".encode())
    hasher.update("\0".join(ids).encode("utf-8", "surrogatepass"))
    hasher.update(np.ascontiguousarray(matrix, dtype=np.float32).data.cast("B"))
    return hasher.hexdigest()[:32]


SimilarSource = Callable[[NodeKind, Sequence[str], Vectors], "list[Edge]"]
"""(kind, ids, matrix) -> the SIMILAR_TO edges of those nodes (see :func:`stored_similar`)."""


def co_used_edges(groups: Sequence[Sequence[str]],
                  extra: Mapping[tuple[str, str], float] | None = None) -> list[Edge]:
    """Skill pairs used together: once per group holding both, plus ``extra`` (run history)."""
    weights: dict[tuple[str, str], float] = {}
    for members in groups:
        for a, b in combinations(sorted(set(members)), 2):
            weights[(a, b)] = weights.get((a, b), 0.0) + 1.0
    for (x, y), weight in (extra or {}).items():
        key = (x, y) if x <= y else (y, x)
        weights[key] = weights.get(key, 0.0) + weight
    return [Edge(EdgeKind.CO_USED, a, b, float(w)) for (a, b), w in sorted(weights.items())]


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
    # Every loaded skill is a node under its own id, a shadowed same-named one too; a name (a
    # group's step, a `depends_on`, a run's step) means the skill that answers for it.
    skills = library.catalog.active
    shadowed_by = {sh.hidden.id: sh.winner.id for sh in library.catalog.shadowed}
    skill_nodes = [skill_record(s, shadowed_by.get(s.id)) for s in library.catalog.skills]
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
        edges = _edges(library, skills, skill_nodes, group_nodes, vectors, co_use, similar)
        # History may name skills that are not indexed (rejected, removed, an id that
        # changed): an edge is written only between nodes that exist.
        known = {n.id for n in nodes}
        edges = [e for e in edges if e.src in known and e.dst in known]
    return nodes, vectors, edges


def _edges(library: Library, skills: Mapping[str, Any], skill_nodes: Sequence[NodeRecord],
           group_nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
           co_use: Mapping[tuple[str, str], float] | None, similar: SimilarSource | None,
           ) -> list[Edge]:
    """The edges of :func:`build_graph`: CONTAINS and FLOWS_TO from the groups, declared
    prerequisites, SIMILAR_TO (from ``similar`` when given), CO_USED."""
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
    for kind, kind_nodes in ((NodeKind.SKILL, skill_nodes), (NodeKind.GROUP, group_nodes)):
        ids = [n.id for n in kind_nodes]
        if ids:
            matrix = np.stack([vectors[i] for i in ids])
            edges.extend(similar(kind, ids, matrix) if similar is not None
                         else similar_edges(ids, matrix))
    edges.extend(co_used_edges(memberships, co_use))
    return edges


def generation(nodes: Sequence[NodeRecord], edges: Sequence[Edge], *also: str) -> str:
    """A digest of the indexed content (and of ``also``: the model, the router), so the same
    library indexed the same way gives the same value. Edges count as a store keeps them: one
    per key, the last given (a group that uses a skill twice lists its edges twice), so the
    value can be checked against what a store holds.

    Order does not matter: the nodes' and the edges' 128-bit digests (``NodeRecord.digest``,
    ``Edge.digest``, each computed once per record) are added up, so a re-index that keeps
    most records pays a sum, not a sort and a hash of every line (0.1 s at 10k skills)."""
    mask = (1 << 128) - 1
    by_id = {node.id: node for node in nodes}
    node_sum = sum(node.digest for node in by_id.values()) & mask
    by_key = {edge.key: edge for edge in edges}
    edge_sum = sum(edge.digest for edge in by_key.values()) & mask
    hasher = hashlib.sha256(f"{GENERATION_VERSION}\0".encode())
    hasher.update("\0".join(also).encode("utf-8", "surrogatepass"))
    hasher.update(f"\0{len(by_id)}:{node_sum:x}\0{len(by_key)}:{edge_sum:x}".encode())
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
    for node in nodes:
        if node.kind is NodeKind.GROUP:
            label = node.id
        elif node.kind is NodeKind.EXAMPLE:
            label = str(node.data.get("group", ""))
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


SIMILAR_IDS_KEY = "similar_ids"
"""Metadata (one per kind): the ids, as a JSON list, that the stored SIMILAR_TO edges and
:data:`SIMILAR_KEY` were computed over, so a re-index can find the vectors they came from."""


class StoredSimilar:
    """SIMILAR_TO edges computed against what a store holds: the stored edges when the vectors
    are those they were computed from, an incremental update (:func:`updated_similar_edges`)
    when a few vectors were added, changed or removed, the whole computation otherwise.
    ``meta`` collects the entries a sync must write with the edges (:data:`SIMILAR_KEY`,
    :data:`SIMILAR_IDS_KEY` per kind).

    The stored edges are trusted only when the stored vectors of the stored ids hash to the
    stored key: the edges, vectors and key were written by one sync."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self.meta: dict[str, str] = {}
        self._edges: tuple[str, list[Edge]] | None = None

    def __call__(self, kind: NodeKind, ids: Sequence[str], matrix: Vectors) -> list[Edge]:
        key = similar_key(ids, matrix)
        self.meta[f"{SIMILAR_KEY}:{kind.value}"] = key
        self.meta[f"{SIMILAR_IDS_KEY}:{kind.value}"] = json.dumps(list(ids), ensure_ascii=False)
        stored = self._stored(kind)
        if stored is None:
            return similar_edges(ids, matrix)
        old_key, old_ids, old_matrix, old_edges = stored
        if old_key == key:
            members = set(old_ids)
            return [e for e in old_edges if e.src in members and e.dst in members]
        return updated_similar_edges(old_ids, old_matrix, old_edges, ids, matrix)

    def _stored(self, kind: NodeKind) -> tuple[str, list[str], Vectors, list[Edge]] | None:
        """(key, ids, matrix, every stored SIMILAR_TO edge, this kind's among others) of the
        kind's stored SIMILAR_TO computation, when the stored vectors match its key."""
        old_key = self.store.get_meta(f"{SIMILAR_KEY}:{kind.value}")
        listed = self.store.get_meta(f"{SIMILAR_IDS_KEY}:{kind.value}")
        if not old_key or not listed:
            return None
        try:
            old_ids = json.loads(listed)
        except ValueError:
            return None
        if not isinstance(old_ids, list) or not all(isinstance(i, str) for i in old_ids):
            return None
        old_matrix = _stored_matrix(self.store, old_ids)
        if old_matrix is None:
            return None
        if similar_key(old_ids, old_matrix) != old_key:
            return None
        return old_key, old_ids, old_matrix, self._similar_edges()

    def _similar_edges(self) -> list[Edge]:
        """The stored SIMILAR_TO edges, read once while the store's generation (a digest of
        every edge) stays the same."""
        generation = self.store.get_meta(GENERATION_KEY) or ""
        if self._edges is None or not generation or self._edges[0] != generation:
            self._edges = (generation, self.store.edges(EdgeKind.SIMILAR_TO))
        return self._edges[1]


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
                  meta: Mapping[str, str] | None = None) -> IndexResult:
    """Embed what is new, then write the graph and its metadata in one transaction.

    The slow part (embedding, fitting the router) happens first; only the write runs under
    ``write_lock``, so a server holding the matching read lock around each search keeps
    answering during a re-index and every search sees the old index or the new one. The
    generation, the router and ``meta`` (the engine's library fingerprint and paths) commit
    with the graph: a process killed at any moment leaves a graph whose metadata describes
    it, and a reader that sees a new generation sees the graph it names."""
    started = time.perf_counter()
    before = getattr(encoder, "embedded", 0)
    similar = stored_similar(store)
    nodes, vectors, edges = build_graph(library, encoder, progress, co_use, runs, similar)
    with gc_paused():
        text, fitted_on = router_text(store, nodes, vectors)
        router_digest = digest(text) if text else ""
        entries = {ROUTER_KEY: text, ROUTER_DIGEST_KEY: router_digest,
                   ROUTER_INPUT_KEY: fitted_on,
                   GENERATION_KEY: generation(nodes, edges, encoder.name, router_digest),
                   "model": encoder.name, "roots": "\n".join(str(r) for r in library.roots),
                   **similar.meta, **(meta or {})}
        with write_lock or nullcontext():
            report = store.sync(nodes, vectors, edges, entries)
    return IndexResult(report, sum(1 for n in nodes if n.kind is NodeKind.SKILL),
                       sum(1 for n in nodes if n.kind is NodeKind.GROUP),
                       getattr(encoder, "embedded", 0) - before, time.perf_counter() - started)
