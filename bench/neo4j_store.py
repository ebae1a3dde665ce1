"""Neo4j store figures at 1k and 10k skills, against the embedded store in the same run.
Prints, asserts nothing.

    SKILLGROVE_NEO4J_URI=bolt://127.0.0.1:7687 .venv/bin/python bench/neo4j_store.py [--sizes 1000 10000]

The server's skills and groups are replaced. For each size:

* sync throughput: a full sync into an empty graph (skills per second), a sync that changes
  nothing, and one that updates 5 % of the skills;
* search latency, p50 and p95 over the sample requests (each twice): ``vector_search`` and
  ``text_search`` (k = 50, what retrieval asks for) and a whole ``Retriever.search``, both
  stores in the same run, taking turns call by call, with the ratio of their p50s (issue #15:
  at most 10x, and at most 40 ms at 10k);
* the first ``text_search`` after a sync, once per store: Neo4j reads every skill's tokens
  then (the term counts it scores BM25 on, kept until the next sync), the embedded store
  builds its BM25 from the counts it stored;
* ``Retriever.search`` on Neo4j once more with the store's read cache emptied before each
  search ("nothing kept": the records, vectors and neighbours a search needs are all read;
  the plain figure keeps what earlier searches read, as a serving process does);
* round trips per ``Retriever.search`` on Neo4j: the store's reads, each one query (counted by
  wrapping ``Neo4jStore._read``), with nothing kept and for a repeated request;
* quality: recall of the Neo4j top 50 by vector against the exact top 50, and how many requests
  get the same top-5 skills and the same group from both stores.

The 1k set is the first 1,000 skills of the corpus (``../shared/corpora/skills``) with their real
embeddings. The 10k set is synthesized: the 1,299 corpus skills plus variants of them whose text
is the original with words of another skill mixed in and whose vector is the original's real
(cached) embedding plus Gaussian noise (norm about 0.3, so a cosine of about 0.96 to it),
renormalized. Edges are the indexer's SIMILAR_TO edges over each set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skillgrove.graph import EmbeddedStore, NodeKind, Retriever
from skillgrove.graph.cypher import Statement
from skillgrove.graph.embeddings import (
    CachedEncoder,
    EmbeddingCache,
    SentenceTransformerEncoder,
    Vectors,
)
from skillgrove.graph.indexer import GENERATION_KEY, build_graph, similar_edges
from skillgrove.graph.model import Edge, NodeRecord
from skillgrove.graph.neo4j_store import Neo4jStore
from skillgrove.graph.store import GraphStore
from skillgrove.groups import load_library
from skillgrove.runtime.commands import cache_path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "skills"
NOISE = 0.3
REQUESTS = [
    "fill in a PDF form and extract its tables", "create a Word document with tracked changes",
    "build a pivot table in an Excel spreadsheet", "make a slide deck from my notes",
    "post an article to my WeChat official account", "analyze single-cell RNA-seq data",
    "search PubMed for papers on CRISPR", "write a failing test first",
    "debug a flaky bug systematically", "build an MCP server for an external API",
    "test my web app in a browser", "create an animated GIF for Slack",
    "send a message to a Slack channel", "fix the failing CI checks on my pull request",
    "download a YouTube video", "generate algorithmic art with p5.js",
    "turn a web page URL into markdown", "create a new issue in Linear",
    "plot a scientific figure with matplotlib", "schedule an event in Google Calendar",
    "发布文章到微信公众号", "把这篇文章做成知识漫画", "生成小红书图文卡片", "为文章生成封面图",
    "把网页转换成 Markdown", "压缩图片大小", "summarize a research paper",
    "convert a CSV file to JSON", "translate a document into French", "track my expenses",
]


def corpus_skills(encoder: CachedEncoder) -> tuple[list[NodeRecord], dict[str, Vectors]]:
    nodes, vectors, _ = build_graph(load_library([CORPUS]), encoder)
    return [n for n in nodes if n.kind is NodeKind.SKILL], vectors


def synthesize(skills: Sequence[NodeRecord], vectors: dict[str, Vectors], size: int,
               ) -> tuple[list[NodeRecord], dict[str, Vectors]]:
    rng = np.random.default_rng(42)
    out = list(skills[:size])
    out_vectors = {n.id: vectors[n.id] for n in out}
    variant = 0
    while len(out) < size:
        base = skills[len(out) % len(skills)]
        variant = len(out) // len(skills)
        donor = skills[int(rng.integers(len(skills)))].text.split()
        words = " ".join(rng.choice(donor, size=min(8, len(donor)), replace=False))
        record = replace(base, id=f"{base.id}-v{variant}", name=f"{base.name}-v{variant}",
                         text=f"{base.text}\nvariant {variant}: {words}",
                         content_hash=f"{base.content_hash}-v{variant}")
        noise = rng.standard_normal(len(vectors[base.id])).astype(np.float32)
        vector = vectors[base.id] + NOISE * noise / np.linalg.norm(noise)
        out_vectors[record.id] = (vector / np.linalg.norm(vector)).astype(np.float32)
        out.append(record)
    return out, out_vectors


def edges_for(nodes: Sequence[NodeRecord], vectors: dict[str, Vectors]) -> list[Edge]:
    ids = [n.id for n in nodes]
    return similar_edges(ids, np.stack([vectors[i] for i in ids]))


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000,
            ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1000)


def timed(calls: Mapping[str, Sequence[Callable[[], object]]], rounds: int = 2,
          ) -> dict[str, tuple[float, float]]:
    """p50 and p95 of each store's calls (store name -> one call per request), the stores
    taking turns call by call: on a shared machine the load then weighs on both alike."""
    for store_calls in calls.values():
        for call in store_calls[:5]:
            call()  # warm up: JIT on the server, caches here
    samples: dict[str, list[float]] = {name: [] for name in calls}
    count = min(len(c) for c in calls.values())
    for _ in range(rounds):
        for index in range(count):
            for name, store_calls in calls.items():
                started = time.perf_counter()
                store_calls[index]()
                samples[name].append(time.perf_counter() - started)
    return {name: percentiles(values) for name, values in samples.items()}


def sync_figures(store: GraphStore, nodes: list[NodeRecord], vectors: dict[str, Vectors],
                 edges: list[Edge]) -> dict[str, float]:
    # Each sync writes an index generation, as ``index_library`` does: a retriever reads it
    # before every search, and the rest of the index metadata only when it changed.
    started = time.perf_counter()
    store.sync(nodes, vectors, edges, meta={GENERATION_KEY: f"bench-{len(nodes)}-full"})
    full = time.perf_counter() - started
    started = time.perf_counter()
    report = store.sync(nodes, vectors, edges, meta={GENERATION_KEY: f"bench-{len(nodes)}-noop"})
    noop = time.perf_counter() - started
    assert not report.changed
    step = 20
    changed = [replace(n, text=n.text + " (revised)", content_hash=n.content_hash + "-r")
               if i % step == 0 else n for i, n in enumerate(nodes)]
    started = time.perf_counter()
    report = store.sync(changed, vectors, edges,
                        meta={GENERATION_KEY: f"bench-{len(nodes)}-update"})
    update = time.perf_counter() - started
    assert len(report.updated) == len(range(0, len(nodes), step))
    return {"full": full, "noop": noop, "update": update, "updated": len(report.updated)}


def round_trips(store: Neo4jStore, encoder: CachedEncoder, *, kept: bool) -> list[int]:
    """The reads (one query, one round trip each) of a ``Retriever.search`` per request: with
    the read cache emptied before each (``kept=False``), or after the same search ran once."""
    retriever = Retriever(store, encoder)
    retriever.router()
    read = store._read
    reads: list[str] = []

    def counted(statement: Statement) -> list[dict[str, Any]]:
        reads.append(statement[0])
        return read(statement)

    store._read = counted  # type: ignore[method-assign]
    try:
        counts = []
        for request in REQUESTS:
            store.clear_read_cache()
            if kept:
                retriever.search(request, k=10)
            reads.clear()
            retriever.search(request, k=10)
            counts.append(len(reads))
    finally:
        del store._read
    return counts


def first_text_search(store: GraphStore) -> float:
    """Seconds the first text search after a sync takes (what is read or built for it)."""
    started = time.perf_counter()
    store.text_search(NodeKind.SKILL, REQUESTS[0], 50)
    return time.perf_counter() - started


def search_figures(stores: Mapping[str, GraphStore], encoder: CachedEncoder,
                   ) -> dict[str, dict[str, tuple[float, float]]]:
    """Store name -> what -> (p50, p95) in ms, the stores timed in turns (see :func:`timed`)."""
    vectors = encoder.encode(REQUESTS)
    retrievers = {name: Retriever(store, encoder) for name, store in stores.items()}
    figures: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in stores}
    whats: dict[str, tuple[Callable[[str, GraphStore], list[Callable[[], object]]], int]] = {
        "vector_search": (lambda name, store: [partial(store.vector_search, NodeKind.SKILL, v,
                                                       50) for v in vectors], 2),
        "text_search": (lambda name, store: [partial(store.text_search, NodeKind.SKILL, r, 50)
                                             for r in REQUESTS], 2),
        "Retriever.search": (lambda name, store: [partial(retrievers[name].search, r, k=10)
                                                  for r in REQUESTS], 2),
        "  nothing kept": (lambda name, store: [partial(search_afresh, store, retrievers[name],
                                                        r) for r in REQUESTS], 2),
    }
    for what, (make, rounds) in whats.items():
        for name, p in timed({name: make(name, store) for name, store in stores.items()},
                             rounds).items():
            figures[name][what] = p
    return figures


def search_afresh(store: GraphStore, retriever: Retriever, request: str) -> object:
    """A search with the Neo4j store's read cache emptied first (as if no search had read any
    of its records before); on the embedded store, a plain search."""
    if isinstance(store, Neo4jStore):
        store.clear_read_cache()
    return retriever.search(request, k=10)


def quality(neo4j: Neo4jStore, embedded: EmbeddedStore,
            encoder: CachedEncoder) -> tuple[float, int]:
    vectors = encoder.encode(REQUESTS)
    recalls = []
    for vector in vectors:
        exact = {i for i, _ in embedded.vector_search(NodeKind.SKILL, vector, 50)}
        found = {i for i, _ in neo4j.vector_search(NodeKind.SKILL, vector, 50)}
        recalls.append(len(exact & found) / len(exact))
    same = 0
    for request in REQUESTS:
        toolboxes = [Retriever(s, encoder).search(request, k=5) for s in (neo4j, embedded)]
        tops = [({s.id for s in t.skills}, t.group.id if t.group else None) for t in toolboxes]
        same += tops[0] == tops[1]
    return statistics.mean(recalls), same


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000],
                        help="library sizes to measure, in skills (default: 1000 10000)")
    args = parser.parse_args(argv)
    if any(size <= 0 for size in args.sizes):
        parser.error("--sizes must be positive")
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    encoder = CachedEncoder(SentenceTransformerEncoder(), EmbeddingCache(cache_path()))
    skills, vectors = corpus_skills(encoder)
    encoder.encode(REQUESTS)
    neo4j = Neo4jStore.from_environment()
    print(f"Neo4j {neo4j.server_version} at {neo4j.uri}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"1k = the first 1,000 corpus skills (real embeddings); 10k = the {len(skills):,} "
          f"corpus skills + synthesized variants (text mixed with another skill's words; "
          f"vector = real cached embedding + noise of norm {NOISE}, renormalized)\n")
    rows = []
    try:
        for size in args.sizes:
            nodes, node_vectors = synthesize(skills, vectors, size)
            edges = edges_for(nodes, node_vectors)
            neo4j.clear()
            with tempfile.TemporaryDirectory() as tmp:
                embedded = EmbeddedStore(Path(tmp) / "graph.sqlite")
                syncs = {"neo4j": sync_figures(neo4j, nodes, node_vectors, edges),
                         "embedded": sync_figures(embedded, nodes, node_vectors, edges)}
                for name, store in (("neo4j", neo4j), ("embedded", embedded)):
                    syncs[name]["first_text"] = first_text_search(store)
                searches = search_figures({"neo4j": neo4j, "embedded": embedded}, encoder)
                recall, same = quality(neo4j, embedded, encoder)
                trips = (round_trips(neo4j, encoder, kept=False),
                         round_trips(neo4j, encoder, kept=True))
                embedded.close()
            rows.append((size, len(edges), syncs, searches, recall, same, trips))
    finally:
        neo4j.close()

    for size, edge_count, syncs, searches, recall, same, trips in rows:
        print(f"== {size:,} skills, {edge_count:,} SIMILAR_TO edges")
        for name in ("neo4j", "embedded"):
            s = syncs[name]
            print(f"  {name:<9} sync {size / s['full']:7.0f} skills/s ({s['full']:.1f} s full), "
                  f"unchanged {s['noop']:.2f} s, {s['updated']} updated {s['update']:.2f} s")
        ratio = syncs["neo4j"]["full"] / syncs["embedded"]["full"]
        print(f"  full sync: neo4j takes {ratio:.1f}x the embedded store's time")
        print(f"  first text_search after a sync: neo4j {syncs['neo4j']['first_text'] * 1000:.0f}"
              f" ms (reads the term counts), embedded "
              f"{syncs['embedded']['first_text'] * 1000:.0f} ms (builds its BM25)")
        print(f"  {'latency, ms':<18}{'neo4j p50':>10}{'p95':>8}{'embedded p50':>14}{'p95':>8}"
              f"{'p50 ratio':>11}")
        for what in ("vector_search", "text_search", "Retriever.search", "  nothing kept"):
            n50, n95 = searches["neo4j"][what]
            e50, e95 = searches["embedded"][what]
            print(f"  {what:<18}{n50:10.1f}{n95:8.1f}{e50:14.2f}{e95:8.2f}{n50 / e50:10.1f}x")
        for label, counts in zip(("nothing kept", "repeated"), trips, strict=True):
            print(f"  round trips per Retriever.search on neo4j, {label}: median "
                  f"{statistics.median(counts):g}, max {max(counts)}, "
                  f"mean {statistics.mean(counts):.1f}")
        print(f"  vector recall@50 (neo4j vs exact): {recall:.3f}; same top-5 skills and group "
              f"from Retriever: {same}/{len(REQUESTS)}\n")


if __name__ == "__main__":
    main()
