"""Turning a library into the graph: nodes, embeddings (cached), and the four kinds of edges."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np

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

    Computed ``block`` rows at a time, so memory grows with ``N`` rather than ``N**2``; the
    edges are those of the whole matrix (``tests/test_scale.py`` checks against brute force).
    """
    if len(ids) < 2:
        return []
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    pairs: dict[tuple[str, str], float] = {}
    take = min(k, len(ids) - 1)
    for start in range(0, len(ids), block):
        stop = min(start + block, len(ids))
        sims = matrix[start:stop] @ matrix.T
        rows = np.arange(stop - start)
        sims[rows, rows + start] = -1.0
        top = np.argpartition(-sims, take - 1, axis=1)[:, :take]
        scores = np.take_along_axis(sims, top, axis=1)
        for row, col in zip(*np.nonzero(scores >= threshold), strict=True):
            a, b = sorted((ids[start + int(row)], ids[int(top[row, col])]))
            pairs[(a, b)] = round(float(scores[row, col]), 4)
    return [Edge(EdgeKind.SIMILAR_TO, a, b, w) for (a, b), w in sorted(pairs.items())]


def similar_key(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                threshold: float = SIMILAR_THRESHOLD) -> str:
    """What SIMILAR_TO edges over ``ids`` depend on: equal keys, equal edges."""
    hasher = hashlib.sha256(f"{k}\0{threshold}\0".encode())
    hasher.update("\0".join(ids).encode())
    hasher.update(np.ascontiguousarray(matrix, dtype=np.float32).tobytes())
    return hasher.hexdigest()[:32]


SimilarCache = Callable[[str, Sequence[str]], "list[Edge] | None"]
"""(key, ids) -> the SIMILAR_TO edges computed before for that key, or None."""


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
                similar_cache: SimilarCache | None = None,
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
    for kind_nodes in (skill_nodes, group_nodes):
        ids = [n.id for n in kind_nodes]
        if ids:
            matrix = np.stack([vectors[i] for i in ids])
            reused = similar_cache(similar_key(ids, matrix), ids) if similar_cache else None
            edges.extend(reused if reused is not None else similar_edges(ids, matrix))
    edges.extend(co_used_edges(memberships, co_use))
    # History may name skills that are not indexed (rejected, removed, an id that changed): an
    # edge is written only between nodes that exist.
    known = {n.id for n in nodes}
    edges = [e for e in edges if e.src in known and e.dst in known]
    return nodes, vectors, edges


def generation(nodes: Sequence[NodeRecord], edges: Sequence[Edge], *also: str) -> str:
    """A digest of the indexed content (and of ``also``: the model, the router), so the same
    library indexed the same way gives the same value. Edges count as a store keeps them: one
    per key, the last given (a group that uses a skill twice lists its edges twice), so the
    value can be checked against what a store holds."""
    hasher = hashlib.sha256("\0".join(also).encode())
    for node in sorted(nodes, key=lambda n: n.id):
        hasher.update(f"{node.id}\0{node.content_hash}\n".encode())
    stored = {edge.key: edge for edge in edges}
    for key in sorted(stored):
        hasher.update(("\0".join(key) + f"\0{stored[key].weight}\n").encode())
    return hasher.hexdigest()[:16]


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


def stored_similar(store: GraphStore) -> SimilarCache:
    """Re-indexing unchanged vectors reuses the stored SIMILAR_TO edges instead of the
    all-pairs pass (seconds at 10k skills, minutes at 100k)."""
    def cached(key: str, ids: Sequence[str]) -> list[Edge] | None:
        if key not in {store.get_meta(f"{SIMILAR_KEY}:{kind.value}")
                       for kind in (NodeKind.SKILL, NodeKind.GROUP)}:
            return None
        wanted = set(ids)
        return sorted((e for e in store.edges(EdgeKind.SIMILAR_TO) if e.src in wanted),
                      key=lambda e: (e.src, e.dst))
    return cached


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
    nodes, vectors, edges = build_graph(library, encoder, progress, co_use, runs,
                                        stored_similar(store))
    text, fitted_on = router_text(store, nodes, vectors)
    router_digest = digest(text) if text else ""
    entries = {ROUTER_KEY: text, ROUTER_DIGEST_KEY: router_digest, ROUTER_INPUT_KEY: fitted_on,
               GENERATION_KEY: generation(nodes, edges, encoder.name, router_digest),
               "model": encoder.name, "roots": "\n".join(str(r) for r in library.roots),
               **(meta or {})}
    for kind in (NodeKind.SKILL, NodeKind.GROUP):
        ids = [n.id for n in nodes if n.kind is kind]
        if ids:
            entries[f"{SIMILAR_KEY}:{kind.value}"] = similar_key(
                ids, np.stack([vectors[i] for i in ids]))
    with write_lock or nullcontext():
        report = store.sync(nodes, vectors, edges, entries)
    return IndexResult(report, sum(1 for n in nodes if n.kind is NodeKind.SKILL),
                       sum(1 for n in nodes if n.kind is NodeKind.GROUP),
                       getattr(encoder, "embedded", 0) - before, time.perf_counter() - started)
