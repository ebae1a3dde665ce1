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
from skillgrove.graph.embeddings import Encoder, Vectors
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


def similar_edges(ids: Sequence[str], matrix: Vectors, k: int = SIMILAR_K,
                  threshold: float = SIMILAR_THRESHOLD) -> list[Edge]:
    """Top-``k`` neighbours of each node above ``threshold``, one edge per unordered pair."""
    if len(ids) < 2:
        return []
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -1.0)
    pairs: dict[tuple[str, str], float] = {}
    take = min(k, len(ids) - 1)
    for row in range(len(ids)):
        top = np.argpartition(-sims[row], take - 1)[:take]
        for col in top:
            score = float(sims[row, col])
            if score >= threshold:
                a, b = sorted((ids[row], ids[int(col)]))
                pairs[(a, b)] = round(score, 4)
    return [Edge(EdgeKind.SIMILAR_TO, a, b, w) for (a, b), w in sorted(pairs.items())]


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


def build_graph(library: Library, encoder: Encoder, progress: Progress | None = None,
                co_use: Mapping[tuple[str, str], float] | None = None,
                runs: Sequence[Mapping[str, Any]] = (),
                ) -> tuple[list[NodeRecord], dict[str, Vectors], list[Edge]]:
    """``runs`` are run-record dicts (``graph.runlog``): their statistics feed the quality
    filter, and the skills each run used together add to CO_USED."""
    skills = library.catalog.active
    skill_nodes = [skill_record(s) for s in skills.values()]
    group_nodes = [group_record(g, skills) for g in library.groups.values()]
    if runs:
        stats = quality_from_runs(runs)
        skill_nodes = with_quality(skill_nodes, stats)
        group_nodes = with_quality(group_nodes, stats)
        ran = co_use_weights(runs_as_history(runs, {s.name: s.id for s in skills.values()}))
        co_use = {**ran, **{pair: weight + ran.get(pair, 0.0)
                            for pair, weight in (co_use or {}).items()}}
    example_nodes = [e for g in library.groups.values() for e in example_records(g)]
    nodes = skill_nodes + group_nodes + example_nodes
    vectors: dict[str, Vectors] = {}
    batch = 128
    for start in range(0, len(nodes), batch):
        chunk = nodes[start : start + batch]
        for record, vector in zip(chunk, encoder.encode([n.text for n in chunk]), strict=True):
            vectors[record.id] = vector
        if progress:
            progress("embedding", min(start + batch, len(nodes)), len(nodes))

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
            edges.extend(similar_edges(ids, np.stack([vectors[i] for i in ids])))
    edges.extend(co_used_edges(memberships, co_use))
    # History may name skills that are not indexed (shadowed by a same-named skill, rejected,
    # removed): an edge is written only between nodes that exist.
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
    if len(set(labels)) < 2:
        return None
    return GroupRouter.fit(labels, texts, np.stack(rows))


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
    nodes, vectors, edges = build_graph(library, encoder, progress, co_use, runs)
    router = fit_router(nodes, vectors)
    text = router.to_text() if router is not None else ""
    router_digest = digest(text) if text else ""
    entries = {ROUTER_KEY: text, ROUTER_DIGEST_KEY: router_digest,
               GENERATION_KEY: generation(nodes, edges, encoder.name, router_digest),
               "model": encoder.name, "roots": "\n".join(str(r) for r in library.roots),
               **(meta or {})}
    with write_lock or nullcontext():
        report = store.sync(nodes, vectors, edges, entries)
    return IndexResult(report, sum(1 for n in nodes if n.kind is NodeKind.SKILL),
                       sum(1 for n in nodes if n.kind is NodeKind.GROUP),
                       getattr(encoder, "embedded", 0) - before, time.perf_counter() - started)
