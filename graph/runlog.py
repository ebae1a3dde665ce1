"""The run log: every run's inputs, outputs, timings, and each step's status and error.

Co-use weights and quality statistics are learned from it later; a failed or cancelled run can
be resumed from its record. The embedded run log is a SQLite file next to the index.

Run records hold what the caller passed (inputs, context values: addresses, tokens), so the file
and SQLite's journal files beside it are readable by their owner only (0600), in a folder only
the owner can enter (0700), whatever the umask. A file that is not a run log (damaged, or
something else under that name) is a :class:`~graph.errors.StoreError` saying to move it aside.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillgrove.graph.errors import StoreError
from skillgrove.skills.boundedjson import keepable

PRIVATE_FOLDER = 0o700
PRIVATE_FILE = 0o600
_SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")
"""The files SQLite keeps beside a database; it gives them the database file's mode."""


def make_private_folder(path: Path, *, ours: bool = False) -> Path:
    """Creates ``path`` and its missing parents, each owner-only. A folder that exists keeps
    its mode unless it is ``ours`` (``runs/``; never a folder a user named, which may be
    shared)."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    if not missing and not path.is_dir():
        raise StoreError(f"{path} is a file, not a folder: give a folder for the index (it is "
                         "created when missing)")
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)
            _restrict(folder, PRIVATE_FOLDER)  # mkdir's mode passes through the umask
    except OSError as exc:
        raise StoreError(f"cannot create the folder {path}: {exc.strerror}: give a folder "
                         "you can write to") from exc
    if ours and not missing:
        _restrict(path, PRIVATE_FOLDER)
    return path


def _restrict(path: Path, mode: int) -> None:
    """Narrows the mode of a file or folder we made; one we may not change is left as it is
    (its owner decides)."""
    try:
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)
    except OSError:
        pass


@dataclass(frozen=True)
class StepRecord:
    id: str
    target: str
    kind: str
    status: str
    """success, failure, skipped, cancelled, or pending (never started)."""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    attempts: int = 0
    started_at: float | None = None
    seconds: float | None = None
    continued: bool = False
    """Failed, but the step had continue_on_error, so the run went on."""
    definition: str | None = None
    """A digest of what the step runs (its entry in the group file, the skill's SKILL.md and
    entrypoint file, or the sub-group's file): a resumed run re-runs a step whose digest
    changed."""
    note: str | None = None
    """What a resumed run did with the step: ``reused from run X``, or why it ran again."""


@dataclass(frozen=True)
class RunRecord:
    id: str
    group: str
    status: str
    """success, failure, or cancelled (interrupted: a signal, or the caller's cancel; it can be
    resumed like a failed run)."""
    inputs: Mapping[str, Any]
    context: Mapping[str, Any]
    outputs: Mapping[str, Any]
    steps: tuple[StepRecord, ...]
    started_at: float
    seconds: float
    request: str | None = None
    resumed_from: str | None = None
    error: str | None = None
    run_dir: str | None = None
    """The run's own folder, where its steps write their files (``<index>/runs/<run id>``; a
    resumed run keeps the folder of the run it resumes, so earlier outputs are still there)."""
    library: str | None = None
    """The library the run came from (its roots, one per line): an index mines the statistics
    and companions of its own library's runs only (None: recorded before this was kept)."""
    sandboxed: bool | None = None
    """Whether its skill processes ran in the operating-system sandbox (False: the sandbox was
    turned off; None: recorded before this was kept, or run by an executor without one)."""

    def step(self, step_id: str) -> StepRecord | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        steps = tuple(StepRecord(**s) for s in data["steps"])
        return cls(**{**data, "steps": steps})


def _strict_json(record: dict[str, Any]) -> str:
    """The record as strict JSON that encodes as UTF-8, whatever a skill printed or a caller
    sent: a lone surrogate or a NaN is replaced (see ``boundedjson.keepable``) rather than
    written into a record no reader could read back."""
    try:
        text = json.dumps(record, ensure_ascii=False, allow_nan=False, default=str)
        text.encode("utf-8")
        return text
    except (ValueError, UnicodeEncodeError):
        return json.dumps(keepable(record), ensure_ascii=False, allow_nan=False, default=str)


def portable_record(run: RunRecord) -> dict[str, Any]:
    """``run.to_dict()`` as every run log keeps it: strict JSON values (see
    :func:`_strict_json`), so the SQLite and the Neo4j logs give back the same record."""
    loaded: dict[str, Any] = json.loads(_strict_json(run.to_dict()))
    return loaded


class RunLog(Protocol):
    """Where runs are kept: :class:`SqliteRunLog` (a file beside the index) or
    :class:`~graph.neo4j_runlog.Neo4jRunLog` (the team's Neo4j). Both pass
    ``tests/test_runlog_conformance.py``. ``record`` replaces a run of the same id whole;
    ``list`` is newest first (by ``started_at``)."""

    location: str
    """Where the log is, as a message may name it."""

    def record(self, run: RunRecord) -> None: ...

    def get(self, run_id: str) -> RunRecord | None: ...

    def list(self, limit: int = 20) -> list[RunRecord]: ...

    def close(self) -> None: ...


class SqliteRunLog:
    """``SqliteRunLog(Path(".skillgrove/runs.sqlite"))``; ``SqliteRunLog(None)`` is in memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.location = str(path) if path is not None else "the run log in memory"
        if path is not None:
            make_private_folder(path.parent)
            _create_private(path)
        self._lock = threading.Lock()
        with self._errors():
            self._db = sqlite3.connect(str(path) if path else ":memory:",
                                       check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, grp TEXT, "
                             "status TEXT, started_at REAL, record TEXT)")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's and decoding errors as one StoreError naming the file and what to do."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            what = ("is not a SQLite database" if "not a database" in str(exc)
                    else f"cannot be read ({exc})")
            raise StoreError(f"the run log {self.path} {what}: move it aside (a new one is "
                             "started) and run again") from exc
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"the run log {self.path} holds a record this version cannot read "
                             f"({type(exc).__name__}: {exc}): move it aside (a new one is "
                             "started) and run again") from exc

    def record(self, run: RunRecord) -> None:
        with self._lock, self._errors(), self._db:
            self._db.execute("INSERT OR REPLACE INTO run VALUES (?, ?, ?, ?, ?)",
                             (run.id, run.group, run.status, run.started_at,
                              _strict_json(run.to_dict())))

    def get(self, run_id: str) -> RunRecord | None:
        with self._errors():
            # Exactly the id: a pattern (``%``, ``_``) must not answer with another run.
            row = self._db.execute("SELECT record FROM run WHERE id = ?", (run_id,)).fetchone()
            return None if row is None else RunRecord.from_dict(json.loads(row[0]))

    def list(self, limit: int = 20) -> list[RunRecord]:
        with self._errors():
            rows = self._db.execute("SELECT record FROM run ORDER BY started_at DESC, id DESC "
                                    "LIMIT ?", (limit,)).fetchall()
            return [RunRecord.from_dict(json.loads(r[0])) for r in rows]

    def close(self) -> None:
        self._db.close()


def _create_private(path: Path) -> None:
    """Creates the database file owner-only before SQLite opens it (SQLite would create it with
    the umask's mode, and its journal files with the same), and narrows one made before."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE))
    except IsADirectoryError as exc:
        raise StoreError(f"the run log {path} is a folder: move it aside") from exc
    except OSError as exc:
        raise StoreError(f"cannot open the run log {path}: {exc.strerror}: give an index "
                         "folder you can write to") from exc
    for name in ("", *_SQLITE_COMPANIONS):
        companion = path.with_name(path.name + name)
        if companion.exists():
            _restrict(companion, PRIVATE_FILE)
