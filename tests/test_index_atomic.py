"""The index's metadata (generation, router, library fingerprint, ...) commits with the graph.

Before, the sync committed and the metadata followed in separate writes: a process killed in
between left the new graph described by the old generation and router, and readers trusted
them until the next index. Now both are one transaction in either store. Shown three ways: the
indexer hands the metadata to ``sync`` and writes nothing else; a sync whose metadata write
fails leaves the graph as it was; and a real process, indexing two libraries in turn, is killed
with SIGKILL at random moments, after which the stored generation always names the stored graph
(and a reader that stayed open all along sees what a fresh one sees).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.errors import StoreError
from skillgrove.graph.indexer import GENERATION_KEY, generation, index_library
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.retrieval import Retriever
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, digest
from skillgrove.graph.store import GraphStore
from skillgrove.groups.library import Library, load_library
from skillgrove.runtime.paths import bundled_library

REPO = Path(__file__).resolve().parent.parent
STORES = ["embedded", pytest.param("neo4j", marks=pytest.mark.neo4j)]


class HashEncoder:
    """Deterministic unit vectors from a text's digest: fast, and the same in every process."""

    name = "hash-test-encoder"
    dimensions = 64

    def encode(self, texts: Sequence[str]) -> Vectors:
        rows = [np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8],
                                                     "little")).standard_normal(self.dimensions)
                for t in texts]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def two_libraries(root: Path) -> tuple[Path, Path]:
    """The bundled library, and a copy with five skills and two groups fewer."""
    first = root / "a"
    shutil.copytree(bundled_library(), first)
    second = root / "b"
    shutil.copytree(bundled_library(), second)
    for skill in sorted((second / "skills").iterdir())[:5]:
        shutil.rmtree(skill)
    for group in sorted((second / "groups").glob("*.yaml"))[:2]:
        group.unlink()
    return first, second


def open_store(kind: str, where: Path) -> GraphStore:
    if kind == "embedded":
        return EmbeddedStore(where / "graph.sqlite")
    from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
    from tests.conftest import NEO4J_URI

    return Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))


def assert_metadata_describes_the_graph(store: GraphStore, names: Mapping[str, set[str]],
                                        ) -> str:
    """The stored generation is the one of the stored nodes and edges, the router the one its
    digest names, the library label the one whose skills are there; returns the label."""
    model, router, router_digest = (store.get_meta("model"), store.get_meta(ROUTER_KEY),
                                    store.get_meta(ROUTER_DIGEST_KEY))
    assert model and router and router_digest
    assert digest(router) == router_digest
    assert store.get_meta(GENERATION_KEY) == generation(store.nodes(), store.edges(), model,
                                                        router_digest)
    label = store.get_meta("library") or ""
    assert {n.name for n in store.nodes(NodeKind.SKILL)} == names[label]
    return label


# -- the indexer writes the metadata through sync ---------------------------------------------

class RecordingStore:
    """An EmbeddedStore that records how it was written to."""

    def __init__(self) -> None:
        self.inner = EmbeddedStore(None)
        self.calls: list[tuple[str, Any]] = []

    def sync(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
             edges: Sequence[Edge], meta: Mapping[str, str] | None = None) -> SyncReport:
        self.calls.append(("sync", dict(meta or {})))
        return self.inner.sync(nodes, vectors, edges, meta)

    def set_meta(self, key: str, value: str) -> None:
        self.calls.append(("set_meta", key))
        self.inner.set_meta(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_indexer_hands_all_metadata_to_one_sync() -> None:
    library = load_library([bundled_library()])
    store = RecordingStore()
    index_library(library, store, HashEncoder(), meta={"library_fingerprint": "f1"})

    assert [call for call, _ in store.calls] == ["sync"]
    meta = store.calls[0][1]
    assert {GENERATION_KEY, ROUTER_KEY, ROUTER_DIGEST_KEY, "model", "roots",
            "library_fingerprint"} <= set(meta)
    assert assert_metadata_describes_the_graph(
        store.inner, {"": {s.name for s in library.catalog.active.values()}}) == ""


# -- a failing metadata write takes the graph down with it ------------------------------------

def _vector(seed: int) -> Vectors:
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return vector / np.linalg.norm(vector)


def _skill(number: int) -> NodeRecord:
    return NodeRecord(f"sk-{number}", NodeKind.SKILL, f"skill-{number}",
                      f"skill number {number}", f"hash-{number}", {})


@pytest.fixture(params=STORES)
def store_with_failing_meta(request: pytest.FixtureRequest, tmp_path: Path,
                            ) -> Iterator[GraphStore]:
    """A store on which writing two meta entries with the value ``clash`` fails inside the
    sync's transaction: an SQLite trigger, or a Neo4j uniqueness constraint on the value."""
    if request.param == "embedded":
        store = EmbeddedStore(tmp_path / "graph.sqlite")
        store._db.execute(
            "CREATE TRIGGER refuse_clash BEFORE INSERT ON meta WHEN NEW.value = 'clash' AND "
            "EXISTS (SELECT 1 FROM meta WHERE value = 'clash' AND key != NEW.key) "
            "BEGIN SELECT RAISE(ABORT, 'meta value clash'); END")
        store._db.commit()
        try:
            yield store
        finally:
            store.close()
        return
    from tests.neo4j.support import driver, fresh_store

    neo4j = fresh_store()
    with driver() as drv:
        drv.execute_query("CREATE CONSTRAINT test_meta_value IF NOT EXISTS "
                          "FOR (m:SkillgroveMeta) REQUIRE m.value IS UNIQUE")
        try:
            yield neo4j
        finally:
            drv.execute_query("DROP CONSTRAINT test_meta_value IF EXISTS")
            neo4j.close()


def test_a_sync_whose_metadata_cannot_be_written_changes_nothing(
        store_with_failing_meta: GraphStore) -> None:
    store = store_with_failing_meta
    old = [_skill(i) for i in range(4)]
    vectors = {n.id: _vector(i) for i, n in enumerate([_skill(i) for i in range(8)])}
    store.sync(old, vectors, [Edge(EdgeKind.CO_USED, "sk-0", "sk-1", 1.0)],
               {GENERATION_KEY: "g-old", "library": "old"})
    assert (store.get_meta(GENERATION_KEY), store.get_meta("library")) == ("g-old", "old")

    new = [_skill(i) for i in range(2, 8)]
    with pytest.raises(StoreError, match="previous"):
        store.sync(new, vectors, [Edge(EdgeKind.CO_USED, "sk-5", "sk-6", 1.0)],
                   {GENERATION_KEY: "g-new", "a": "clash", "b": "clash"})

    assert sorted(n.id for n in store.nodes()) == ["sk-0", "sk-1", "sk-2", "sk-3"]
    assert [(e.src, e.dst) for e in store.edges()] == [("sk-0", "sk-1")]
    assert (store.get_meta(GENERATION_KEY), store.get_meta("library")) == ("g-old", "old")
    assert store.get_meta("a") is None


# -- a store kept open sees what another connection wrote ------------------------------------

def test_an_open_embedded_store_follows_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    vectors = {f"sk-{i}": _vector(i) for i in range(8)}
    writer = EmbeddedStore(path)
    writer.sync([_skill(i) for i in range(3)], vectors, [], {GENERATION_KEY: "g1"})
    server = EmbeddedStore(path)  # another process's view, open all along
    assert (server.get_meta(GENERATION_KEY), len(server.nodes())) == ("g1", 3)

    writer.sync([_skill(i) for i in range(2, 6)], vectors, [], {GENERATION_KEY: "g2"})
    assert server.get_meta(GENERATION_KEY) == "g2"
    assert sorted(n.id for n in server.nodes()) == ["sk-2", "sk-3", "sk-4", "sk-5"]
    assert server.vector_search(NodeKind.SKILL, vectors["sk-5"], 1)[0][0] == "sk-5"

    # A sync starts from what is on disk, not from what this store last read.
    writer.sync([_skill(7)], vectors, [], {GENERATION_KEY: "g3"})
    report = server.sync([_skill(0), _skill(1)], vectors, [], {GENERATION_KEY: "g4"})
    assert (report.added, report.removed) == (("sk-0", "sk-1"), ("sk-7",))
    fresh = EmbeddedStore(path)
    assert sorted(n.id for n in fresh.nodes()) == ["sk-0", "sk-1"]
    assert writer.get_meta(GENERATION_KEY) == fresh.get_meta(GENERATION_KEY) == "g4"
    for store in (writer, server, fresh):
        store.close()


# -- kill -9 at random moments ----------------------------------------------------------------
#
# A helper process imports everything and reads the libraries once, then forks one indexing
# process per round; the test kills that process with SIGKILL. (Starting a fresh interpreter
# for each of the kills would take most of the test's time.)

class AnnouncingStore:
    """A store that says on stdout when a sync starts and how long it took."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner

    def sync(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
             edges: Sequence[Edge], meta: Mapping[str, str] | None = None) -> SyncReport:
        print("sync", flush=True)
        began = time.perf_counter()
        report = self.inner.sync(nodes, vectors, edges, meta)
        print(f"synced {time.perf_counter() - began:.4f}", flush=True)
        return report

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _indexer_process(kind: str, where: str, libraries_file: str) -> None:
    """Runs in a subprocess: for each line on stdin, forks a process that indexes the two
    libraries in turn, forever, starting with the one not in the store."""
    import pickle
    import traceback

    libraries: dict[str, Library] = pickle.loads(Path(libraries_file).read_bytes())
    encoder = HashEncoder()
    print("started", flush=True)
    while sys.stdin.readline():
        pid = os.fork()
        if pid == 0:
            try:
                store: Any = AnnouncingStore(open_store(kind, Path(where)))
                label = "b" if store.get_meta("library") == "a" else "a"
                print(f"ready {os.getpid()}", flush=True)
                while True:
                    began = time.perf_counter()
                    index_library(libraries[label], store, encoder, meta={"library": label})
                    print(f"indexed {label} {time.perf_counter() - began:.4f}", flush=True)
                    label = "b" if label == "a" else "a"
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        print("reaped", flush=True)


def _skill_names(library: Library) -> set[str]:
    return {s.name for s in library.catalog.active.values()}


def _read_until(stream: Any, prefix: str) -> list[str]:
    """Lines of the helper's output up to the first that starts with ``prefix``."""
    lines = []
    while True:
        line = stream.readline()
        lines.append(line)
        assert line and (prefix == "reaped" or not line.startswith("reaped")), (
            "the indexing process ended early: " + "".join(lines))
        if line.startswith(prefix):
            return lines


@pytest.mark.parametrize(("kind", "kills"), [
    ("embedded", 14), pytest.param("neo4j", 8, marks=pytest.mark.neo4j)])
def test_a_process_killed_at_any_moment_leaves_metadata_that_matches(
        kind: str, kills: int, tmp_path: Path) -> None:
    import pickle

    first, second = two_libraries(tmp_path)
    libraries = {"a": load_library([first]), "b": load_library([second])}
    names = {label: _skill_names(lib) for label, lib in libraries.items()}
    assert names["a"] != names["b"]
    (tmp_path / "libraries.pickle").write_bytes(pickle.dumps(libraries))
    if kind == "neo4j":
        from tests.neo4j.support import clear_database

        clear_database()
    seed = open_store(kind, tmp_path)
    index_library(libraries["a"], seed, HashEncoder(), meta={"library": "a"})
    seed.close()

    reader = open_store(kind, tmp_path)  # open all along, as a server's store is
    retriever = Retriever(reader, HashEncoder())
    rng = random.Random(14)
    helper = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tests.test_index_atomic import "
         "_indexer_process; _indexer_process(*sys.argv[1:])", kind, str(tmp_path),
         str(tmp_path / "libraries.pickle")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(REPO), os.environ.get("PYTHONPATH", "")])}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    assert helper.stdin is not None and helper.stdout is not None
    watchdog = threading.Timer(600, helper.kill)  # a hung helper ends the test, not the suite
    watchdog.start()
    cycle = sync = 0.0
    seen: list[str] = []
    try:
        _read_until(helper.stdout, "started")
        for round_number in range(kills):
            helper.stdin.write("go\n")
            helper.stdin.flush()
            pid = int(_read_until(helper.stdout, "ready")[-1].split()[1])
            if not cycle:  # time one index of each library first
                for _ in range(2):
                    lines = _read_until(helper.stdout, "indexed")
                    sync = max(sync, *(float(line.split()[1]) for line in lines
                                       if line.startswith("synced")))
                    cycle = max(cycle, float(lines[-1].split()[2]))
            moment = round_number % 3
            if moment == 0:
                # Anywhere in the next two indexes: building the graph, fitting the router,
                # the transaction, after it.
                time.sleep(rng.uniform(0.0, 2 * cycle))
            elif moment == 1:  # in the transaction
                _read_until(helper.stdout, "sync")
                time.sleep(rng.uniform(0.0, sync))
            else:  # just after the sync returned, where the metadata used to be written
                _read_until(helper.stdout, "synced")
                time.sleep(rng.uniform(0.0, 0.03))
            os.kill(pid, signal.SIGKILL)
            _read_until(helper.stdout, "reaped")

            fresh = open_store(kind, tmp_path)
            try:
                label = assert_metadata_describes_the_graph(fresh, names)
                # The reader open all along notices the new generation and serves the new graph.
                assert reader.get_meta(GENERATION_KEY) == fresh.get_meta(GENERATION_KEY)
                assert {n.id for n in reader.nodes()} == {n.id for n in fresh.nodes()}
                router = retriever.router()
                assert router is not None
                assert set(router.groups) == {g.id for g in fresh.nodes(NodeKind.GROUP)}
            finally:
                fresh.close()
            seen.append(label)
    finally:
        watchdog.cancel()
        helper.kill()
        helper.wait(30)
        helper.stdin.close()
        helper.stdout.close()
        reader.close()
    # The kills fell at different points of the cycle: both libraries were found stored.
    assert set(seen) == {"a", "b"}, seen
