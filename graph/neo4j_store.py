"""The Neo4j store: the same skill graph in a real Neo4j (5.13 or later), queried in the database.

The graph lives on the server, and retrieval runs there — vector search through a cosine VECTOR
index (``db.index.vector.queryNodes``), lexical search through a FULLTEXT index; this process
keeps only what it has read, and only while no sync has happened since (the read cache, below).
The Cypher comes from
:mod:`graph.cypher` (pure builders, values always as parameters); the only I/O seam is the
injected ``neo4j.Driver``::

    store = Neo4jStore.from_environment()          # SKILLGROVE_NEO4J_URI, _USER, _PASSWORD, ...
    store = Neo4jStore(GraphDatabase.driver(uri, auth=None), uri=uri)   # a driver of your own

**Sync** is one managed write transaction (the driver retries it on transient errors and lost
connections): read the stored hashes and edges, work out what changed, then delete, upsert and
rewrite in UNWIND batches. A sync that fails — the server goes away, the connection drops halfway
— is rolled back by the server, so readers keep seeing the previous graph until a sync commits.
Schema changes cannot share a transaction with data, so the constraints and the fulltext indexes
are created when the store opens and the vector indexes (whose dimension is that of the vectors)
just before the sync's transaction; all ``IF NOT EXISTS``, so opening and syncing are idempotent.

**Search.** Vector search asks the cosine VECTOR index (``db.index.vector.queryNodes``) for
enough candidates to be exact up to 2,000 nodes of a kind (HNSW asked for only ``k`` misses
about one in ten of the true top 50 on our vectors) and turns Neo4j's ``(1 + cos) / 2`` back
into the cosine. Text search scores the embedded store's BM25, divided by the most any node
could score for the query (which puts it on the same 0..1 scale), on each node's stored
``tokens = " ".join(tokenize(text))`` — our own CJK-aware tokens, so both stores match on the
same terms. The term counts of every node of a kind are read once per sync token, along with
the first search that finds a token other than the one they were read under, and scored in
this process (:class:`_KindLexicon`: at 10,000 skills a search's Lucene statement took about
50 times the embedded store's time, most of it the candidates' tokens it sent back). A graph
without a token is searched as before: a FULLTEXT index on ``tokens`` (Lucene's
``whitespace`` analyzer) finds candidates and they are given the same score
(``graph.cypher``, "fulltext", says how). On the 1,321-skill corpus both stores return the
same top-5 skills for every sample request (``bench/neo4j_agreement.py``).

**Round trips.** Every read is one query, one round trip (about 1 ms of a quiet machine's
time, 3 to 5 ms of a loaded one, whatever the query does). So a search asks little and in
bulk: ``hybrid_searches`` runs every vector search of a request in one statement — the vector
index queries whose hits bring their records, and the sync token that says whether the term
counts held are current (they come in the same statement when not) — and reads the records
and vectors of the lexical-only hits in a second; the batched reads (``nodes_by_id``,
``vectors``, ``neighbors_of``) are one query each. A ``Retriever.search`` takes three to five
(``tests/neo4j/test_round_trips.py`` holds it to a bound), where it took 140 reading record by
record. Rows are taken from the driver as
decoded (``_rows``): ``Record.data()`` copied each vector float by float, which cost more than
the round trip.

**The read cache.** Every sync writes a new random *sync token* (a meta entry) in its
transaction. Records, vectors and neighbour lists that the batched reads fetched are kept,
keyed by the token they were read under; reading a meta entry (which the retriever does first
in every search, for the index generation) and every ``hybrid_searches`` read the token too, and
a new one drops what was kept. So a process sees another's sync from its next search on, as
with the embedded store (whose ``get_meta`` reloads a changed file); the single reads
(``node``, ``nodes``, ``edges``, ``neighbors``, ``vector``) always ask the server. The term
counts text search is scored on are kept the same way, apart (``clear_read_cache`` leaves
them), and read again in the statement of the first search that finds a new token; when the
token that statement reads first and the one it reads last differ, a sync committed while it
ran, and nothing it read is kept. Nothing is kept of a graph without a token (never synced, or
cleared); a change made to the graph around ``sync`` (Cypher of one's own) is not noticed until
the next sync.

**Two writers.** Replicas of a team may re-index at the same moment. A sync's transaction
begins by writing its sync token to the token's meta node, which holds that node's write lock
until the transaction ends: a second sync waits at its first statement, and then reads the graph
the first committed and works out its difference from that. Syncs are serialized, and the graph
left is always the whole graph of the last one to commit — its nodes, its edges and the meta
(fingerprint, generation, router) that describe them; without the lock, two syncs that read the
same old graph left a mix of both (``tests/test_store_conformance.py``, two writers).

**Metadata** (the index's generation, router, library fingerprint) is written by the sync's
transaction too (``sync(..., meta=)``): a reader sees the new graph with its new generation or
the old graph with the old one, whenever the writer was stopped.

Failures become one :class:`~graph.errors.StoreError` that names the URI and what to do. A
password never appears in a message: URIs are shown with their credentials replaced by ``***``
(:func:`redact_uri`), and the configured password is masked wherever the driver repeats it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import tomllib
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt
from neo4j import (
    READ_ACCESS,
    Driver,
    GraphDatabase,
    ManagedTransaction,
    Result,
    RoutingControl,
    Session,
)
from neo4j.exceptions import (
    AuthError,
    ConfigurationError,
    DriverError,
    IncompleteCommit,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from skillgrove.graph import cypher
from skillgrove.graph.bm25 import Postings
from skillgrove.graph.cypher import Statement
from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.errors import StoreError
from skillgrove.graph.model import Edge, EdgeKind, NodeKind, NodeRecord, SyncReport
from skillgrove.graph.text import query_tokens, tokenize, tokenizer_signature

if TYPE_CHECKING:
    from skillgrove.graph.neo4j_runlog import Neo4jRunLog

T = TypeVar("T")
DEFAULT_URI = "bolt://127.0.0.1:7687"
START_HINT = ("start one with `bash .ci/neo4j/server.sh start` (test server, no auth) or "
              "`docker compose up -d --wait` (with SKILLGROVE_NEO4J_PASSWORD set; see "
              "docker-compose.yml), or point SKILLGROVE_NEO4J_URI at your server")

_EdgeKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Neo4jConfig:
    """Where the server is and how to talk to it.

    ``from_environment`` reads ``SKILLGROVE_NEO4J_CONFIG`` (a TOML or JSON file with the keys
    below) and then ``SKILLGROVE_NEO4J_URI``, ``_USER``, ``_PASSWORD``, ``_DATABASE``, which win
    over the file. No user and no password means no authentication (the test server); a password
    without a user logs in as ``neo4j``.

    >>> Neo4jConfig.from_environment({"SKILLGROVE_NEO4J_URI": "bolt://db:7687"}).uri
    'bolt://db:7687'
    """

    uri: str = DEFAULT_URI
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None
    """None: the server's default database (``neo4j``)."""
    connection_timeout: float = 5.0
    """Seconds to wait for a TCP connection before calling the server unreachable."""
    max_transaction_retry_time: float = 15.0
    """Seconds a managed transaction keeps being retried after transient failures."""
    batch_size: int = 500
    """Rows per UNWIND in a sync."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Neo4jConfig:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        config_file = env.get("SKILLGROVE_NEO4J_CONFIG")
        if config_file:
            values.update(_read_config_file(Path(config_file)))
        for key in ("uri", "user", "password", "database"):
            value = env.get(f"SKILLGROVE_NEO4J_{key.upper()}")
            if value:
                values[key] = value
        return cls(**values)

    def auth(self) -> tuple[str, str] | None:
        if self.user is None and self.password is None:
            return None
        return (self.user or "neo4j", self.password or "")

    def __repr__(self) -> str:
        shown = redact_uri(self.uri, self.secrets())
        return (f"Neo4jConfig(uri={shown!r}, user={self.user!r}, database={self.database!r}, "
                f"connection_timeout={self.connection_timeout!r}, "
                f"max_transaction_retry_time={self.max_transaction_retry_time!r}, "
                f"batch_size={self.batch_size!r})")

    def secrets(self) -> tuple[str, ...]:
        """What must never be printed: the password, and one written into the URI."""
        return tuple(s for s in (self.password, _uri_password(self.uri)) if s)


_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/?#@:]*):"
                       r"(?P<password>[^\s/?#]*)@")


def redact_uri(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with the password of every URI in it, and each of ``secrets``, as ``***``.

    >>> redact_uri("bolt://neo4j:s3cret@db:7687")
    'bolt://neo4j:***@db:7687'
    """
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _uri_password(uri: str) -> str | None:
    try:
        return urlsplit(uri).password
    except ValueError:
        return None


def _has_userinfo(uri: str) -> bool:
    try:
        return "@" in urlsplit(uri).netloc
    except ValueError:
        return False


_CONFIG_KEYS: dict[str, type | tuple[type, ...]] = {"uri": str, "user": str, "password": str, "database": str,
                "connection_timeout": (int, float), "max_transaction_retry_time": (int, float),
                "batch_size": int}


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"cannot read the Neo4j config file {path} (SKILLGROVE_NEO4J_CONFIG): "
                         f"{exc.strerror}") from exc
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw)
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise StoreError(f"{path}: the Neo4j config file is not valid {kind}: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("neo4j"), dict):
        data = data["neo4j"]  # a [neo4j] table in a larger file
    if not isinstance(data, dict):
        raise StoreError(f"{path}: the Neo4j config file must hold a table of settings")
    out: dict[str, Any] = {}
    for key, value in data.items():
        expected = _CONFIG_KEYS.get(key)
        if expected is None:
            known = ", ".join(sorted(_CONFIG_KEYS))
            raise StoreError(f"{path}: unknown Neo4j setting '{key}' (known: {known})")
        if not isinstance(value, expected) or isinstance(value, bool):
            raise StoreError(f"{path}: Neo4j setting '{key}' has the wrong type "
                             f"({type(value).__name__})")
        out[key] = value
    return out


class Neo4jStore:
    """The :class:`~graph.store.GraphStore` Protocol on a Neo4j server, through ``driver``.

    Opening checks the server (reachable, credentials, version 5.13+) and sets up the schema.
    ``close()`` closes the driver only when the store created it (``from_config``)."""

    def __init__(self, driver: Driver, *, uri: str = "the Neo4j server",
                 database: str | None = None, batch_size: int = 500,
                 owns_driver: bool = False, secrets: Sequence[str] = ()) -> None:
        self._driver = driver
        self._secrets = tuple(s for s in (*secrets, _uri_password(uri)) if s)
        self.uri = redact_uri(uri, self._secrets)
        """The URI as it may be shown: without its password."""
        self.database = database
        self.batch_size = batch_size
        self._owns_driver = owns_driver
        self._vector_dims: dict[NodeKind, int] = {}
        self._cache = _ReadCache(None)
        self._lexicon = _Lexicon(None, {})
        self._cache_lock = threading.Lock()
        self._local = threading.local()
        self._read_sessions: list[Session] = []
        try:
            self.server_version = self._check_server()
            self._version = cypher.parse_version(self.server_version)
            self._ensure_schema()
        except BaseException:
            if owns_driver:
                driver.close()
            raise

    @classmethod
    def from_config(cls, config: Neo4jConfig) -> Neo4jStore:
        # Without a handler the driver's retry and connection warnings would reach stderr
        # through logging's last resort; the StoreError we raise says it all.
        logging.getLogger("neo4j").addHandler(logging.NullHandler())
        secrets = config.secrets()
        shown = redact_uri(config.uri, secrets)
        if _has_userinfo(config.uri):
            raise StoreError(f"the Neo4j URI {shown!r} holds credentials, which the driver "
                             "does not take from a URI: give the URI without them and set "
                             "SKILLGROVE_NEO4J_USER and SKILLGROVE_NEO4J_PASSWORD (or user and "
                             "password in the SKILLGROVE_NEO4J_CONFIG file)")
        try:
            driver = GraphDatabase.driver(
                config.uri, auth=config.auth(), connection_timeout=config.connection_timeout,
                max_transaction_retry_time=config.max_transaction_retry_time,
                notifications_min_severity="OFF")
        except (ConfigurationError, ValueError) as exc:
            # Not chained: the driver's own message repeats the URI as given.
            raise StoreError(redact_uri(f"cannot use the Neo4j URI {shown!r}: {exc} (set "
                                        "SKILLGROVE_NEO4J_URI, e.g. bolt://127.0.0.1:7687)",
                                        secrets)) from None
        return cls(driver, uri=config.uri, database=config.database,
                   batch_size=config.batch_size, owns_driver=True, secrets=secrets)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Neo4jStore:
        """The store ``skillgrove --store neo4j`` uses; see :class:`Neo4jConfig`."""
        return cls.from_config(Neo4jConfig.from_environment(environ))

    # -- errors -------------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str, after: str = "") -> Iterator[None]:
        """Driver and server failures as one StoreError naming the URI and what to do;
        ``after`` is added to every message but the lost-commit one."""
        try:
            yield
        except StoreError:
            raise
        except (Neo4jError, DriverError) as exc:
            raise StoreError(redact_uri(self._describe(exc, action, after),
                                        self._secrets)) from exc

    def _describe(self, exc: Neo4jError | DriverError, action: str, after: str) -> str:
        if isinstance(exc, AuthError):
            return (f"Neo4j at {self.uri} refused the credentials while trying to "
                    f"{action}{after}: set SKILLGROVE_NEO4J_USER and SKILLGROVE_NEO4J_PASSWORD "
                    "(or user/password in the SKILLGROVE_NEO4J_CONFIG file) to an account of "
                    "that server")
        if isinstance(exc, IncompleteCommit):
            return (f"the connection to Neo4j at {self.uri} was lost while committing "
                    f"({action}); the change may or may not have been applied: run it again")
        if isinstance(exc, ServiceUnavailable | SessionExpired):
            return (f"cannot reach Neo4j at {self.uri} to {action} ({_first_line(exc)}){after}: "
                    f"is the server running? {START_HINT}")
        if isinstance(exc, Neo4jError):
            code = exc.code or ""
            if code.endswith("DatabaseNotFound"):
                return (f"Neo4j at {self.uri} has no database '{self.database}': create it or "
                        "set SKILLGROVE_NEO4J_DATABASE to one that exists (Community has only "
                        "'neo4j')")
            return (f"Neo4j at {self.uri} failed to {action}{after}: {code}: "
                    f"{_first_line(exc.message or exc)}")
        return f"Neo4j at {self.uri}: cannot {action}{after}: {_first_line(exc)}"

    def _read(self, statement: Statement) -> list[dict[str, Any]]:
        """A read in one round trip (an auto-commit query, in this thread's read session);
        when the connection turns out to be stale or the server busy, once more as a managed
        transaction, which the driver retries. Each search makes several reads, so the round
        trip counts."""
        query, params = statement
        try:
            return _rows(self._read_session().run(query, params))
        except (ServiceUnavailable, SessionExpired, TransientError):
            self._drop_read_session()
            return self._driver.execute_query(
                query, params, routing_=RoutingControl.READ, database_=self.database,
                result_transformer_=_rows)
        except BaseException:
            self._drop_read_session()
            raise

    def _read_session(self) -> Session:
        """This thread's session for reads, opened on its first read and kept: opening one
        per read cost about half a millisecond of each round trip. It shares the driver's
        bookmark manager with every write here, so a read still follows the last sync; a
        session holds a connection only while a result is being read (a result is always
        read to its end), and one that failed is dropped."""
        session: Session | None = getattr(self._local, "session", None)
        if session is None or session.closed():
            session = self._driver.session(
                database=self.database, default_access_mode=READ_ACCESS,
                bookmark_manager=self._driver.execute_query_bookmark_manager)
            self._local.session = session
            with self._cache_lock:
                self._read_sessions = [s for s in self._read_sessions if not s.closed()]
                self._read_sessions.append(session)
        return session

    def _drop_read_session(self) -> None:
        session: Session | None = getattr(self._local, "session", None)
        self._local.session = None
        if session is not None:
            # A session that failed may fail to close too; its connection is dropped anyway.
            with suppress(Neo4jError, DriverError, OSError):
                session.close()

    def _write(self, statement: Statement) -> list[dict[str, Any]]:
        query, params = statement
        return self._driver.execute_query(
            query, params, routing_=RoutingControl.WRITE, database_=self.database,
            result_transformer_=_rows)

    # -- opening ------------------------------------------------------------------------------

    def _check_server(self) -> str:
        with self._errors("connect"):
            self._driver.verify_connectivity()
            rows = self._read(cypher.server_components())
        kernel = next((r for r in rows if r["name"] == "Neo4j Kernel"), rows[0] if rows else None)
        version = str(kernel["versions"][0]) if kernel and kernel["versions"] else "unknown"
        check_server_version(version, self.uri)
        return version

    def _ensure_schema(self) -> None:
        with self._errors("set up the schema"):
            for kind in NodeKind:
                self._write(cypher.create_id_constraint(kind))
            self._write(cypher.create_meta_constraint())
            indexes = self._indexes()
            for kind in NodeKind:
                existing = indexes.get(cypher.fulltext_index_name(kind))
                if existing is not None and _index_config(existing).get(
                        "fulltext.analyzer") != cypher.FULLTEXT_ANALYZER:
                    self._write(cypher.drop_index(cypher.fulltext_index_name(kind)))
                self._write(cypher.create_fulltext_index(kind))
            self._write(cypher.await_indexes())

    def _indexes(self) -> dict[str, dict[str, Any]]:
        names = [name(kind) for kind in NodeKind
                 for name in (cypher.fulltext_index_name, cypher.vector_index_name)]
        return {row["name"]: row for row in self._read(cypher.show_indexes(names))}

    def _ensure_vector_index(self, kind: NodeKind, dimensions: int) -> None:
        """Creates the kind's vector index; recreates it when its settings are not ours (the
        model's dimension changed, or an older version made it quantized)."""
        if self._vector_dims.get(kind) == dimensions:
            return
        name = cypher.vector_index_name(kind)
        existing = self._indexes().get(name)
        if existing is not None and not cypher.vector_index_matches(
                _index_config(existing), dimensions, self._version):
            self._write(cypher.drop_index(name))
        self._write(cypher.create_vector_index(kind, dimensions, self._version))
        self._write(cypher.await_indexes())
        self._vector_dims[kind] = dimensions

    def _has_vector_index(self, kind: NodeKind) -> bool:
        return kind in self._vector_indexed([kind])

    def _vector_indexed(self, kinds: Sequence[NodeKind]) -> set[NodeKind]:
        """Which of ``kinds`` have a vector index; what is not known yet is asked in one
        round trip (an index found is remembered; a missing one is asked for again, as
        another process may create it)."""
        unknown = [kind for kind in kinds if kind not in self._vector_dims]
        if unknown:
            indexes = self._indexes()
            for kind in unknown:
                existing = indexes.get(cypher.vector_index_name(kind))
                if existing is not None:
                    self._vector_dims[kind] = int(_index_config(existing)["vector.dimensions"])
        return {kind for kind in kinds if kind in self._vector_dims}

    # -- sync ---------------------------------------------------------------------------------

    def sync(self, nodes: Sequence[NodeRecord], vectors: Mapping[str, Vectors],
             edges: Sequence[Edge], meta: Mapping[str, str] | None = None) -> SyncReport:
        wanted = {n.id: n for n in nodes}
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end not in wanted:
                    raise StoreError(f"sync: edge {edge.kind.value} {edge.src!r} -> "
                                     f"{edge.dst!r} names {end!r}, which is not among the nodes")
        dims: dict[NodeKind, int] = {}
        for record in wanted.values():
            vector = vectors.get(record.id)
            if vector is None:
                continue
            size = int(np.asarray(vector).shape[-1])
            if dims.setdefault(record.kind, size) != size:
                raise StoreError(f"sync: vectors of {record.kind.value}s differ in dimension "
                                 f"({dims[record.kind]} and {size}, at {record.id!r})")
        with self._errors("sync", after="; the previous graph is unchanged"):
            if dims:
                # A kind with no node gets an index too (never a changed one), so that a
                # search of it needs no look at the schema: absent indexes are asked for on
                # every search, since another process may create them.
                present = {record.kind for record in wanted.values()}
                absent = [kind for kind in NodeKind if kind not in present]
                indexed = self._vector_indexed(absent) if absent else set()
                size = next(iter(dims.values()))
                dims.update({kind: size for kind in absent if kind not in indexed})
            for kind, size in dims.items():
                self._ensure_vector_index(kind, size)
            token = uuid.uuid4().hex
            try:
                with self._driver.session(
                        database=self.database,
                        bookmark_manager=self._driver.execute_query_bookmark_manager,
                ) as session:
                    report = session.execute_write(self._sync_work, wanted, vectors, edges,
                                                   dict(meta or {}), token)
            except BaseException:
                self._cache = _ReadCache(None)  # committed or not: ask the server again
                raise
            self._cache = _ReadCache(token)
            self._lexicon = _Lexicon(None, {})  # the next search reads the new counts
            return report

    def _sync_work(self, tx: ManagedTransaction, wanted: Mapping[str, NodeRecord],
                   vectors: Mapping[str, Vectors], edges: Sequence[Edge],
                   meta: Mapping[str, str], token: str) -> SyncReport:
        """One attempt of the sync transaction; the driver may run it again, so it recomputes
        the difference from what the transaction reads."""

        def run(statement: Statement) -> list[dict[str, Any]]:
            query, params = statement
            return _rows(tx.run(query, params))

        # First, the lock: writing the sync token takes the write lock of its meta node until
        # this transaction ends, so a sync of another process waits here, then reads what this
        # one committed (see "Two writers" in the module docstring).
        run(cypher.lock_sync(token))
        stored: dict[str, tuple[NodeKind, str, bool]] = {}
        for row in run(cypher.existing_nodes()):
            kind = cypher.kind_of_labels(row["labels"])
            if kind is not None:
                stored[row["id"]] = (kind, row["content_hash"], bool(row["has_vector"]))
        added = [n for n in wanted.values() if n.id not in stored]
        updated = [n for n in wanted.values()
                   if n.id in stored and stored[n.id][1] != n.content_hash]
        removed = sorted(nid for nid in stored if nid not in wanted)
        for record in added:
            if record.id not in vectors:
                raise StoreError(f"sync: no vector for node {record.id!r}")
        for record in updated:
            if record.id not in vectors and not stored[record.id][2]:
                raise StoreError(f"sync: no vector for node {record.id!r}")

        stored_edges: dict[_EdgeKey, tuple[Edge, NodeKind, NodeKind]] = {}
        for row in run(cypher.existing_edges()):
            src_kind = cypher.kind_of_labels(row["src_labels"])
            dst_kind = cypher.kind_of_labels(row["dst_labels"])
            if src_kind is None or dst_kind is None:
                continue
            edge = _edge_from_row(row)
            stored_edges[edge.key] = (edge, src_kind, dst_kind)
        wanted_edges = {e.key: e for e in edges}
        new_edges = [e for k, e in wanted_edges.items()
                     if k not in stored_edges or _edge_changed(stored_edges[k][0], e)]
        gone_edges = [k for k in stored_edges if k not in wanted_edges]

        size = self.batch_size
        gone_by_kinds: dict[tuple[EdgeKind, NodeKind, NodeKind], list[dict[str, Any]]] = {}
        for key in gone_edges:
            edge, src_kind, dst_kind = stored_edges[key]
            gone_by_kinds.setdefault((edge.kind, src_kind, dst_kind), []).append(
                {"src": edge.src, "dst": edge.dst, "group": key[3]})
        for (edge_kind, src_kind, dst_kind), rows in gone_by_kinds.items():
            for chunk in cypher.batches(rows, size):
                run(cypher.delete_edges(edge_kind, src_kind, dst_kind, chunk))
        for kind in NodeKind:
            ids = [nid for nid in removed if stored[nid][0] is kind]
            for id_chunk in cypher.batches(ids, size):
                run(cypher.delete_nodes(kind, id_chunk))
        relabel: dict[tuple[NodeKind, NodeKind], list[str]] = {}
        for record in updated:
            if stored[record.id][0] is not record.kind:
                relabel.setdefault((stored[record.id][0], record.kind), []).append(record.id)
        for (old, new), ids in relabel.items():
            for id_chunk in cypher.batches(ids, size):
                run(cypher.relabel_nodes(old, new, id_chunk))
        for kind in NodeKind:
            rows = [_node_row(n, vectors.get(n.id)) for n in (*added, *updated) if n.kind is kind]
            for chunk in cypher.batches(rows, size):
                run(cypher.upsert_nodes(kind, chunk))
        new_by_kinds: dict[tuple[EdgeKind, NodeKind, NodeKind], list[dict[str, Any]]] = {}
        for edge in new_edges:
            new_by_kinds.setdefault(
                (edge.kind, wanted[edge.src].kind, wanted[edge.dst].kind), []).append(
                {"src": edge.src, "dst": edge.dst, "group": edge.key[3],
                 "weight": float(edge.weight), "props": _props_json(edge.props)})
        for (edge_kind, src_kind, dst_kind), rows in new_by_kinds.items():
            for chunk in cypher.batches(rows, size):
                run(cypher.merge_edges(edge_kind, src_kind, dst_kind, chunk))
        changed_kinds = {n.kind for n in (*added, *updated)} | {stored[i][0] for i in removed}
        changed_kinds |= {stored[n.id][0] for n in updated}
        signature = tokenizer_signature(tokenize)
        signature_rows = run(cypher.get_meta(cypher.TOKENIZER_SIGNATURE_KEY))
        if wanted and (not signature_rows or signature_rows[0]["value"] != signature):
            # The tokenizer changed since the last sync: every stored ``tokens`` is stale.
            rewritten = {n.id for n in (*added, *updated)}
            for kind in NodeKind:
                rows = [{"id": n.id, "tokens": " ".join(tokenize(n.text))}
                        for n in wanted.values() if n.kind is kind and n.id not in rewritten]
                for chunk in cypher.batches(rows, size):
                    run(cypher.set_tokens(kind, chunk))
            changed_kinds = {n.kind for n in wanted.values()} | {k for k, _, _ in stored.values()}
            run(cypher.set_meta(cypher.TOKENIZER_SIGNATURE_KEY, signature))
        for kind in changed_kinds:
            documents = [tokenize(n.text) for n in wanted.values() if n.kind is kind]
            run(cypher.set_statistics(kind, cypher.vocabulary_statistics(documents)))
        # A new token says "what you read may have changed" to every store that keeps reads.
        run(cypher.set_meta_entries({**meta, cypher.SYNC_TOKEN_KEY: token}))
        return SyncReport(tuple(n.id for n in added), tuple(n.id for n in updated),
                          tuple(removed), len(wanted) - len(added) - len(updated),
                          len(new_edges), len(gone_edges))

    # -- reading ------------------------------------------------------------------------------

    def node(self, node_id: str) -> NodeRecord | None:
        with self._errors("read a node"):
            rows = self._read(cypher.node_by_id(node_id))
        return _record_from_row(rows[0]) if rows else None

    def nodes(self, kind: NodeKind | None = None) -> list[NodeRecord]:
        with self._errors("read nodes"):
            rows = self._read(cypher.nodes(kind))
        return [_record_from_row(row) for row in rows]

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        with self._errors("read edges"):
            rows = self._read(cypher.edges(kind))
        return [_edge_from_row(row) for row in rows]

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        if kinds is not None and not kinds:
            return []
        with self._errors("read neighbours"):
            rows = self._read(cypher.neighbors(node_id, kinds))
        return [(_edge_from_row(row), _record_from_row(row)) for row in rows]

    def vector_search(self, kind: NodeKind, vector: Vectors, k: int) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        with self._errors("search vectors"):
            if not self._has_vector_index(kind):
                return []
            rows = self._read(cypher.vector_search(kind, np.asarray(vector).tolist(), k))
        return [(row["id"], cypher.cosine_from_score(row["score"])) for row in rows]

    def text_search(self, kind: NodeKind, query: str, k: int) -> list[tuple[str, float]]:
        """The embedded store's BM25 on our tokens: Lucene finds the candidates through the
        fulltext index, their scores are the embedded store's (see :mod:`graph.cypher`,
        "fulltext")."""
        return self.text_searches(query, {kind: k})[kind]

    def text_searches(self, query: str, limits: Mapping[NodeKind, int],
                      ) -> dict[NodeKind, list[tuple[str, float]]]:
        """:meth:`text_search` over several kinds in one round trip (see
        :meth:`hybrid_searches`)."""
        return self.hybrid_searches(query, None, limits, {})[0]

    def hybrid_searches(self, query: str, vector: Vectors | None,
                        text_limits: Mapping[NodeKind, int],
                        vector_limits: Mapping[NodeKind, int],
                        ) -> tuple[dict[NodeKind, list[tuple[str, float]]],
                                   dict[NodeKind, list[tuple[str, float]]]]:
        """:meth:`text_searches` and :meth:`vector_searches` of one request in one round trip
        (:func:`graph.cypher.hybrid_searches`), and a second one that reads what a hybrid
        score needs of the hits into the read cache: for each kind searched both ways, the
        records and vectors of the lexical hits the vector search did not return (the vector
        hits come with their records), and the neighbour lists of the best
        :data:`NEIGHBORS_AHEAD` hits of either search.

        The lexical searches are scored here, on the term counts of every node of the kind
        (:class:`_KindLexicon`), which the statement brings along only when the sync token it
        reads is not the one they were read under: once per sync. A graph without a token
        (none of our syncs wrote it), or one a sync changed while the statement ran (the
        token read first and the one read last differ), is searched through Lucene instead,
        in a statement of its own (:meth:`_lucene_searches`)."""
        text_out: dict[NodeKind, list[tuple[str, float]]] = {kind: [] for kind in text_limits}
        dense_out: dict[NodeKind, list[tuple[str, float]]] = {kind: [] for kind in vector_limits}
        tokens = list(query_tokens(query))
        texts = {kind: k for kind, k in text_limits.items() if k > 0} if tokens else {}
        with self._errors("search"):
            wanted = [kind for kind, k in vector_limits.items() if k > 0]
            present = self._vector_indexed(wanted) if vector is not None and wanted else set()
            dense = {kind: k for kind, k in vector_limits.items() if kind in present and k > 0}
            if not texts and not dense:
                return text_out, dense_out
            lexicon = self._lexicon
            held = {kind: lexicon.token if kind in lexicon.kinds else None for kind in texts}
            vector_list = None if vector is None else np.asarray(vector).tolist()
            rows = self._read(cypher.hybrid_searches([], dense, tokens, vector_list, held))
            tokens_read = {row["part"]: row["token"] for row in rows
                           if row["part"] in ("token", "token_after")}
            token = tokens_read.get("token")
            consistent = token is not None and tokens_read.get("token_after") == token
            # Rows that may mix two graphs are kept nowhere.
            cache = self._seen_token(token if consistent else None)
            read: dict[NodeKind, _KindLexicon] = {}
            for row in rows:
                if row["part"] == "vector":
                    kind = NodeKind(row["kind"])
                    hits = sorted(row["hits"], key=lambda h: (-h["score"], h["id"]))
                    dense_out[kind] = [(h["id"], cypher.cosine_from_score(h["score"]))
                                       for h in hits]
                    if cache.token is not None:  # records already kept are not decoded again
                        cache.remember_nodes({h["id"]: _record_from_row(h) for h in hits
                                              if cache.nodes.get(h["id"]) is None})
                elif row["part"] == "postings" and consistent and row["token"] == token:
                    read[NodeKind(row["kind"])] = _KindLexicon.of_row(row)
            scorers: dict[NodeKind, _KindLexicon] = {}
            if consistent and token is not None:
                if read:
                    self._remember_lexicon(token, read)
                kept = lexicon.kinds if lexicon.token == token else {}
                scorers = {kind: entry for kind in texts
                           if (entry := read.get(kind) or kept.get(kind)) is not None}
            two_steps: dict[NodeKind, int] = {}
            for kind, scorer in scorers.items():
                ranked = scorer.top(tokens, texts[kind])
                if ranked is None:
                    two_steps[kind] = texts[kind]  # synced by an older version
                else:
                    text_out[kind] = ranked
            through_lucene = {kind: k for kind, k in texts.items() if kind not in scorers}
            if through_lucene:
                lucene_out, older = self._lucene_searches(tokens, through_lucene)
                text_out.update(lucene_out)
                two_steps.update(older)
            if two_steps:
                text_out.update(self._text_searches_in_two_steps(query, two_steps))
            both = [kind for kind in dense if kind in text_out]
            lexical_only = [nid for kind in both
                            for nid in _lexical_only(text_out[kind], dense_out[kind])]
            leaders = [nid for kind in both for hits in (text_out[kind], dense_out[kind])
                       for nid, _ in hits[:NEIGHBORS_AHEAD]]
            self._read_candidates(cache, lexical_only, leaders)
        return text_out, dense_out

    def _lucene_searches(self, tokens: Sequence[str], limits: Mapping[NodeKind, int],
                         ) -> tuple[dict[NodeKind, list[tuple[str, float]]], dict[NodeKind, int]]:
        """The lexical searches through the fulltext index, in one statement: Lucene finds
        :func:`graph.cypher.fulltext_candidates` of each kind and they are given the embedded
        store's BM25 (see :mod:`graph.cypher`, "fulltext"). Also the kinds whose statistics
        an older version wrote, which must be searched in two steps."""
        out: dict[NodeKind, list[tuple[str, float]]] = {}
        two_steps: dict[NodeKind, int] = {}
        texts = [(kind, cypher.fulltext_candidates(k)) for kind, k in limits.items()]
        for row in self._read(cypher.hybrid_searches(texts, {}, tokens, None)):
            if row["part"] != "text":
                continue
            kind = NodeKind(row["kind"])
            statistics = _bm25_statistics(row)
            if statistics is None:
                two_steps[kind] = limits[kind]
                continue
            dfs = {t["term"]: int(t["df"]) for t in row["terms"]}
            idfs = cypher.term_idfs(tokens, int(row["total"]), dfs, statistics["mean_idf"])
            candidates = {h["id"]: h["tokens"] or "" for h in row["hits"]}
            out[kind] = cypher.bm25_scores(candidates, tokens, idfs, statistics, limits[kind])
        return out, two_steps

    def _remember_lexicon(self, token: str, read: Mapping[NodeKind, _KindLexicon]) -> None:
        with self._cache_lock:
            current = self._lexicon
            kept = current.kinds if current.token == token else {}
            self._lexicon = _Lexicon(token, {**kept, **read})

    def _read_candidates(self, cache: _ReadCache, ids: Sequence[str],
                         neighbor_ids: Sequence[str] = ()) -> None:
        """Reads into ``cache`` the records and vectors of ``ids`` and the neighbour lists of
        ``neighbor_ids`` that it lacks, in one round trip (nothing when the cache is not in
        use)."""
        if cache.token is None:
            return
        missing = [nid for nid in dict.fromkeys(ids)
                   if nid not in cache.nodes or nid not in cache.vectors]
        lacking = [nid for nid in dict.fromkeys(neighbor_ids) if nid not in cache.neighbors]
        if not missing and not lacking:
            return
        found: dict[str, Mapping[str, Any]] = {}
        lists: dict[str, list[tuple[Edge, NodeRecord]]] = {nid: [] for nid in lacking}
        for row in self._read(cypher.candidate_reads(missing, lacking)):
            if row["part"] == "node":
                found[row["of"]] = row["row"]
            else:
                lists[row["of"]].append((_edge_from_row(row["row"]),
                                         _record_from_row(row["row"])))
        cache.remember_nodes({nid: _record_from_row(found[nid]) if nid in found else None
                              for nid in missing})
        cache.remember_vectors({nid: _vector_of(found.get(nid)) for nid in missing})
        cache.remember_neighbors({nid: sorted(pairs, key=_neighbor_order(nid))
                                  for nid, pairs in lists.items()})

    def _text_searches_in_two_steps(self, query: str, limits: Mapping[NodeKind, int],
                                    ) -> dict[NodeKind, list[tuple[str, float]]]:
        """:meth:`text_searches` for a graph synced before ``mean_idf`` was stored as a
        number: the statistics of every kind, then every kind's Lucene query."""
        out: dict[NodeKind, list[tuple[str, float]]] = {kind: [] for kind in limits}
        tokens = list(query_tokens(query))
        kinds = [kind for kind, k in limits.items() if k > 0]
        if not tokens or not kinds:
            return out
        with self._errors("search text"):
            by_kind: dict[str, list[dict[str, Any]]] = {}
            for row in self._read(cypher.fulltext_statistics_of(kinds, tokens)):
                by_kind.setdefault(row["kind"], []).append(row)
            plans: dict[NodeKind, tuple[dict[str, float], dict[str, float]]] = {}
            searches: list[tuple[NodeKind, str, int]] = []
            for kind in kinds:
                stats = by_kind.get(kind.value)
                if not stats:
                    continue  # no node holds any of the terms
                total = int(stats[0]["total"])
                dfs = {row["term"]: int(row["df"]) for row in stats}
                vocabulary = json.loads(stats[0]["statistics"] or "{}")
                if "average_length" not in vocabulary:  # synced before statistics were stored
                    vocabulary["average_length"] = (
                        self._read(cypher.average_length(kind))[0]["average_length"] or 0.0)
                statistics = {"mean_idf": float(vocabulary.get("mean_idf", 0.0)),
                              "average_length": float(vocabulary["average_length"])}
                idfs = cypher.term_idfs(tokens, total, dfs, statistics["mean_idf"])
                lucene = cypher.lucene_query(tokens, idfs, total, dfs)
                if lucene:
                    plans[kind] = (idfs, statistics)
                    searches.append((kind, lucene, cypher.fulltext_candidates(limits[kind])))
            if not searches:
                return out
            hits: dict[str, dict[str, str]] = {}
            for row in self._read(cypher.fulltext_searches(searches)):
                hits.setdefault(row["kind"], {})[row["id"]] = row["tokens"] or ""
        for kind, (idfs, statistics) in plans.items():
            out[kind] = cypher.bm25_scores(hits.get(kind.value, {}), tokens, idfs, statistics,
                                           limits[kind])
        return out

    def vector_searches(self, vector: Vectors, limits: Mapping[NodeKind, int],
                        ) -> dict[NodeKind, list[tuple[str, float]]]:
        """:meth:`vector_search` over several kinds in one round trip."""
        out: dict[NodeKind, list[tuple[str, float]]] = {kind: [] for kind in limits}
        with self._errors("search vectors"):
            present = self._vector_indexed([kind for kind, k in limits.items() if k > 0])
            indexed = {kind: k for kind, k in limits.items() if kind in present}
            if not indexed:
                return out
            rows = self._read(cypher.vector_searches(indexed, np.asarray(vector).tolist()))
        for row in rows:
            out[NodeKind(row["kind"])].append((row["id"], cypher.cosine_from_score(row["score"])))
        return out

    def nodes_by_id(self, ids: Iterable[str]) -> dict[str, NodeRecord]:
        """The records of ``ids``: from the read cache, the others in one round trip, which
        reads their vectors too while the cache is in use (a search that wants a record
        mostly wants its vector next)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        cache = self._cache
        known = cache.known_nodes(wanted)
        missing = [nid for nid in wanted if nid not in known]
        if missing:
            with self._errors("read nodes"):
                if cache.token is None:
                    rows = self._read(cypher.nodes_by_id(missing))
                    known.update({row["id"]: _record_from_row(row) for row in rows})
                else:
                    self._read_candidates(cache, missing)
                    known.update(cache.known_nodes(missing))
        return {nid: record for nid in wanted if (record := known.get(nid)) is not None}

    def vectors(self, ids: Iterable[str]) -> dict[str, Vectors]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        cache = self._cache
        known = cache.known_vectors(wanted)
        missing = [nid for nid in wanted if nid not in known]
        if missing:
            with self._errors("read vectors"):
                rows = self._read(cypher.node_vectors(missing))
            found = {row["id"]: _vector_of(row) for row in rows}
            fetched = {nid: found.get(nid) for nid in missing}
            if cache.token is not None:
                cache.remember_vectors(fetched)
            known.update(fetched)
        return {nid: vector for nid in wanted if (vector := known.get(nid)) is not None}

    def neighbors_of(self, ids: Iterable[str], kinds: Sequence[EdgeKind] | None = None,
                     ) -> dict[str, list[tuple[Edge, NodeRecord]]]:
        """The neighbour lists of ``ids``: from the read cache, the others in one round trip
        (every edge kind while the cache is in use, kept whole and filtered here)."""
        wanted = list(dict.fromkeys(ids))
        out: dict[str, list[tuple[Edge, NodeRecord]]] = {nid: [] for nid in wanted}
        if not wanted or (kinds is not None and not kinds):
            return out
        cache = self._cache
        caching = cache.token is not None
        lists = cache.known_neighbors(wanted)
        missing = [nid for nid in wanted if nid not in lists]
        if missing:
            with self._errors("read neighbours"):
                rows = self._read(cypher.neighbors_of(missing, None if caching else kinds))
            fetched: dict[str, list[tuple[Edge, NodeRecord]]] = {nid: [] for nid in missing}
            for row in rows:
                fetched[row["of"]].append((_edge_from_row(row), _record_from_row(row)))
            if caching:
                cache.remember_neighbors(fetched)
            lists.update(fetched)
        for nid in wanted:
            found = lists[nid]
            out[nid] = (list(found) if kinds is None or not caching
                        else [(e, o) for e, o in found if e.kind in kinds])
        return out

    def vector(self, node_id: str) -> Vectors | None:
        with self._errors("read a vector"):
            rows = self._read(cypher.node_vector(node_id))
        return _vector_of(rows[0]) if rows else None

    def get_meta(self, key: str) -> str | None:
        """The entry as of now, read with the sync token: when another store has synced
        since this one last looked, what the read cache holds is dropped (the retriever
        reads the generation before each search, so a search reads the graph as of then)."""
        with self._errors("read meta"):
            rows = self._read(cypher.get_meta_and_token(key))
        row = rows[0] if rows else {}
        self._seen_token(row.get("token"))
        value = row.get("value")
        return None if value is None else str(value)

    def clear_read_cache(self) -> None:
        """Forgets what the read cache holds (the next reads ask the server); for measuring
        a search that finds nothing kept. The term counts text searches are scored on are
        kept: like an index, they are read once per sync, not per record."""
        self._cache = _ReadCache(None)

    def _seen_token(self, token: str | None) -> _ReadCache:
        """The read cache for the graph as of ``token``, the sync token just read from the
        server: the same cache while the token is unchanged (and the cache not full), a new
        empty one otherwise; none in use while the graph has no token."""
        with self._cache_lock:
            cache = self._cache
            if token is None or token != cache.token or cache.full():
                cache = _ReadCache(token)
                self._cache = cache
            return cache

    # -- for the run log and the library state (graph.neo4j_runlog, graph.team) --------------

    def run_log(self) -> Neo4jRunLog:
        """The run log in this store's database, through this store's driver (see
        :mod:`graph.neo4j_runlog`)."""
        from skillgrove.graph.neo4j_runlog import Neo4jRunLog

        return Neo4jRunLog(self)

    def read_rows(self, statement: Statement, action: str) -> list[dict[str, Any]]:
        """A read of one's own (one round trip), failures as this store's StoreError."""
        with self._errors(action):
            return self._read(statement)

    def write_transaction(self, work: Callable[[Callable[[Statement], list[dict[str, Any]]]], T],
                          action: str) -> T:
        """``work(run)`` in one managed write transaction: ``run(statement)`` gives the rows of a
        statement in it. The driver retries the whole of ``work`` on transient failures, so
        ``work`` must decide from what it reads in the transaction; nothing is applied unless
        it returns."""

        def attempt(tx: ManagedTransaction) -> T:
            def run(statement: Statement) -> list[dict[str, Any]]:
                query, params = statement
                return _rows(tx.run(query, params))
            return work(run)

        with self._errors(action), self._driver.session(
                database=self.database,
                bookmark_manager=self._driver.execute_query_bookmark_manager) as session:
            return session.execute_write(attempt)

    def set_meta(self, key: str, value: str) -> None:
        with self._errors("write meta"):
            self._write(cypher.set_meta(key, value))

    def clear(self) -> None:
        """Deletes every skill, group, edge and meta entry (the schema stays)."""
        self._cache = _ReadCache(None)
        self._lexicon = _Lexicon(None, {})
        with self._errors("clear the graph"):
            self._write(cypher.delete_all())

    def close(self) -> None:
        with self._cache_lock:
            sessions, self._read_sessions = self._read_sessions, []
        for session in sessions:
            with suppress(Neo4jError, DriverError, OSError):
                session.close()
        if self._owns_driver:
            self._driver.close()


def check_server_version(version: str, uri: str) -> None:
    """Refuses servers without vector indexes (before 5.13), saying what to do."""
    if not cypher.version_supported(version):
        wanted = ".".join(map(str, cypher.MIN_SERVER_VERSION))
        raise StoreError(
            f"Neo4j at {redact_uri(uri)} is version {version}; skillgrove needs {wanted} or "
            "later (vector indexes): upgrade the server, or start neo4j:5.26-community with "
            "`docker compose up -d` and point SKILLGROVE_NEO4J_URI at it")


# -- the read cache ---------------------------------------------------------------------------

class _ReadCache:
    """Records, vectors and neighbour lists this process read of the graph as of one sync
    token (:data:`graph.cypher.SYNC_TOKEN_KEY`). Every sync writes a new token in its
    transaction, so while the server's token is the one here, what is here is what the
    server holds; a store drops the cache as soon as it reads another token. ``None`` as an
    entry means "read, and not there". With no token (a graph no sync of ours wrote) nothing
    is kept."""

    LIMIT = 50_000
    """Entries (of all three kinds) after which the cache starts over."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.nodes: dict[str, NodeRecord | None] = {}
        self.vectors: dict[str, Vectors | None] = {}
        self.neighbors: dict[str, list[tuple[Edge, NodeRecord]]] = {}

    def full(self) -> bool:
        return len(self.nodes) + len(self.vectors) + len(self.neighbors) > self.LIMIT

    def known_nodes(self, ids: Iterable[str]) -> dict[str, NodeRecord | None]:
        if self.token is None:
            return {}
        return {nid: self.nodes[nid] for nid in ids if nid in self.nodes}

    def known_vectors(self, ids: Iterable[str]) -> dict[str, Vectors | None]:
        if self.token is None:
            return {}
        return {nid: self.vectors[nid] for nid in ids if nid in self.vectors}

    def known_neighbors(self, ids: Iterable[str]) -> dict[str, list[tuple[Edge, NodeRecord]]]:
        if self.token is None:
            return {}
        return {nid: self.neighbors[nid] for nid in ids if nid in self.neighbors}

    def remember_nodes(self, records: Mapping[str, NodeRecord | None]) -> None:
        if self.token is not None:
            self.nodes.update(records)

    def remember_vectors(self, vectors: Mapping[str, Vectors | None]) -> None:
        if self.token is not None:
            self.vectors.update(vectors)

    def remember_neighbors(self, lists: Mapping[str, list[tuple[Edge, NodeRecord]]]) -> None:
        if self.token is not None:
            self.neighbors.update(lists)
            for pairs in lists.values():
                for _, other in pairs:
                    self.nodes.setdefault(other.id, other)


@dataclass(frozen=True)
class _KindLexicon:
    """The term counts of every node of one kind as of one sync token, read from the nodes'
    stored ``tokens``, and the BM25 statistics that sync stored: what scores a lexical search
    of the kind here, with :func:`graph.cypher.bm25_scores`' arithmetic on every node that
    holds a query term instead of on Lucene's best candidates (so the same scores, to the
    bit, and the exact top ``k``). At the bench's 10,000 skills: 14 MB of arrays, read in
    25 to 130 ms and counted in about 200 ms, once per sync; a search then takes 0.05 ms."""

    ids: tuple[str, ...]
    postings: Postings
    statistics: Mapping[str, float] | None
    """None: the statistics were written by an older version (searched in two steps)."""
    tfs: npt.NDArray[np.float64]
    norms: npt.NDArray[np.float64]
    """Each node's ``k1 * (1 - b + b * length / average_length)``."""

    @classmethod
    def of_row(cls, row: Mapping[str, Any]) -> _KindLexicon:
        """From a ``postings`` row of :func:`graph.cypher.hybrid_searches`."""
        postings = Postings.of(document.split(" ") if document else []
                               for document in row["documents"])
        statistics = _bm25_statistics(row)
        k1, b = cypher.BM25_K1, cypher.BM25_B
        lengths = postings.lengths.astype(np.float64)
        average_length = statistics["average_length"] if statistics else 0.0
        norms = (k1 * (1 - b + b * lengths / average_length) if average_length
                 else np.full(postings.size, k1))
        return cls(tuple(row["ids"]), postings, statistics, postings.tfs.astype(np.float64),
                   norms)

    def top(self, tokens: Sequence[str], k: int) -> list[tuple[str, float]] | None:
        """The best ``k`` nodes for the query ``tokens`` with their lexical scores on the
        embedded store's 0..1 scale, best first (ties by id), only scores above zero; None
        without statistics, when some node holds a query term (the two-step search's case)."""
        where, indptr = self.postings.vocabulary, self.postings.indptr
        dfs = {term: int(indptr[t + 1] - indptr[t]) for term in cypher.query_terms(tokens)
               if (t := where.get(term)) is not None}
        if self.statistics is None:
            return None if dfs else []
        mean_idf = self.statistics["mean_idf"]
        idfs = cypher.term_idfs(tokens, self.postings.size, dfs, mean_idf)
        bound = cypher.bm25_bound(tokens, idfs, mean_idf)
        if bound <= 0:
            return []
        gain = cypher.BM25_K1 + 1
        scores = np.zeros(self.postings.size, dtype=np.float64)
        for term in tokens:  # each occurrence, in order: the sums of bm25_scores, term by term
            idf = idfs.get(term)
            if idf is None:
                continue
            t = where[term]
            start, stop = int(indptr[t]), int(indptr[t + 1])
            docs, tfs = self.postings.docs[start:stop], self.tfs[start:stop]
            scores[docs] += idf * tfs * gain / (tfs + self.norms[docs])
        found = np.flatnonzero(scores > 0)
        shares = scores[found] / bound
        if len(found) > k:  # the k best, and every node tied with the last of them
            least = np.partition(shares, len(shares) - k)[len(shares) - k]
            best = shares >= least
            found, shares = found[best], shares[best]
        hits = sorted(zip((self.ids[i] for i in found.tolist()), shares.tolist(), strict=True),
                      key=lambda hit: (-hit[1], hit[0]))
        return hits[:k]


@dataclass(frozen=True)
class _Lexicon:
    """The :class:`_KindLexicon` of each kind read so far under one sync token."""

    token: str | None
    kinds: Mapping[NodeKind, _KindLexicon]


def _bm25_statistics(row: Mapping[str, Any]) -> dict[str, float] | None:
    """A kind's BM25 statistics from a search row (``statistics`` the stored JSON,
    ``mean_idf`` the number); None for a graph synced before ``mean_idf`` was stored as a
    number or without ``average_length``."""
    vocabulary = json.loads(row["statistics"] or "{}")
    if row["mean_idf"] is None or "average_length" not in vocabulary:
        return None
    return {"mean_idf": float(vocabulary.get("mean_idf", 0.0)),
            "average_length": float(vocabulary["average_length"])}


NEIGHBORS_AHEAD = 5
"""``hybrid_searches`` reads the neighbour lists of the best this many hits of each search
of a kind searched both ways along with the candidates: a search's answer is almost always
among them, and what is said about it next (substitutes, prerequisites, companions) is read
from its neighbours. A guess that misses costs the round trip it was meant to save."""


def _neighbor_order(node_id: str) -> Callable[[tuple[Edge, NodeRecord]], tuple[Any, ...]]:
    """:func:`graph.cypher.neighbors`' order: outgoing first, then kind, src, dst, group."""
    def key(pair: tuple[Edge, NodeRecord]) -> tuple[Any, ...]:
        edge = pair[0]
        return (edge.src != node_id, edge.kind.value, edge.src, edge.dst, edge.key[3])
    return key


def _lexical_only(lexical: Sequence[tuple[str, float]],
                  dense: Sequence[tuple[str, float]]) -> list[str]:
    seen = {nid for nid, _ in dense}
    return [nid for nid, _ in lexical if nid not in seen]


# -- rows <-> records -------------------------------------------------------------------------

def _vector_of(row: Mapping[str, Any] | None) -> Vectors | None:
    if row is None or row.get("embedding") is None:
        return None
    return np.asarray(row["embedding"], dtype=np.float32)


def _rows(result: Result) -> list[dict[str, Any]]:
    """A result's records as dicts of the values the driver decoded. ``Record.data()`` would
    copy every list element by element in Python: 20 ms for two dozen 384-float vectors, where
    the values themselves are ready (the driver's Rust extension decoded them)."""
    keys = result.keys()
    return [dict(zip(keys, record, strict=True)) for record in result]



def _first_line(value: object) -> str:
    text = str(value).strip()
    return text.splitlines()[0] if text else type(value).__name__


def _index_config(row: Mapping[str, Any]) -> dict[str, Any]:
    options = row.get("options") or {}
    return dict(options.get("indexConfig") or {})


def _props_json(props: Mapping[str, Any]) -> str:
    return json.dumps(dict(props), sort_keys=True)


def _edge_changed(old: Edge, new: Edge) -> bool:
    return (old.weight != new.weight
            or json.loads(_props_json(old.props)) != json.loads(_props_json(new.props)))


def _node_row(record: NodeRecord, vector: Vectors | None) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "name": record.name, "text": record.text, "tokens": " ".join(tokenize(record.text)),
        "content_hash": record.content_hash,
        "data": json.dumps(dict(record.data), ensure_ascii=False, sort_keys=True),
    }
    if vector is not None:
        properties["embedding"] = np.asarray(vector, dtype=np.float32).astype(float).tolist()
    return {"id": record.id, "properties": properties}


def _record_from_row(row: Mapping[str, Any]) -> NodeRecord:
    kind = cypher.kind_of_labels(row["labels"])
    if kind is None:
        raise StoreError(f"node {row['id']!r} in Neo4j is none of our kinds (labels {row['labels']})")
    return NodeRecord(row["id"], kind, row["name"], row["text"], row["content_hash"],
                      json.loads(row["data"] or "{}"))


def _edge_from_row(row: Mapping[str, Any]) -> Edge:
    return Edge(EdgeKind(row["kind"]), row["src"], row["dst"], float(row["weight"]),
                json.loads(row["props"] or "{}"))
