"""The embedded store and indexing at 1k, 10k and 100k skills. Prints figures, asserts nothing.

    .venv/bin/python bench/scale.py                      # 1k and 10k, 256 texts encoded
    .venv/bin/python bench/scale.py --sizes 100000       # the 100k run (minutes)
    .venv/bin/python bench/scale.py --sizes 1000 --encode 64 --clients 4   # a quick look

Libraries are synthesized as in ``bench/neo4j_store.py``: the 1,299 corpus skills
(``../shared/corpora/skills``) with their real embeddings (from the embedding cache, computed
once by the real encoder), plus variants whose text mixes in another skill's words and whose
vector is the original's plus Gaussian noise of norm 0.3, renormalized. No encoder runs for
these vectors: they go straight into the build step (``similar_edges``, ``fit_router``,
``EmbeddedStore.sync``), which is what indexing does after embedding. Groups are 10 % as many
as skills: each holds 2-4 random skills, its text their descriptions, its vector the normalized
mean of theirs. Requests are embedded by the real encoder (ONNX, one thread as in search).

Encoder throughput is measured on real corpus texts with the real encoder in the same run:
the raw encoder on all texts at once, the indexing path (``embed_nodes`` through a fresh
cache), and the old path (chunks of 128 in library order, unsorted) for reference.

Each size runs in its own process; opening the store and its first search are timed in a
further new process. Memory per skill is resident memory (``VmRSS``, sampled every 5 ms) over
what the process held once the synthesized library was in memory: at the peak of indexing
(edges, router, sync), held after it, and what a new process grows by to open the store and
answer two searches. (``ru_maxrss``, the process's peak, was already set by loading the corpus
and the model, so the old figure read 0.)

"One edited skill" re-indexes after changing one skill's text and vector, five times (a
different skill each time): the median and the CPU time are printed, since the machine may be
shared; at up to 20k skills the incrementally updated SIMILAR_TO edges are compared with a
full pass. Re-indexing runs with the cyclic garbage collector paused, as ``index_library`` runs
everything after the encoder (``graph.indexer.gc_paused``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from neo4j_store import REQUESTS, synthesize

from skillgrove.graph import EmbeddedStore, NodeKind, Retriever
from skillgrove.graph.embedded import _KindIndex
from skillgrove.graph.embeddings import (
    CachedEncoder,
    EmbeddingCache,
    Vectors,
    default_encoder,
)
from skillgrove.graph.indexer import (
    GENERATION_KEY,
    ROUTER_INPUT_KEY,
    SIMILAR_IDS_KEY,
    SIMILAR_KEY,
    embed_nodes,
    fit_router,
    gc_paused,
    generation,
    generation_with,
    router_input,
    router_text,
    similar_edges,
    similar_key,
    stacked,
    stored_similar,
    text_digest,
)
from skillgrove.graph.model import Edge, EdgeKind, NodeRecord
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY
from skillgrove.graph.store import GraphStore
from skillgrove.groups import load_library
from skillgrove.runtime.commands import cache_path
from skillgrove.runtime.engine import cache_dir

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "skills"


def rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_now_mb() -> float:
    """Resident memory now (``ru_maxrss`` only ever grows: loading the corpus and the model
    already set it higher than indexing reaches, which made the old bytes/skill 0)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return rss_peak_mb()


class RssPeak:
    """The highest resident memory seen while the block runs (sampled every 5 ms)."""

    def __enter__(self) -> RssPeak:
        self.peak = rss_now_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_now_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_now_mb())


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def corpus(encoder: CachedEncoder) -> tuple[list[NodeRecord], dict[str, Vectors]]:
    from skillgrove.graph.indexer import build_graph

    nodes, vectors, _ = build_graph(load_library([CORPUS]), encoder)
    return [n for n in nodes if n.kind is NodeKind.SKILL], vectors


def groups_for(skills: Sequence[NodeRecord], vectors: dict[str, Vectors], count: int,
               ) -> tuple[list[NodeRecord], dict[str, Vectors], list[Edge]]:
    rng = np.random.default_rng(7)
    nodes: list[NodeRecord] = []
    out: dict[str, Vectors] = {}
    edges: list[Edge] = []
    for g in range(count):
        members = [skills[int(i)] for i in rng.choice(len(skills), int(rng.integers(2, 5)),
                                                      replace=False)]
        gid = f"group:synthetic-{g}"
        data = {"description": f"synthetic group {g}", "examples": [],
                "members": [m.id for m in members], "member_names": [m.name for m in members],
                "steps": [{"id": f"s{i}", "target": m.name, "kind": "skill", "needs": [],
                           "conditional": False} for i, m in enumerate(members)],
                "edges": [], "inputs": [], "subgroups": [], "expose": []}
        text = f"synthetic group {g}\nsteps: " + " ; ".join(
            m.text.split("\n")[1] if "\n" in m.text else m.text for m in members)
        nodes.append(NodeRecord(gid, NodeKind.GROUP, f"synthetic-{g}", text, f"g{g}", data))
        mean = np.mean([vectors[m.id] for m in members], axis=0)
        out[gid] = (mean / np.linalg.norm(mean)).astype(np.float32)
        edges.extend(Edge(EdgeKind.CONTAINS, gid, m.id, 1.0, {"step": f"s{i}", "order": i})
                     for i, m in enumerate(members))
    return nodes, out, edges


def build(skills: list[NodeRecord], vectors: dict[str, Vectors],
          groups: list[NodeRecord], contains: list[Edge], store: GraphStore | None = None,
          ) -> tuple[list[NodeRecord], list[Edge], dict[str, str]]:
    """What ``index_library`` does after embedding: SIMILAR_TO in blocks, the router, meta;
    with ``store``, reusing its SIMILAR_TO edges and router where their inputs are unchanged,
    as ``index_library`` does."""
    edges = list(contains)
    meta: dict[str, str] = {}
    similar = stored_similar(store) if store is not None else None
    for kind, kind_nodes in ((NodeKind.SKILL, skills), (NodeKind.GROUP, groups)):
        ids = [n.id for n in kind_nodes]
        matrix = stacked([vectors[i] for i in ids])
        if similar is not None:
            edges.extend(similar(kind, ids, matrix))
        else:
            meta[f"{SIMILAR_KEY}:{kind.value}"] = similar_key(ids, matrix)
            meta[f"{SIMILAR_IDS_KEY}:{kind.value}"] = json.dumps(ids, ensure_ascii=False)
            edges.extend(similar_edges(ids, matrix))
    if similar is not None:
        meta.update(similar.meta)
    nodes = skills + groups
    if store is not None:
        text, fitted_on = router_text(store, nodes, vectors)
    else:
        router = fit_router(nodes, vectors)
        text, fitted_on = (router.to_text() if router is not None else ""), router_input(
            nodes, vectors)
    meta.update({ROUTER_KEY: text, ROUTER_DIGEST_KEY: text_digest(text),
                 ROUTER_INPUT_KEY: fitted_on,
                 GENERATION_KEY: (generation_with(nodes, contains, similar, "bench")
                                  if similar is not None else generation(nodes, edges, "bench"))})
    return nodes, edges, meta


def searches(retriever: Retriever, requests: Sequence[str], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        for request in requests:
            started = time.perf_counter()
            retriever.search(request, k=10)
            samples.append(time.perf_counter() - started)
    return samples


def concurrent(retriever: Retriever, requests: Sequence[str], clients: int, per_client: int,
               ) -> tuple[float, float, float, int]:
    latencies: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(seed: int) -> None:
        for i in range(per_client):
            request = f"{requests[(seed + i) % len(requests)]} {seed}-{i}"  # new to the cache
            started = time.perf_counter()
            try:
                retriever.search(request, k=10)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                continue
            with lock:
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return len(latencies) / wall, pct(latencies, 0.5), pct(latencies, 0.95), len(errors)


def recall_at_10(index: _KindIndex, queries: Vectors) -> float:
    hits = []
    for q in queries:
        exact = {i for i, _ in index.vector_top(q, 10, exact=True)}
        fast = {i for i, _ in index.vector_top(q, 10)}
        hits.append(len(exact & fast) / 10)
    return statistics.mean(hits)


def one_size(size: int, clients: int, store_path: Path) -> dict[str, object]:
    encoder = CachedEncoder(default_encoder(None, cache_dir()), EmbeddingCache(cache_path()))
    real, real_vectors = corpus(encoder)
    skills, vectors = synthesize(real, real_vectors, size)
    groups, group_vectors, contains = groups_for(skills, vectors, max(2, size // 10))
    vectors.update(group_vectors)
    before = rss_now_mb()

    with RssPeak() as during:
        started = time.perf_counter()
        nodes, edges, meta = build(skills, vectors, groups, contains)
        build_s = time.perf_counter() - started
        store = EmbeddedStore(store_path)
        started = time.perf_counter()
        store.sync(nodes, vectors, edges, meta)
        sync_s = time.perf_counter() - started
    peak = during.peak
    held = rss_now_mb()

    started, cpu = time.perf_counter(), time.process_time()
    with gc_paused():  # as index_library runs what follows the encoder
        _, edges2, meta2 = build(skills, vectors, groups, contains, store)
        report = store.sync(nodes, vectors, edges2, meta2)
    reindex_s, reindex_cpu = time.perf_counter() - started, time.process_time() - cpu
    assert not report.changed

    # One edited skill, five times over (a different skill each time, on top of the last):
    # each re-index finds one changed text and vector.
    edited_skills, edited_vectors = list(skills), dict(vectors)
    edit_wall, edit_cpu = [], []
    for turn in range(5):
        at = turn * (len(skills) // 5)
        edited = replace(skills[at], text=skills[at].text + " (edited)",
                         content_hash=skills[at].content_hash + "-e")
        bumped = vectors[skills[at].id] + 0.01
        edited_vectors[edited.id] = (bumped / np.linalg.norm(bumped)).astype(np.float32)
        edited_skills[at] = edited
        started, cpu = time.perf_counter(), time.process_time()
        with gc_paused():
            nodes3, edges3, meta3 = build(edited_skills, edited_vectors, groups, contains,
                                          store)
            report = store.sync(nodes3, edited_vectors, edges3, meta3)
        edit_wall.append(time.perf_counter() - started)
        edit_cpu.append(time.process_time() - cpu)
        assert report.updated == (edited.id,), report
    if size <= 20_000:  # the whole computation again, to compare (minutes at 100k)
        check = similar_edges([n.id for n in edited_skills],
                              np.stack([edited_vectors[n.id] for n in edited_skills]))
        assert {(e.src, e.dst, e.weight) for e in check} == {
            (e.src, e.dst, e.weight) for e in store.edges(EdgeKind.SIMILAR_TO)
            if not e.src.startswith("group:")}, "incremental SIMILAR_TO differs from a full pass"
    edit_s, edit_cpu_s = statistics.median(edit_wall), statistics.median(edit_cpu)
    started = time.perf_counter()
    store.sync(nodes3, edited_vectors, edges3, meta3)  # what the edit leaves: a no-op sync
    edit_sync_noop = time.perf_counter() - started
    store.sync(nodes, vectors, edges, meta)  # back to the measured library

    retriever = Retriever(store, encoder)
    encoder.encode(REQUESTS)  # request vectors in memory: search p50 below includes the lookup
    retriever.search("warm up")
    warm = searches(retriever, REQUESTS, 3)
    # Query embedding included: requests the encoder has not seen.
    fresh = searches(retriever, [f"{r} please" for r in REQUESTS], 1)
    index = store._index(NodeKind.SKILL)
    queries = encoder.encode(REQUESTS)
    t0 = time.perf_counter()
    for q in queries:
        index.vector_top(q, 50, exact=True)
    exact_ms = (time.perf_counter() - t0) / len(queries) * 1000
    t0 = time.perf_counter()
    for q in queries:
        index.vector_top(q, 10)
    fast_ms = (time.perf_counter() - t0) / len(queries) * 1000
    recall = recall_at_10(index, queries)
    rng = np.random.default_rng(3)
    perturbed = queries + 0.5 * rng.standard_normal(queries.shape).astype(np.float32) / 20
    perturbed /= np.linalg.norm(perturbed, axis=1, keepdims=True)
    recall_more = recall_at_10(index, np.asarray(perturbed, dtype=np.float32))
    throughput, c50, c95, errors = concurrent(retriever, REQUESTS, clients, 6)
    store.close()
    return {"size": size, "groups": len(groups), "edges": len(edges), "build_s": build_s,
            "sync_s": sync_s, "peak_mb": peak, "base_mb": before, "held_mb": held,
            "process_peak_mb": rss_peak_mb(), "reindex_s": reindex_s,
            "edit_s": edit_s, "edit_noop_s": edit_sync_noop, "reindex_cpu": reindex_cpu,
            "edit_cpu": edit_cpu_s, "edit_min": min(edit_wall),
            "warm_p50": pct(warm, 0.5), "warm_p95": pct(warm, 0.95),
            "fresh_p50": pct(fresh, 0.5), "fresh_p95": pct(fresh, 0.95),
            "exact_ms": exact_ms, "fast_ms": fast_ms, "recall": recall,
            "recall_perturbed": recall_more, "file_mb": store_path.stat().st_size / 2**20,
            "clients": clients, "throughput": throughput, "c50": c50, "c95": c95,
            "errors": errors}


def reopen(store_path: Path) -> dict[str, object]:
    started = time.perf_counter()
    encoder = CachedEncoder(default_encoder(None, cache_dir()), EmbeddingCache(cache_path()))
    encoder.encode(["load the model first"])  # the model's load is not the store's
    model_s = time.perf_counter() - started
    before = rss_now_mb()
    started = time.perf_counter()
    store = EmbeddedStore(store_path)
    open_s = time.perf_counter() - started
    retriever = Retriever(store, encoder)
    started = time.perf_counter()
    retriever.search(REQUESTS[0], k=10)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever.search(REQUESTS[1], k=10)
    second_s = time.perf_counter() - started
    return {"model_s": model_s, "open_s": open_s, "first_s": first_s, "second_s": second_s,
            "rss_mb": rss_peak_mb(), "serving_mb": rss_now_mb() - before}


def encoder_figures(count: int) -> dict[str, float]:
    library = load_library([CORPUS])
    from skillgrove.graph.documents import skill_record

    records = [skill_record(s) for s in library.catalog.active.values()][:count]
    texts = [r.text for r in records]
    raw = default_encoder(None, cache_dir())
    raw.encode(["warm up"])
    bulk = getattr(raw, "bulk", None)
    assert bulk is not None
    with bulk():
        started = time.perf_counter()
        raw.encode(texts)
        raw_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        cached = CachedEncoder(raw, EmbeddingCache(Path(tmp) / "e.sqlite"))
        started = time.perf_counter()
        embed_nodes(records, cached)
        index_s = time.perf_counter() - started
    unsorted_s = _unsorted(raw, texts)
    return {"texts": len(texts), "raw": len(texts) / raw_s, "index": len(texts) / index_s,
            "unsorted_one_thread": len(texts) / unsorted_s}


def _unsorted(encoder: object, texts: Sequence[str]) -> float:
    """The old path: batches of 64 in library order, each padded to its longest text, on the
    search session's threads."""
    session, tokenizer = encoder._load()  # type: ignore[attr-defined]
    started = time.perf_counter()
    for start in range(0, len(texts), 64):
        batch = tokenizer.encode_batch(list(texts[start : start + 64]))
        width = max(len(e.ids) for e in batch)
        ids = np.array([e.ids + [0] * (width - len(e.ids)) for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask + [0] * (width - len(e.ids)) for e in batch],
                        dtype=np.int64)
        session.run(None, {"input_ids": ids, "attention_mask": mask,
                           "token_type_ids": np.zeros_like(ids)})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--encode", type=int, default=256, help="real texts to encode (0: skip)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--child", choices=["size", "reopen"])
    parser.add_argument("--store")
    args = parser.parse_args()
    if args.child == "size":
        print(json.dumps(one_size(int(args.sizes), args.clients, Path(args.store))))
        return
    if args.child == "reopen":
        print(json.dumps(reopen(Path(args.store))))
        return
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; synthesized "
          "libraries (corpus skills + noisy variants, real cached vectors fed to the build "
          "step, no encoder), 10 % as many groups")
    if args.encode:
        e = encoder_figures(args.encode)
        print(f"\n== encoder, {e['texts']:.0f} real corpus texts, same run")
        print(f"  raw encoder (bulk threads)  {e['raw']:6.1f} texts/s")
        print(f"  indexing path (embed_nodes) {e['index']:6.1f} texts/s = "
              f"{e['index'] / e['raw']:.0%} of raw")
        print(f"  old path (unsorted batches of 64, search threads) "
              f"{e['unsorted_one_thread']:6.1f} texts/s = "
              f"{e['unsorted_one_thread'] / e['raw']:.0%} of raw")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "graph.sqlite"
            run = [sys.executable, __file__, "--sizes", str(size), "--clients",
                   str(args.clients), "--store", str(path)]
            r = json.loads(subprocess.run([*run, "--child", "size"], check=True,
                                          capture_output=True, text=True).stdout)
            o = json.loads(subprocess.run([*run, "--child", "reopen"], check=True,
                                          capture_output=True, text=True).stdout)
        grown = (r["peak_mb"] - r["base_mb"]) * 2**20
        held = (r["held_mb"] - r["base_mb"]) * 2**20
        print(f"\n== {size:,} skills, {r['groups']:,} groups, {r['edges']:,} edges")
        print(f"  index (edges in blocks + router + sync): {r['build_s'] + r['sync_s']:.1f} s "
              f"({r['build_s']:.1f} build, {r['sync_s']:.1f} sync); peak RSS while indexing "
              f"{r['peak_mb'] / 1024:.2f} GiB ({r['process_peak_mb'] / 1024:.2f} GiB for the "
              f"whole process, corpus and model included); file {r['file_mb']:.0f} MiB")
        print(f"  memory per skill (RSS over the synthesized library already in memory): "
              f"{grown / size:,.0f} bytes/skill at the peak of indexing, {held / size:,.0f} "
              f"bytes/skill held after it; a new process serving searches "
              f"{o['serving_mb'] * 2**20 / size:,.0f} bytes/skill")
        print(f"  re-index unchanged {r['reindex_s']:.2f} s ({r['reindex_cpu']:.2f} s CPU); "
              f"one edited skill {r['edit_s'] * 1000:.0f} ms median of 5 (min "
              f"{r['edit_min'] * 1000:.0f} ms, {r['edit_cpu'] * 1000:.0f} ms CPU; SIMILAR_TO "
              f"checked against a full pass up to 20k), then a no-op sync {r['edit_noop_s']:.2f} s")
        print(f"  search p50/p95: {r['warm_p50']:.1f}/{r['warm_p95']:.1f} ms with the "
              f"request vector in memory, {r['fresh_p50']:.1f}/{r['fresh_p95']:.1f} ms "
              "embedding the request")
        print(f"  skill vector search: exact scan {r['exact_ms']:.2f} ms, search path "
              f"{r['fast_ms']:.2f} ms, recall@10 {r['recall']:.3f} on the requests, "
              f"{r['recall_perturbed']:.3f} on perturbed requests")
        print(f"  {r['clients']} concurrent clients (threads, one process): "
              f"{r['throughput']:.0f} searches/s, p50 {r['c50']:.0f} ms, p95 {r['c95']:.0f} ms, "
              f"{r['errors']} errors")
        print(f"  new process: open {o['open_s']:.2f} s, first search {o['first_s']:.2f} s, "
              f"second {o['second_s'] * 1000:.0f} ms (model load {o['model_s']:.1f} s not "
              f"counted); peak RSS {o['rss_mb'] / 1024:.2f} GiB")


if __name__ == "__main__":
    main()
