"""The run log: every run's inputs, outputs, timings, and each step's status and error.

Co-use weights and quality statistics are learned from it later; a failed or cancelled run can
be resumed from its record. The embedded run log is a SQLite file next to the index.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol


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

    def step(self, step_id: str) -> StepRecord | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        steps = tuple(StepRecord(**s) for s in data["steps"])
        return cls(**{**data, "steps": steps})


class RunLog(Protocol):
    def record(self, run: RunRecord) -> None: ...

    def get(self, run_id: str) -> RunRecord | None: ...

    def list(self, limit: int = 20) -> list[RunRecord]: ...


class SqliteRunLog:
    def __init__(self, path: Path | None) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS run (id TEXT PRIMARY KEY, grp TEXT, "
                         "status TEXT, started_at REAL, record TEXT)")
        self._lock = threading.Lock()

    def record(self, run: RunRecord) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO run VALUES (?, ?, ?, ?, ?)",
                             (run.id, run.group, run.status, run.started_at,
                              json.dumps(run.to_dict(), ensure_ascii=False, default=str)))

    def get(self, run_id: str) -> RunRecord | None:
        row = self._db.execute("SELECT record FROM run WHERE id = ? OR id LIKE ? "
                               "ORDER BY started_at DESC", (run_id, run_id + "%")).fetchone()
        return None if row is None else RunRecord.from_dict(json.loads(row[0]))

    def list(self, limit: int = 20) -> list[RunRecord]:
        rows = self._db.execute("SELECT record FROM run ORDER BY started_at DESC LIMIT ?",
                                (limit,))
        return [RunRecord.from_dict(json.loads(r[0])) for r in rows]

    def close(self) -> None:
        self._db.close()
