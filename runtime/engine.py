"""The engine: one object that every interface calls (the CLI, the MCP server, the HTTP API).

>>> from skillgrove import Skillgrove
>>> engine = Skillgrove(["library"])                  # or Skillgrove() for $SKILLGROVE_PATH
>>> toolbox = engine.search("summarize the quarterly report PDF and email it to my team")
>>> engine.views.toolbox(toolbox)["shape"]
'group'
>>> record = engine.run("report-analysis", {"pdf_path": "q3.pdf"},
...                     {"values": {"team_email": "t@x.io"}})

It holds the library (loaded once, reloaded when its files change), the store (embedded by
default, or Neo4j), the encoder and the run log, so a process that serves many requests pays for
each of them once. Everything heavy — the model, the stores, the YAML and JSON Schema machinery —
is imported on first use: ``import skillgrove`` stays cheap.

**Freshness.** The index remembers a fingerprint of the library's files. ``search``, ``ask`` and
``inject`` compare it with the files on disk (at most once a second) and re-index what changed
before answering; a server that runs :meth:`Skillgrove.watch` re-indexes as files change instead.

**Concurrency.** Searches hold a read lock; a re-index embeds new text outside it and takes the
write lock only to apply the new graph, so every search sees the old index or the new one.

**Last good version.** When a group file that used to validate stops validating, the group
keeps serving as it was, and :meth:`Skillgrove.groups` and :meth:`Skillgrove.health` report it
with its errors until it is fixed or removed.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from skillgrove.runtime.errors import (
    ConfirmationRequired,
    InvalidRequestError,
    NotFoundError,
    context_problem,
)
from skillgrove.runtime.limits import DEFAULT_K, budget_problem, k_problem, request_problem

if TYPE_CHECKING:
    from collections.abc import Collection

    from skillgrove.graph.embeddings import Encoder
    from skillgrove.graph.indexer import IndexResult
    from skillgrove.graph.learning import HistoryRow
    from skillgrove.graph.model import NodeRecord
    from skillgrove.graph.retrieval import RequestContext, Retriever, Toolbox
    from skillgrove.graph.runlog import RunLog, RunRecord
    from skillgrove.graph.stages import Settings
    from skillgrove.graph.store import GraphStore
    from skillgrove.graph.suggest import Suggestions
    from skillgrove.groups.impact import Impact
    from skillgrove.groups.library import Library
    from skillgrove.groups.loader import GroupLoad
    from skillgrove.groups.model import Group
    from skillgrove.runtime.events import Event
    from skillgrove.runtime.executors import Executor
    from skillgrove.runtime.inject import Format, Injection
    from skillgrove.runtime.runner import Plan
    from skillgrove.runtime.views import Detail, ToolboxViews
    from skillgrove.skills.diagnostics import Diagnostic
    from skillgrove.skills.model import Skill

LOOK_ALIKE_SIMILARITY = 0.95
"""Skills whose texts embed at least this alike are reported by ``index`` (27 pairs of different
names on the 1,321-skill corpus, e.g. 'zoho_bigin-automation' and 'zoho-bigin-automation')."""
INDEX_FILE = "graph.sqlite"
RUN_LOG_FILE = "runs.sqlite"
HISTORY_FILE = "history.jsonl"
"""A run log in the benchmark format (``skillgrove index --history FILE``), kept beside the
index so that every later re-index learns from it too."""
LIBRARY_CACHE_FILE = "library.cache"
"""The last library load (see :mod:`skillgrove.groups.cache`)."""
FINGERPRINT_KEY = "library_fingerprint"
LAST_GOOD_KEY = "library_last_good"
"""A team store's meta entry holding the file text of each group's last good version (JSON:
group id -> path and text), so that every replica serves the same groups."""
PATHS_KEY = "library_paths"
SKILL_RUN_PREFIX = "skill:"
"""Runs of one skill on its own are recorded under the group id ``skill:<name>``."""
FRESHNESS_INTERVAL = 1.0
MAX_SKILL_FILE_BYTES = 1024 * 1024

EventCallback = Callable[["Event"], None]


def cache_dir() -> Path:
    """``$SKILLGROVE_CACHE``, else ``~/.cache/skillgrove``: embeddings and the ONNX export."""
    configured = os.environ.get("SKILLGROVE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "skillgrove"


def default_index_dir() -> Path:
    configured = os.environ.get("SKILLGROVE_INDEX")
    return Path(configured) if configured else Path(".skillgrove")


@dataclass(frozen=True)
class SkillFile:
    path: str
    """Relative to the skill folder, with ``/`` separators."""
    size: int
    sha256: str


@dataclass(frozen=True)
class SkillDetails:
    """A skill with its instructions and the files of its folder (progressive disclosure)."""

    view: Mapping[str, Any]
    body: str
    files: tuple[SkillFile, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**self.view, "body": self.body,
                "files": [{"path": f.path, "size": f.size, "sha256": f.sha256}
                          for f in self.files]}


@dataclass(frozen=True)
class Answer:
    """What :meth:`Skillgrove.ask` did: the toolbox, the run (if a group ran) and the block."""

    toolbox: Toolbox
    run: RunRecord | None
    injection: Injection
    notes: tuple[str, ...] = ()
    plan: Plan | None = None
    """The chosen group's plan when it was not run (plan only, or not confirmed)."""
    needs_confirmation: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The effects (effect -> skills) that kept the chosen group from running: confirm them
    to run it."""


@dataclass(frozen=True)
class Composed:
    """A toolbox written as a group file (see :meth:`Skillgrove.compose`)."""

    text: str
    group: Group | None
    """The group, when it validates."""
    diagnostics: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Health:
    ready: bool
    skills: int
    groups: int
    broken_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Groups serving their last good version, with the errors of the file on disk."""
    last_refresh: float | None = None
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "skills": self.skills, "groups": self.groups,
                "broken_groups": {k: list(v) for k, v in self.broken_groups.items()},
                "last_refresh": self.last_refresh, "last_error": self.last_error}


class _ReadWriteLock:
    """Many readers or one writer; a waiting writer lets no new reader in."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class Skillgrove:
    """The skillgrove engine. See the module docstring for an example.

    ``paths``: library folders (or group files), earliest first. Without them: the folders the
    index was built from, else ``$SKILLGROVE_PATH``, else the bundled library.
    ``index``: the folder of the embedded index and the run log (default ``$SKILLGROVE_INDEX``,
    else ``./.skillgrove``). ``store``: ``"embedded"``, ``"neo4j"`` (configured from the
    environment) or a :class:`GraphStore`. ``model``: a sentence-transformers folder;
    ``encoder``: an :class:`Encoder` to use instead. ``auto_refresh``: re-index a changed library
    before answering (servers that :meth:`watch` turn it off). ``allow_effects``: side effects
    (``sends-email``, ``writes-files``, ..., or ``all``) that need no confirmation (default
    ``$SKILLGROVE_ALLOW_EFFECTS``, comma-separated; else none).
    """

    def __init__(self, paths: Sequence[str | os.PathLike[str]] | None = None, *,
                 index: str | os.PathLike[str] | None = None,
                 store: Literal["embedded", "neo4j"] | GraphStore = "embedded",
                 model: str | os.PathLike[str] | None = None,
                 encoder: Encoder | None = None,
                 allow_rules: Sequence[str] = (),
                 concurrency: int = 4,
                 retrieval: Settings | None = None,
                 executor: Executor | None = None,
                 auto_refresh: bool = True,
                 allow_effects: Sequence[str] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        if concurrency < 1:
            raise InvalidRequestError("concurrency", "must be at least 1")
        if allow_effects is None:
            allow_effects = [e.strip() for e in
                             os.environ.get("SKILLGROVE_ALLOW_EFFECTS", "").split(",")
                             if e.strip()]
        self.allow_effects = frozenset(allow_effects)
        """Effects a run may have without being confirmed (``all``: any)."""
        # Absolute from here on: the index records the folders it was built from, and a relative
        # spelling would name another folder (or none) when the index is used from elsewhere.
        self._explicit_paths = [Path(p).expanduser().absolute() for p in paths] if paths else None
        self.index_dir = Path(index) if index is not None else default_index_dir()
        self._store_choice = store
        self._model = str(model) if model is not None else None
        self._encoder_given = encoder
        self.allow_rules = frozenset(allow_rules)
        self.concurrency = concurrency
        self._retrieval = retrieval
        self._executor = executor
        self.auto_refresh = auto_refresh
        self.log = log or (lambda message: None)
        self._init_lock = threading.RLock()
        self._refresh_lock = threading.Lock()
        self._index_lock = _ReadWriteLock()
        self._store: GraphStore | None = None
        self._encoder: Encoder | None = None
        self._retriever: Retriever | None = None
        self._run_log: RunLog | None = None
        self._library: Library | None = None
        self._library_fingerprint: str | None = None
        self._broken: dict[str, tuple[str, ...]] = {}
        self._checked_at = 0.0
        self._indexed = False
        self._last_refresh: float | None = None
        self._last_error: str | None = None
        self._listeners: list[Callable[[Library], None]] = []
        self._views: tuple[Library, ToolboxViews] | None = None

    # -- the parts, made on first use ---------------------------------------------------------

    @property
    def store_kind(self) -> str:
        choice = self._store_choice
        return choice if isinstance(choice, str) else type(choice).__name__

    @property
    def store(self) -> GraphStore:
        with self._init_lock:
            if self._store is None:
                choice = self._store_choice
                if choice == "neo4j":
                    from skillgrove.graph.neo4j_store import Neo4jStore

                    self._store = Neo4jStore.from_environment()
                elif choice == "embedded":
                    from skillgrove.graph.embedded import EmbeddedStore

                    self._store = EmbeddedStore(self.index_dir / INDEX_FILE)
                elif isinstance(choice, str):
                    raise InvalidRequestError("store", f"unknown store '{choice}' "
                                              "(use embedded or neo4j)")
                else:
                    self._store = choice
            return self._store

    @property
    def encoder(self) -> Encoder:
        with self._init_lock:
            if self._encoder is None:
                if self._encoder_given is not None:
                    self._encoder = self._encoder_given
                else:
                    from skillgrove.graph.embeddings import (
                        CachedEncoder,
                        EmbeddingCache,
                        default_encoder,
                    )

                    self._encoder = CachedEncoder(
                        default_encoder(self._model, cache_dir()),
                        EmbeddingCache(cache_dir() / "embeddings.sqlite"))
            return self._encoder

    @property
    def retriever(self) -> Retriever:
        with self._init_lock:
            if self._retriever is None:
                from skillgrove.graph.retrieval import Retriever

                # Without settings of its own, the retriever answers with those fitted on the
                # library's history (stored with the index), else the defaults.
                self._retriever = Retriever(self.store, self.encoder, self._retrieval)
            return self._retriever

    @property
    def run_log(self) -> RunLog:
        """The store's own run log when it keeps one (Neo4j: every process of a team reads
        the same runs), else a SQLite file beside the index."""
        with self._init_lock:
            if self._run_log is None:
                shared = self._shared_run_log()
                if shared is not None:
                    self._run_log = shared
                else:
                    from skillgrove.graph.runlog import SqliteRunLog

                    self._run_log = SqliteRunLog(self.index_dir / RUN_LOG_FILE)
            return self._run_log

    def _shared_run_log(self) -> RunLog | None:
        if self._store_choice == "embedded":
            return None  # never opened only to ask: opening creates the index file
        make = getattr(self.store, "run_log", None)
        return make() if callable(make) else None

    def _has_runs(self) -> bool:
        """Whether there is a run log to read (a missing SQLite file is not created for it)."""
        if self._run_log is not None or (self.index_dir / RUN_LOG_FILE).exists():
            return True
        return self._store_choice != "embedded" and callable(getattr(self.store, "run_log",
                                                                     None))

    @property
    def paths(self) -> list[Path]:
        """The library folders this engine serves. One that does not exist is a
        :class:`NotFoundError` (a typo must not serve an empty library)."""
        paths, origin = self._configured_paths()
        missing = [p for p in paths if not p.exists()]
        if missing:
            raise NotFoundError.folders(missing, origin)
        return paths

    def _configured_paths(self) -> tuple[list[Path], str]:
        """The library paths as given (existing or not), and where they came from."""
        if self._explicit_paths:
            return list(self._explicit_paths), ""
        indexed = self._indexed_paths()
        if indexed:
            return indexed, (f"the index in {self.index_dir} was built from it: give the "
                             "library folders, or index the ones you have")
        from skillgrove.runtime.paths import default_paths

        return [p.absolute() for p in default_paths()], "in $SKILLGROVE_PATH"

    def _indexed_paths(self) -> list[Path]:
        if self._store is None and self._store_choice == "embedded" \
                and not (self.index_dir / INDEX_FILE).exists():
            return []
        text = self.store.get_meta(PATHS_KEY) or self.store.get_meta("roots") or ""
        return [Path(p) for p in text.split("\n") if p]

    @property
    def library(self) -> Library:
        """The library as last loaded (loaded now if it never was)."""
        with self._init_lock:
            if self._library is None:
                self._library, self._library_fingerprint = self._load()
            return self._library

    def _load(self, *, write_ids: bool = False) -> tuple[Library, str]:
        from skillgrove.groups.cache import load_library_cached
        from skillgrove.groups.library import library_fingerprint
        from skillgrove.skills.loader import LoadOptions
        from skillgrove.skills.safety import SafetyPolicy

        paths = self.paths
        fingerprint = library_fingerprint(paths)
        options = LoadOptions(safety=SafetyPolicy(allow=self.allow_rules), write_ids=write_ids)
        # An unchanged library is served from the last load (keyed by every file it read).
        library = load_library_cached(paths, options,
                                      cache_file=self.index_dir / LIBRARY_CACHE_FILE)
        if write_ids:  # the `.skill_id` files it wrote are part of the library now
            fingerprint = library_fingerprint(paths)
        return self._keep_last_good(library), fingerprint

    def _keep_last_good(self, library: Library) -> Library:
        """Groups that validated before and whose file now has errors keep their last good
        version, as long as it still validates against the new skills."""
        from skillgrove.groups.validate import validate_group

        previous = self._library
        broken: dict[str, tuple[str, ...]] = {}
        known = {*library.groups, *(previous.groups if previous is not None else ())}
        earlier = {**self._stored_last_good(skip=known),
                   **(previous.groups if previous is not None else {})}
        if not earlier:
            self._broken = broken
            return library
        groups = dict(library.groups)
        on_disk = {load.group.id: load for load in library.group_loads if load.group is not None}
        for gid, old in earlier.items():
            if gid in groups:
                continue
            load = on_disk.get(gid)
            errors = tuple(d.format() for d in library.errors
                           if d.path is not None and Path(d.path) == old.path)
            if load is None and not errors:
                continue  # removed (or renamed): gone for good
            if any(d.is_error for d in validate_group(old, library.catalog.active, groups)):
                continue
            groups[gid] = old
            broken[gid] = errors or ("the file no longer loads",)
        self._broken = broken
        return replace(library, groups=groups) if broken else library

    def _stored_last_good(self, skip: Collection[str] = ()) -> dict[str, Group]:
        """The last good version of each group as a team store keeps it (Neo4j): a replica
        that never saw a group valid serves the same version as the one that did. Groups in
        ``skip`` (valid on disk, or known from an earlier load) are not parsed again."""
        if self._store_choice == "embedded":
            return {}
        import json

        from skillgrove.groups.loader import load_group_text

        found: dict[str, Group] = {}
        for gid, entry in json.loads(self.store.get_meta(LAST_GOOD_KEY) or "{}").items():
            if gid in skip:
                continue
            load = load_group_text(entry["text"], Path(entry["path"]))
            if load.group is not None and load.group.id == gid:
                found[gid] = load.group
        return found

    def _last_good_entry(self, library: Library) -> dict[str, str]:
        """The meta entry an index writes into a team store: the file text of every group
        served, a last good version as it was kept (an embedded index writes none)."""
        if self._store_choice == "embedded":
            return {}
        import json

        from skillgrove.skills.model import content_hash

        kept = json.loads(self.store.get_meta(LAST_GOOD_KEY) or "{}")
        entries: dict[str, Any] = {}
        for gid, group in library.groups.items():
            if gid in self._broken:
                if gid in kept:
                    entries[gid] = kept[gid]
                continue
            try:
                raw = Path(group.path).read_bytes()
            except OSError:
                continue
            if content_hash(raw) == group.content_hash:  # not edited since it was loaded
                entries[gid] = {"path": str(group.path), "text": raw.decode("utf-8")}
        return {LAST_GOOD_KEY: json.dumps(entries, sort_keys=True, ensure_ascii=False)}

    def _follow_the_store(self) -> bool:
        """When another process of the team indexed the files this one serves (the store's
        fingerprint is theirs, not the one this library was loaded with), load them again:
        the graph is read from the store on every search, the library must match it.
        True when it reloaded (listeners are told, as after an index)."""
        if self._store_choice == "embedded" or self._library is None:
            return False
        from skillgrove.groups.library import library_fingerprint

        recorded = self.store.get_meta(FINGERPRINT_KEY)
        if not recorded or recorded == self._library_fingerprint \
                or recorded != library_fingerprint(self.paths):
            return False
        library = self.reload()
        for listener in list(self._listeners):
            listener(library)
        return True

    def check(self) -> Library:
        """Load the library from disk as it is now, every problem reported (nothing is kept
        from an earlier load, nothing is written)."""
        from skillgrove.groups.library import load_library
        from skillgrove.skills.loader import LoadOptions
        from skillgrove.skills.safety import SafetyPolicy

        paths, _ = self._configured_paths()  # a missing folder is one of the problems listed
        return load_library(paths, LoadOptions(safety=SafetyPolicy(allow=self.allow_rules)))

    def reload(self) -> Library:
        """Load the library again from disk (the index is not touched)."""
        with self._init_lock:
            self._library, self._library_fingerprint = self._load()
            return self._library

    # -- indexing ------------------------------------------------------------------------------

    def index(self, progress: Callable[[str, int, int], None] | None = None, *,
              write_ids: bool = False,
              history: str | os.PathLike[str] | None = None) -> IndexResult:
        """Index the library into the store: only what changed is written and embedded.

        Nothing is written into the library unless ``write_ids``: then each skill folder
        without a ``.skill_id`` gets one holding its (unchanged) id. ``history``: a run log in
        the benchmark format (``history.jsonl``: request, skills, edges), checked, then kept
        in the index folder; this and every later index learns co-use and the order skills
        run in from it, as from the library's own runs."""
        from skillgrove.graph.indexer import index_library

        with self._refresh_lock:
            rows = self._history(history)
            with self._init_lock:
                library, fingerprint = self._load(write_ids=write_ids)
                self._library, self._library_fingerprint = library, fingerprint
            runs = self._recorded_runs()
            meta = {FINGERPRINT_KEY: fingerprint,
                    PATHS_KEY: "\n".join(str(p) for p in self.paths),
                    **self._last_good_entry(library)}
            # The library's own runs teach what a history file does: the order its skills ran
            # in, and, with the request that started each, the settings fitted below (co-use
            # and quality the indexer reads from the runs themselves).
            ran = _run_rows(runs, library)
            co_use, transitions = _learned_from([*rows, *ran], library, co_use_from=rows)
            fitted, fit_meta = self._fitted_settings([*rows, *ran], library, len(ran))
            result = index_library(library, self.store, self.encoder, progress, runs=runs,
                                   write_lock=self._index_lock.write(),
                                   meta={**meta, **fit_meta}, co_use=co_use,
                                   transitions=transitions, fitted=fitted)
            self._last_refresh = time.time()
            self._last_error = None
            self._checked_at = time.monotonic()
        for listener in list(self._listeners):
            listener(library)
        return result

    def _fitted_settings(self, rows: Sequence[HistoryRow], library: Library,
                         from_runs: int = 0) -> tuple[str, dict[str, str]]:
        """(the retrieval settings fitted on ``rows``, as stored; the metadata saying how):
        fitted as ``skillgrove bench`` fits them (``runtime.bench.fit_settings``, on a library
        learned from nine tenths of the rows, judged on the rest), again only when the rows
        changed. Under ``MIN_CALIBRATION_ROWS`` held-out rows (a history under 100 rows),
        the defaults but for the selection floor, and the details say so."""
        import hashlib
        import json
        import tempfile

        from skillgrove.graph.stages import (
            DEFAULT_SETTINGS,
            FIT_DETAILS_KEY,
            FITTED_FROM_KEY,
            FITTED_KEY,
        )

        if not rows:
            return "", {FITTED_FROM_KEY: "", FIT_DETAILS_KEY: ""}
        digest = hashlib.sha256(json.dumps(
            [[r.request, list(r.skills), [list(e) for e in r.edges], r.succeeded]
             for r in rows], ensure_ascii=False).encode()).hexdigest()
        if self.store.get_meta(FITTED_FROM_KEY) == digest:
            return self.store.get_meta(FITTED_KEY) or "", {}
        from skillgrove.graph.embedded import EmbeddedStore
        from skillgrove.runtime.bench import fit_settings, learned_store
        from skillgrove.skills.loader import LoadOptions
        from skillgrove.skills.safety import SafetyPolicy

        options = LoadOptions(safety=SafetyPolicy(allow=self.allow_rules))
        with tempfile.TemporaryDirectory(prefix="skillgrove-fit-") as scratch:

            def build(name: str, fit_rows: Sequence[HistoryRow], min_support: int,
                      ) -> GraphStore:
                return learned_store(self.paths, library, fit_rows, Path(scratch) / name,
                                     min_support, options, self.encoder,
                                     lambda folder: EmbeddedStore(folder / "graph.sqlite"))

            started = time.perf_counter()
            settings, details = fit_settings(build, rows, self.encoder, DEFAULT_SETTINGS,
                                             say=self.log)
            details["seconds"] = round(time.perf_counter() - started, 1)
            details["from_run_log"] = from_runs
            details["fitted_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        fitted = settings.to_json() if settings != DEFAULT_SETTINGS else ""
        return fitted, {FITTED_FROM_KEY: digest,
                        FIT_DETAILS_KEY: json.dumps(details, sort_keys=True, default=str)}

    def retrieval_fit(self) -> dict[str, Any]:
        """How the retrieval settings of the index were chosen from the library's history
        (``skillgrove index --history``): the held-out sample and each value fitted, or why
        the defaults were kept; empty without a history."""
        import json

        from skillgrove.graph.stages import FIT_DETAILS_KEY

        text = self.store.get_meta(FIT_DETAILS_KEY)
        try:
            found = json.loads(text) if text else {}
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def _history(self, given: str | os.PathLike[str] | None) -> list[HistoryRow]:
        """The rows of the kept history file, after replacing it with ``given`` (read and
        checked first: a malformed file raises ``EngineError`` naming its line and leaves the
        kept one as it was)."""
        from skillgrove.graph.learning import HistoryError, read_history

        kept = self.index_dir / HISTORY_FILE
        if given is not None:
            source = Path(given)
            try:
                rows = read_history(source)
            except (HistoryError, OSError) as error:
                raise InvalidRequestError("history", str(error)) from error
            self.index_dir.mkdir(parents=True, exist_ok=True)
            scratch = kept.with_suffix(".partial")
            scratch.write_bytes(source.read_bytes())
            os.replace(scratch, kept)
            return rows
        if not kept.exists():
            return []
        try:
            return read_history(kept)
        except (HistoryError, OSError) as error:
            self.log(f"the kept history {kept} was not read ({error}); give a good one with "
                     "`skillgrove index --history FILE`")
            return []

    def look_alike_skills(self, threshold: float = LOOK_ALIKE_SIMILARITY) -> list[Diagnostic]:
        """Warnings for skill pairs of different names whose texts embed almost alike (their
        SIMILAR_TO weight reaches ``threshold``): retrieval cannot tell them apart, so one of
        them is picked for requests meant for the other."""
        from skillgrove.graph.model import EdgeKind
        from skillgrove.skills.diagnostics import Diagnostic, Severity

        by_id = self.library.catalog.by_id()
        found: list[Diagnostic] = []
        edges = sorted(self.store.edges(EdgeKind.SIMILAR_TO), key=lambda e: -e.weight)
        for edge in edges:
            a, b = by_id.get(edge.src), by_id.get(edge.dst)
            if a is None or b is None or a.name == b.name or edge.weight < threshold:
                continue  # same names are duplicates, reported by the loader
            found.append(Diagnostic(
                Severity.WARNING, "look-alike-skills",
                f"skills '{a.name}' and '{b.name}' ({b.skill_file}) are described almost alike "
                f"(similarity {edge.weight:.2f}): retrieval cannot tell them apart",
                a.skill_file, subject=a.name,
                hint="say in each description what it does that the other does not, or keep "
                     "only one of them"))
        return found

    def _recorded_runs(self) -> list[dict[str, Any]]:
        """The runs of this library (an index folder shared by several libraries keeps their
        statistics apart); a run recorded before runs named their library counts when its
        group is one of this library's."""
        if not self._has_runs():
            return []
        library = self.library
        key = _library_key(library)
        return [run.to_dict() for run in self.run_log.list(limit=1_000_000)
                if not run.group.startswith(SKILL_RUN_PREFIX)
                and (run.library == key if run.library is not None
                     else run.group in library.groups)]

    def is_indexed(self) -> bool:
        """Whether the store holds an index (remembered once it does: indexes are replaced,
        never removed, so a server does not ask the store again on every search)."""
        if self._indexed:
            return True
        if self._store_choice == "embedded" and self._store is None \
                and not (self.index_dir / INDEX_FILE).exists():
            return False
        self._indexed = bool(self.store.get_meta(FINGERPRINT_KEY) or self.store.get_meta("roots"))
        return self._indexed

    def stale(self) -> bool:
        """True when the library's files differ from what the index was built from. An index
        that records no fingerprint (built by hand with ``index_library``) is taken as it is."""
        from skillgrove.groups.library import library_fingerprint

        if not self.is_indexed():
            return True
        recorded = self.store.get_meta(FINGERPRINT_KEY)
        if not recorded:
            return False
        return recorded != library_fingerprint(self.paths)

    def ensure_fresh(self, *, force: bool = False) -> IndexResult | None:
        """Index now if there is no index or the library changed since (checked at most once a
        second unless ``force``)."""
        now = time.monotonic()
        if not force and now - self._checked_at < FRESHNESS_INTERVAL:
            return None
        self._checked_at = now
        if not self.is_indexed():
            self.log(f"no index yet: indexing {', '.join(map(str, self.paths))}")
            return self.index()
        if self.stale():
            indexed = self._indexed_paths()
            if self._explicit_paths and indexed and indexed != self._explicit_paths:
                self.log(f"the index in {self.index_dir} was built from "
                         f"{', '.join(map(str, indexed))}: re-indexing it from "
                         f"{', '.join(map(str, self.paths))}")
            else:
                self.log("the library changed since it was indexed: re-indexing")
            return self.index()
        self._follow_the_store()
        return None

    def _before_answer(self) -> None:
        if self.auto_refresh:
            self.ensure_fresh()
        elif not self.is_indexed():
            self.index()

    # -- retrieval -----------------------------------------------------------------------------

    def search(self, request: str, context: RequestContext | Mapping[str, Any] | None = None,
               k: int = DEFAULT_K) -> Toolbox:
        """The toolbox for ``request``: a group, or single skills with suggestions."""
        # The limits and words of runtime/limits.py, as the request models apply them.
        for name, problem in (("request", request_problem(request)), ("k", k_problem(k))):
            if problem is not None:
                raise InvalidRequestError(name, problem)
        ctx = self.context(context)
        self._before_answer()
        with self._index_lock.read():
            return self.retriever.search(request, ctx, k=k)

    @staticmethod
    def context(value: RequestContext | Mapping[str, Any] | None) -> RequestContext:
        """A :class:`RequestContext` from ``{"values": …, "recent_skills": …,
        "conversation": …}`` (or one already made)."""
        from skillgrove.graph.retrieval import RequestContext

        if value is None:
            return RequestContext()
        if isinstance(value, RequestContext):
            return value
        # The rules of runtime/api.py's RequestContext, without loading pydantic: a flat
        # object of values is refused, naming its first key and how to write it.
        problem = context_problem(value)
        if problem is not None:
            raise InvalidRequestError(".".join(p for p in ("context", problem[0]) if p),
                                      problem[1])
        _within_json_limits("context", value)
        return RequestContext(dict(value.get("values") or {}),
                              tuple(value.get("recent_skills") or ()),
                              tuple(value.get("conversation") or ()))

    @property
    def views(self) -> ToolboxViews:
        """The views of the library as loaded now: one per library, so each skill's view
        (its folder resolved against its root) is made once per index generation."""
        from skillgrove.runtime.views import ToolboxViews

        library = self.library
        made = self._views
        if made is None or made[0] is not library:
            made = self._views = (library, ToolboxViews(library.catalog.by_id(), library.groups,
                                                        library.skills, record=self._record))
        return made[1]

    def _record(self, node_id: str) -> NodeRecord | None:
        return self.store.node(node_id)

    def toolbox(self, request: str, context: RequestContext | Mapping[str, Any] | None = None,
                k: int = DEFAULT_K, detail: Detail = "compact") -> dict[str, Any]:
        """:meth:`search`, as the JSON view every interface returns: compact (what to use, in
        what order, with which inputs, and why) or ``detail="full"`` (every score and
        explanation, the whole schemas)."""
        from skillgrove.runtime.views import DETAILS

        if detail not in DETAILS:
            raise InvalidRequestError("detail", f"must be one of {', '.join(DETAILS)} "
                                      f"(got {detail!r})")
        return self.views.view(self.search(request, context, k), detail)

    # -- the library ---------------------------------------------------------------------------

    def skill(self, name: str) -> SkillDetails:
        """A skill by name (or id): its view, instructions and the files of its folder."""
        found = self._skill(name)
        return SkillDetails(dict(self.views.loaded(found)), found.body(),
                            tuple(_skill_files(found)))

    def _skill(self, name: str) -> Skill:
        library = self.library
        found = library.skills.get(name) or library.catalog.by_id().get(name)
        if found is None:
            # A SKILL.md that was rejected (bad frontmatter, a safety rule) is usually in a
            # folder of the skill's name: say why it is not there rather than "no skill".
            rejected = [load for load in library.catalog.rejected if load.path.parent.name == name]
            if rejected:
                errors = [d for d in rejected[0].diagnostics if d.is_error]
                raise NotFoundError.with_errors("skill", name, errors, self.paths)
            known = [*library.skills, *(load.path.parent.name for load in library.catalog.rejected)]
            raise NotFoundError.named("skill", name, known)
        return found

    def skill_file(self, name: str, file: str) -> bytes:
        """One file of a skill's folder, by its relative path (never outside the folder)."""
        found = self._skill(name)
        listed = {f.path for f in _skill_files(found)}
        if file not in listed:
            raise NotFoundError.named("file", file, sorted(listed), f"in skill '{found.name}'")
        from skillgrove.skills.loader import UnreadableFile, read_own_file

        try:  # checked again as it is read: a regular file with one link, inside the folder
            return read_own_file(found.folder, file, MAX_SKILL_FILE_BYTES)
        except (UnreadableFile, OSError) as exc:
            raise InvalidRequestError("file", f"'{file}' of skill '{found.name}' is not served: "
                                      f"{exc}") from None

    def group(self, group_id: str) -> Group:
        library = self.library
        gid = group_id.removeprefix("group:")
        found = library.groups.get(gid)
        if found is None:
            # A file that declares the id but has errors (even one too broken to parse) is
            # named as such: "unknown group" would send the user looking for a typo.
            declared = {load.path: _declared_group_id(load) for load in library.group_loads}
            broken = [path for path, declared_id in declared.items() if declared_id == gid]
            if broken:
                errors = [d for d in library.errors if d.path == broken[0]]
                raise NotFoundError.with_errors("group", gid, errors, self.paths,
                                                "cannot run")
            known = [*library.groups, *(i for i in declared.values() if i is not None)]
            raise NotFoundError.named("group", gid, known)
        return found

    def groups(self) -> list[dict[str, Any]]:
        """Every group file: valid, serving its last good version, with errors, or a draft
        (``groups/drafts/``, see :mod:`groups.authoring`; its errors listed)."""
        from skillgrove.runtime.views import group_view

        library = self.library
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        served: set[Path] = set()
        for gid, group in sorted(library.groups.items()):
            view = group_view(group, library.skills, library.groups)
            view["status"] = "last-good" if gid in self._broken else "valid"
            view["errors"] = list(self._broken.get(gid, ()))
            out.append(view)
            seen.add(gid)
            served.add(Path(group.path))
        for load in library.group_loads:
            if load.group is not None and load.group.id in seen:
                continue
            if load.group is None and Path(load.path) in served:
                continue  # no longer parses; listed above as its last good version
            errors = [d.format() for d in load.diagnostics if d.is_error]
            if load.group is not None:
                errors += [d.format() for d in library.errors
                           if d.path == load.group.path and d.format() not in errors]
            drafted = library.drafts.get(load.group.id) if load.group is not None else None
            draft = drafted is not None and Path(drafted.path) == Path(load.path)
            out.append({"id": load.group.id if load.group else None,
                        "name": load.group.name if load.group else None,
                        "location": str(load.path), "status": "draft" if draft else "errors",
                        "errors": errors})
        return out

    def health(self) -> Health:
        library = self.library
        return Health(ready=self.is_indexed(), skills=len(library.skills),
                      groups=len(library.groups), broken_groups=dict(self._broken),
                      last_refresh=self._last_refresh, last_error=self._last_error)

    # -- the graph -----------------------------------------------------------------------------

    def node(self, key: str) -> NodeRecord:
        """The index's node for a skill name or id, or a group id."""
        from skillgrove.graph.documents import GROUP_PREFIX
        from skillgrove.graph.model import NodeKind

        self._before_answer()
        store = self.store
        for candidate in (key, GROUP_PREFIX + key):
            record = store.node(candidate)
            if record is not None:
                return record
        # A name means the skill that answers for it (a shadowed one is asked for by its id).
        winner = self.library.skills.get(key)
        record = store.node(winner.id) if winner is not None else None
        if record is not None:
            return record
        names = []
        for kind in (NodeKind.SKILL, NodeKind.GROUP):  # examples are not asked for by name
            for record in store.nodes(kind):
                if record.name == key:
                    return record
                names.append(record.name if kind is NodeKind.SKILL
                             else record.id.removeprefix(GROUP_PREFIX))
        raise NotFoundError.named("skill or group", key, names, "in the index")

    def neighbors(self, key: str) -> tuple[NodeRecord, list[dict[str, Any]]]:
        """A node and its edges (kind, direction, weight, the other end, the edge's props)."""
        from skillgrove.graph.model import path_of

        record = self.node(key)
        rows: list[dict[str, Any]] = []
        for edge, other in self.store.neighbors(record.id):
            rows.append({"edge": edge.kind.value, "direction": "->" if edge.src == record.id
                         else "<-", "weight": edge.weight, "kind": other.kind.value,
                         "name": other.name, "id": other.id,
                         "location": path_of(other), "props": dict(edge.props)})
        rows.sort(key=lambda r: (r["edge"], -r["weight"], r["name"]))
        return record, rows

    def export(self, group: str, fmt: Literal["mermaid", "dot"] = "mermaid") -> str:
        """A group's DAG as Mermaid or Graphviz DOT."""
        from skillgrove.graph.export import to_dot, to_mermaid
        from skillgrove.graph.model import NodeKind

        record = self.node(group)
        if record.kind is not NodeKind.GROUP:
            raise InvalidRequestError("group", f"'{group}' is a skill, not a group")
        return to_mermaid(record) if fmt == "mermaid" else to_dot(record)

    def suggest_groups(self, history: str | os.PathLike[str] | None = None, *,
                       min_support: int | None = None, folder: Path | None = None,
                       ) -> Suggestions:
        """Draft groups mined from the run log (or a history file in the benchmark format) and
        from skills that name each other, each checked as if saved in ``folder`` (see
        :mod:`graph.suggest`)."""
        from skillgrove.graph.learning import read_history, rows_from_runs
        from skillgrove.graph.suggest import suggest

        if min_support is not None and min_support < 1:
            raise InvalidRequestError("min_support", "must be at least 1")
        library = self.library
        if history is not None:
            rows = read_history(Path(history))
        elif self._has_runs():
            runs = [run.to_dict() for run in self.run_log.list(limit=1_000_000)]
            rows = rows_from_runs(runs, library.groups, skill_run_prefix=SKILL_RUN_PREFIX)
        else:
            rows = []
        return suggest(library, rows, source="history" if history is not None else "runs",
                       min_support=min_support, folder=folder, co_references=history is None)

    def impact(self, skill: str) -> Impact:
        """The groups that use ``skill`` (directly or through sub-groups) and which its current
        schema breaks, read from disk as ``check`` reads it (see :mod:`groups.impact`)."""
        from skillgrove.groups.impact import skill_impact

        library = self.check()
        if skill not in library.skills and skill in library.catalog.by_id():
            skill = library.catalog.by_id()[skill].name
        return skill_impact(library, skill)

    def lock_groups(self) -> list[tuple[Path, int]]:
        """Writes ``groups/skillgrove.lock`` in each library root that holds valid groups
        (see :mod:`groups.lock`): each lock file and how many groups it pins. Groups with
        errors and drafts are not pinned: approve what works."""
        from skillgrove.groups.lock import write_lock

        library = self.check()
        written = []
        for root in library.roots:
            if not root.is_dir():
                continue
            mine = [g for g in library.groups.values() if g.path.is_relative_to(root)]
            if mine:
                written.append((write_lock(root, mine, library.skills), len(mine)))
        return written

    def compose(self, toolbox: Toolbox, *, group_id: str | None = None) -> Composed:
        """A composed (or single-skill) toolbox as a group file: its selected skills in order,
        its edges as ``needs``, each required input bound to an upstream output of the same
        name or to a group input. Validated like any group; ``group`` is None when it does not
        validate (``diagnostics`` say why). Save ``text`` into a ``groups/`` folder to keep it.
        """
        from skillgrove.graph.learning import DraftGroup, draft_to_yaml
        from skillgrove.groups.loader import load_group_text
        from skillgrove.groups.validate import validate_group

        if toolbox.group is not None:
            raise InvalidRequestError("toolbox", f"it is the group '{toolbox.group.name}' "
                                      "already; run it by its id")
        if not toolbox.selected:
            raise InvalidRequestError("toolbox", "it selects no skill; nothing to compose")
        library = self.library
        by_id = library.catalog.by_id()
        names = {sid: by_id[sid].name if sid in by_id else sid for sid in toolbox.selected}
        slug = "-".join(names[s] for s in toolbox.selected[-2:])[:50]
        draft = DraftGroup(group_id or f"composed-{slug}", tuple(toolbox.selected),
                           tuple(toolbox.edges), (toolbox.request,), 0,
                           f"Composed for: {toolbox.request}")
        contracts = {sid: (by_id[sid].inputs, by_id[sid].outputs) for sid in toolbox.selected
                     if sid in by_id}
        text = draft_to_yaml(draft, names, contracts=contracts).replace(
            "# Draft group mined from 0 runs", "# Composed at retrieval time, not yet a reviewed "
            "group", 1)
        path = self.index_dir / "composed" / f"{draft.id}.yaml"
        load = load_group_text(text, path)
        problems = [*load.diagnostics]
        group = load.group
        if group is not None:
            problems += validate_group(group, library.skills, library.groups)
        errors = tuple(d for d in problems if d.is_error)
        return Composed(text, group if not errors else None, errors)

    def run_composed(self, composed: Composed, inputs: Mapping[str, Any] | None = None,
                     context: RequestContext | Mapping[str, Any] | None = None,
                     on_event: EventCallback | None = None) -> RunRecord:
        """Run a composed toolbox that validated (see :meth:`compose`)."""
        if composed.group is None:
            first = composed.diagnostics[0].format() if composed.diagnostics else "invalid"
            raise InvalidRequestError("toolbox", f"the composed group does not validate: {first}")
        gid = composed.group.id
        groups = {**self.library.groups, gid: composed.group}
        return self._runner(on_event, groups).run(  # type: ignore[no-any-return]
            gid, _mapping("inputs", inputs), self._run_context(context))

    # -- running -------------------------------------------------------------------------------

    def _runner(self, on_event: EventCallback | None, groups: Mapping[str, Group] | None = None,
                stop: threading.Event | None = None) -> Any:
        """A runner for one call. Each run gets its folder under ``<index>/runs/``; mail that
        skills write to an outbox goes to ``$SKILLGROVE_OUTBOX``, else ``<index>/outbox`` (the
        same for ``run``, ``ask`` and ``demo``)."""
        from skillgrove.graph.runlog import make_private_folder
        from skillgrove.runtime.events import ignore
        from skillgrove.runtime.executors import SubprocessExecutor
        from skillgrove.runtime.runner import Runner, RunOptions
        from skillgrove.runtime.sandbox import Protected

        library = self.library
        index = self.index_dir.absolute()
        runs_dir = make_private_folder(index / "runs", ours=True)  # inputs and outputs
        executor = self._executor
        if executor is None:
            environ = dict(os.environ)
            if not environ.get("SKILLGROVE_OUTBOX"):
                environ["SKILLGROVE_OUTBOX"] = str(index / "outbox")
            executor = SubprocessExecutor(environ=environ, protected=Protected(
                hidden=(index, cache_dir().absolute()),
                read_only=tuple(Path(root).absolute() for root in library.roots),
                home=Path.home()))
        return Runner(groups if groups is not None else library.groups, library.skills,
                      executor, run_log=self.run_log, events=on_event or ignore,
                      options=RunOptions(max_concurrency=self.concurrency,
                                         runs_dir=runs_dir, library=_library_key(library)),
                      stop=stop)

    def effects(self, group: str) -> dict[str, tuple[str, ...]]:
        """What running ``group`` changes (effect -> the skills that have it), sub-groups
        included; ``{}`` for a group that only reads and writes its run folder."""
        return self.library.effects(self.group(group))

    def unconfirmed_effects(self, group: str) -> dict[str, tuple[str, ...]]:
        """The effects of ``group`` that ``allow_effects`` does not cover."""
        return self._not_allowed(self.effects(group))

    def _not_allowed(self, effects: Mapping[str, tuple[str, ...]],
                     ) -> dict[str, tuple[str, ...]]:
        if "all" in self.allow_effects:
            return {}
        return {effect: names for effect, names in effects.items()
                if effect not in self.allow_effects}

    def _run_context(self, context: RequestContext | Mapping[str, Any] | None,
                     ) -> dict[str, Any]:
        """What a run reads as ``context``: the values of the one context shape (``{"values":
        {...}, "recent_skills": [...], "conversation": [...]}``, as search takes it). A flat
        object of values is refused like any other mistake (``context.team_email: unknown
        field ...``): read as values, a misspelt ``value`` would silently skip every step that
        needs one."""
        return dict(self.context(context).values)

    def plan(self, group: str, inputs: Mapping[str, Any] | None = None,
             context: RequestContext | Mapping[str, Any] | None = None) -> Plan:
        """How ``group`` would run with these inputs: levels, resolved ``with``, skips."""
        found = self.group(group)
        return self._runner(None).plan(found.id, _mapping("inputs", inputs),  # type: ignore[no-any-return]
                                       self._run_context(context))

    def run(self, group: str, inputs: Mapping[str, Any] | None = None,
            context: RequestContext | Mapping[str, Any] | None = None,
            on_event: EventCallback | None = None,
            *, resume: str | None = None, request: str | None = None,
            confirm: bool = True, stop: threading.Event | None = None) -> RunRecord:
        """Run ``group``; ``on_event`` receives the run's events as they happen. ``resume``:
        a run (of the same group) to continue: its inputs and context with the given ones laid
        over them, its run folder, and its successful steps that did not change. ``stop``: set
        it to cancel the run (recorded as ``cancelled``, resumable). ``confirm=False`` (what
        the servers pass unless their caller confirmed): raise :class:`ConfirmationRequired`
        instead of running a group with effects that ``allow_effects`` does not cover."""
        found = self.group(group)
        # A mistake in the context is said before any confirmation is asked for.
        values = self._run_context(context) if context is not None else None
        if not confirm:
            pending = self.unconfirmed_effects(found.id)
            if pending and not resume:
                # Wrong inputs are reported first: confirming should not lead to "missing".
                self.plan(found.id, inputs, context)
            if pending:
                raise ConfirmationRequired(found.id, pending)
        previous = self.get_run(resume) if resume else None
        given_inputs = _mapping("inputs", inputs) if inputs is not None or previous is None \
            else None
        given_context = values if values is not None or previous is not None else {}
        return self._runner(on_event, stop=stop).run(  # type: ignore[no-any-return]
            found.id, given_inputs, given_context, resume=previous, request=request)

    def run_skill(self, name: str, inputs: Mapping[str, Any] | None = None,
                  on_event: EventCallback | None = None, *, confirm: bool = True) -> RunRecord:
        """Run one executable skill on its own (recorded as a run of ``skill:<name>``).
        ``confirm=False``: refuse a skill with effects (see :meth:`run`)."""
        from skillgrove.groups.model import Group, InputSpec, Step

        found = self._skill(name)
        pending = self._not_allowed({effect: (found.name,) for effect in found.effects})
        if not confirm and pending:
            raise ConfirmationRequired(SKILL_RUN_PREFIX + found.name, pending)
        if not found.is_executable:
            raise InvalidRequestError("skill", f"'{found.name}' is instruction-only: read it "
                                      "with `skillgrove show` and follow it")
        if not found.available:
            raise InvalidRequestError("skill", f"'{found.name}' cannot run here: "
                                      + "; ".join(found.availability.reasons))
        values = _mapping("inputs", inputs)
        check_skill_inputs(found, values)
        # The caller's keys are data: each value reaches the skill through a slot of a name
        # made here (input_0, ...), so no key is ever read as expression text.
        slots = {f"input_{n}": key for n, key in enumerate(values)}
        specs = tuple(InputSpec(slot, _json_type(values[key]), required=True)
                      for slot, key in slots.items())
        step = Step(id=found.name, skill=found.name,
                    with_={key: "${{ inputs.%s }}" % slot  # noqa: UP031
                           for slot, key in slots.items()})
        gid = SKILL_RUN_PREFIX + found.name
        single = Group(id=gid, name=found.name, description=found.description,
                       path=found.skill_file, content_hash=found.content_hash, inputs=specs,
                       steps=(step,), outputs={})
        record: RunRecord = self._runner(on_event, {gid: single}).run(
            gid, {slot: values[key] for slot, key in slots.items()}, {})
        run_step = record.step(found.name)
        outputs = dict(run_step.outputs) if run_step is not None \
            and run_step.status == "success" else dict(record.outputs)
        record = replace(record, inputs=dict(values), outputs=outputs)
        self.run_log.record(record)
        return record

    def get_run(self, run_id: str) -> RunRecord:
        if not isinstance(run_id, str) or not run_id.strip():
            raise InvalidRequestError("run_id", "must be a run id")
        found = self.run_log.get(run_id)
        if found is None:
            raise NotFoundError(f"no run '{run_id}' in {self.run_log.location}",
                                {"kind": "run", "name": run_id})
        return found

    def runs(self, limit: int = 20) -> list[RunRecord]:
        if not isinstance(limit, int) or limit < 1:
            raise InvalidRequestError("limit", "must be a positive integer")
        return self.run_log.list(limit)

    # -- injection -----------------------------------------------------------------------------

    def inject(self, request: str | None = None, *, run_id: str | None = None,
               context: RequestContext | Mapping[str, Any] | None = None,
               budget: int | None = None, fmt: Format = "markdown",
               steps: Sequence[str] = ()) -> Injection:
        """The context block for the agent: for a request, a run, or both. ``steps``: step
        ids (or ``step.output``) of the run whose outputs to show beside the group's."""
        run = self.get_run(run_id) if run_id else None
        if request is None or not str(request).strip():
            if run is None:
                raise InvalidRequestError("request", "give a request or a run id")
            request = run.request or self._run_request(run)
        self._check_injection(budget, fmt)
        toolbox = self.search(request, context)
        return self._injection(toolbox, run, budget, fmt, steps)

    def _run_request(self, run: RunRecord) -> str:
        group = self.library.groups.get(run.group)
        return group.description if group is not None else run.group

    @staticmethod
    def _check_injection(budget: int | None, fmt: str) -> None:
        problem = budget_problem(budget)
        if problem is not None:
            raise InvalidRequestError("budget", problem)
        if fmt not in ("markdown", "xml"):
            raise InvalidRequestError("format", "must be markdown or xml")

    def _injection(self, toolbox: Toolbox, run: RunRecord | None, budget: int | None,
                   fmt: str, steps: Sequence[str] = (), state: str | None = None) -> Injection:
        """The block within ``budget``; a budget too small for its smallest form raises
        :class:`~skillgrove.runtime.inject.BudgetError`. ``state``: why the chosen group did
        not run, stated in the block."""
        from skillgrove.runtime.inject import build_injection

        self._check_injection(budget, fmt)
        return build_injection(toolbox, self.library.catalog.by_id(), run, budget=budget,
                               fmt=fmt, steps=steps, state=state)  # type: ignore[arg-type]

    def ask(self, request: str, context: RequestContext | Mapping[str, Any] | None = None,
            inputs: Mapping[str, Any] | None = None, *, budget: int | None = None,
            fmt: Format = "markdown", on_event: EventCallback | None = None,
            confirm: bool = False, plan_only: bool = False) -> Answer:
        """The main job: search, run the chosen group when the context makes it ready (else
        fall back to single skills), and build the context block.

        A group with side effects (sending mail, writing the user's files, ...) runs only with
        ``confirm=True`` or when ``allow_effects`` covers them; otherwise the answer carries
        its plan and ``needs_confirmation``, and nothing runs. ``plan_only``: never run."""
        self._check_injection(budget, fmt)  # before anything runs
        ctx = self.context(context)
        given = _mapping("inputs", inputs)
        # Inputs given outright count as known values: a group they complete is ready.
        toolbox = self.search(request, replace(ctx, values={**ctx.values, **given})
                              if given else ctx)
        run = None
        plan = None
        pending: dict[str, tuple[str, ...]] = {}
        notes: list[str] = []
        state: str | None = None
        choice = toolbox.group
        unknown = choice is not None and choice.id.removeprefix("group:") not in \
            self.library.groups
        if choice is not None and unknown:
            # An index built from other folders that nothing re-indexed yet (a server between
            # a change and its re-index): say so, rather than fail on a group we cannot run.
            notes.append(f"group '{choice.id.removeprefix('group:')}' is in the index but not "
                         f"among the valid groups of {', '.join(map(str, self.paths))}; not run "
                         "(re-index the library)")
        elif choice is not None and choice.ready:
            group = self.group(choice.id)
            declared = {spec.name for spec in group.inputs}
            values = {k: v for k, v in ctx.values.items() if k in declared}
            values.update(given)
            pending = {} if confirm else self.unconfirmed_effects(group.id)
            if plan_only or pending:
                plan = self.plan(group.id, values, ctx)
                if plan_only:
                    notes.append(f"group '{choice.name}' planned, not run (plan only)")
                    state = "planned, not run (plan only)"
                    pending = {}
                else:
                    listed = "; ".join(f"{effect} ({', '.join(names)})"
                                       for effect, names in pending.items())
                    notes.append(f"group '{choice.name}' needs confirmation before it runs: "
                                 f"{listed}; not run (confirm with --yes)")
                    state = (f"planned, not run: needs confirmation for {listed}; ask the "
                             "user, then run it confirmed")
            else:
                run = self._runner(on_event).run(group.id, values, dict(ctx.values),
                                                 request=request)
        elif choice is not None:
            notes.append(f"group '{choice.name}' needs input: "
                         f"{', '.join(choice.missing_inputs)} (pass them as inputs or in the "
                         "context values); not run")
            state = f"not run: needs input {', '.join(choice.missing_inputs)}"
        return Answer(toolbox, run, self._injection(toolbox, run, budget, fmt, state=state),
                      tuple(notes), plan, pending)

    # -- watching ------------------------------------------------------------------------------

    def on_change(self, listener: Callable[[Library], None]) -> None:
        """Call ``listener(library)`` after every re-index (servers announce changes)."""
        self._listeners.append(listener)

    def refresh(self) -> IndexResult | None:
        """Re-index if the library's files changed; errors are kept for :meth:`health`."""
        try:
            if self.stale():
                return self.index()
            self._follow_the_store()
        except Exception as exc:  # a server keeps serving the last good index
            self._last_error = f"{type(exc).__name__}: {exc}"
            self.log(f"re-index failed: {self._last_error}")
        return None

    def watch(self, stop: threading.Event | None = None) -> Watcher:
        """Watch the library folders and re-index changes as they happen (within about a
        second); returns the running :class:`Watcher`."""
        self.paths  # noqa: B018 - a missing folder is the caller's error, not the thread's
        self.auto_refresh = False
        watcher = Watcher(self, stop or threading.Event())
        watcher.start()
        return watcher

    def close(self) -> None:
        with self._init_lock:
            flush = getattr(self._encoder, "flush", None) if self._encoder_given is None else None
            if flush is not None:  # the encoder made here: its new query vectors, saved once
                flush()
            if self._store is not None:
                self._store.close()
                self._store = None
                self._retriever = None
            if self._run_log is not None:
                self._run_log.close()
                self._run_log = None

    def __enter__(self) -> Skillgrove:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Watcher(threading.Thread):
    """The thread behind :meth:`Skillgrove.watch`: waits for file changes under the library's
    folders (watchfiles), then re-indexes."""

    def __init__(self, engine: Skillgrove, stop: threading.Event) -> None:
        super().__init__(name="skillgrove-watch", daemon=True)
        self.engine = engine
        self.stop_event = stop
        self.ready = threading.Event()

    def run(self) -> None:
        import watchfiles

        roots = [p for p in self.engine._configured_paths()[0] if p.exists()]
        if not roots:
            self.ready.set()
            return
        # The first index runs once the watcher is live (its first yield), so a change made
        # while it runs is not lost: the watcher holds it and yields it next.
        for changes in watchfiles.watch(*roots, stop_event=self.stop_event, debounce=400,
                                        step=50, rust_timeout=500, yield_on_timeout=True,
                                        watch_filter=_library_change):
            if changes or not self.ready.is_set():
                self.engine.refresh()
                self.ready.set()

    def stop(self) -> None:
        self.stop_event.set()


def _library_change(change: Any, path: str) -> bool:
    name = os.path.basename(path)
    return name != ".skill_id" and "__pycache__" not in path and not name.endswith(".pyc")


def _skill_files(skill: Skill) -> list[SkillFile]:
    """The regular files of a skill's folder, without nested skills, links or caches."""
    import hashlib

    from skillgrove.skills.loader import walk_folders

    out: list[SkillFile] = []
    for here, dirnames, filenames in walk_folders(skill.folder, skip=frozenset({"__pycache__"})):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and d != "__pycache__" and not (here / d / "SKILL.md").exists()
                             and not (here / d).is_symlink())
        for name in sorted(filenames):
            full = here / name
            if name.startswith(".") or full.is_symlink() or not full.is_file():
                continue
            if full.stat().st_nlink != 1:
                continue  # another name of a file elsewhere: never listed nor served
            size = full.stat().st_size
            if size > MAX_SKILL_FILE_BYTES:
                continue
            digest = hashlib.sha256(full.read_bytes()).hexdigest()
            out.append(SkillFile(full.relative_to(skill.folder).as_posix(), size, digest))
    return out


_GROUP_ID_LINE = re.compile(r"""^id:[ \t]*["']?([^"'\s#]+)""", re.MULTILINE)


def _declared_group_id(load: GroupLoad) -> str | None:
    """The id a group file declares: the parsed one, else its ``id:`` line (a file that is not
    valid YAML still names its group)."""
    if load.group is not None:
        return load.group.id
    try:
        text = load.path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _GROUP_ID_LINE.search(text)
    return match.group(1) if match else None


def _mapping(name: str, value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequestError(name, "must be an object")
    _within_json_limits(name, value)
    return dict(value)


def _learned_from(rows: Sequence[HistoryRow], library: Library,
                  co_use_from: Sequence[HistoryRow] | None = None,
                  ) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """(co-use from ``co_use_from`` (default: ``rows``), transitions from ``rows``): history
    rows whose skills may be named by id or by name (a name means the skill that answers for
    it)."""
    from skillgrove.graph.learning import co_use_weights, transition_counts
    from skillgrove.runtime.bench import rows_by_id

    together = rows if co_use_from is None else co_use_from
    co_use = co_use_weights(rows_by_id(together, library)) if together else {}
    return co_use, transition_counts(rows_by_id(rows, library)) if rows else {}


def _run_rows(runs: Sequence[Mapping[str, Any]], library: Library) -> list[HistoryRow]:
    """The library's runs as history rows to learn from: each successful run started by a
    request, with the skills it ran (by id, in the order they started) and the edges of its
    group between them."""
    from skillgrove.graph.learning import runs_as_history

    ids = {s.name: s.id for s in library.catalog.active.values()}
    out = []
    for row, run in zip(runs_as_history(runs, ids), runs, strict=True):
        if not (row.request and row.skills and row.succeeded):
            continue
        group = library.groups.get(str(run.get("group")))
        steps = [(ids.get(group.step(a).target), ids.get(group.step(b).target))
                 for a, b in group.edges()] if group is not None else []
        ran = set(row.skills)
        out.append(replace(row, edges=tuple((a, b) for a, b in steps if a in ran and b in ran)))
    return out


def _library_key(library: Library) -> str:
    """What names a library in the run log: its roots, resolved, one per line."""
    return "\n".join(str(Path(root).resolve()) for root in library.roots)


def _within_json_limits(name: str, value: Any) -> None:
    """Values from callers (HTTP bodies, MCP arguments, the Python API) meet the limits of JSON
    a skill may print: what is nested too deeply would break the run log or an expression."""
    from skillgrove.skills.boundedjson import value_problem

    problem = value_problem(value)
    if problem is not None:
        raise InvalidRequestError(name, problem)


def check_skill_inputs(skill: Skill, values: Mapping[str, Any]) -> None:
    """Refuse inputs that do not meet the skill's declared input schema, before anything runs:
    ``inputs.max_pages: 'two' is not of type 'integer'`` (the first problem, by field)."""
    if not skill.inputs:
        return
    from skillgrove.skills.diagnostics import did_you_mean
    from skillgrove.skills.loader import run_time_validator

    schema = {"type": "object", **dict(skill.inputs)}
    errors = sorted(run_time_validator(schema).iter_errors(dict(values)),
                    key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return
    declared = list(skill.inputs.get("properties") or {})
    if any(e.validator == "additionalProperties" and not e.absolute_path for e in errors):
        # An unknown key first: a misspelt input is also why a required one is missing.
        unknown = sorted(set(values) - set(declared))[0]
        guess = did_you_mean(unknown, declared)
        raise InvalidRequestError(f"inputs.{unknown}", f"skill '{skill.name}' has no such "
                                  f"input ({guess or 'inputs: ' + ', '.join(declared)})")
    first = errors[0]
    where = [str(p) for p in first.absolute_path]
    if not where and first.validator == "required":
        where = [str(first.message).split("'")[1]] if "'" in first.message else []
    raise InvalidRequestError(".".join(["inputs", *where]),
                              f"{first.message} (skill '{skill.name}')")


def _json_type(value: Any) -> str:
    """The group input type a given value is declared with (``null`` is taken as a string)."""
    from skillgrove.groups.expressions import type_of
    from skillgrove.groups.model import INPUT_TYPES

    kind = type_of(value)
    return kind if kind in INPUT_TYPES else "string"
