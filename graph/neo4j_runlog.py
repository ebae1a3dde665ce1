"""The run log in Neo4j: every process of a team reads and writes the same runs.

A run is a ``SkillgroveRun`` node and its steps ``SkillgroveStep`` nodes (``graph.cypher``, "the
run log", draws the shapes); inputs, context and outputs are JSON strings, as they are in the
SQLite log, and status, timings and the sandbox flag are properties of their own, so Cypher can
ask for them. Neither label belongs to the graph: a sync or a ``clear`` leaves runs alone.

Recording is one statement in one managed write transaction (the driver retries it on
transient failures): the run node is created or replaced, its old steps removed and the new ones
written, so a reader sees the whole record as it was before or as it is after, never half of
it, and of two processes recording one run at once the last to commit wins whole. Reads are one
round trip each. Failures are the store's :class:`~graph.errors.StoreError`, naming the server.

>>> log = Neo4jStore.from_environment().run_log()      # doctest: +SKIP
>>> log.record(record); log.get(record.id) == record   # doctest: +SKIP
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from skillgrove.graph import cypher
from skillgrove.graph.errors import StoreError
from skillgrove.graph.runlog import RunRecord, StepRecord, portable_record

if TYPE_CHECKING:
    from skillgrove.graph.neo4j_store import Neo4jStore

_JSON_FIELDS = ("inputs", "context", "outputs")
_STEP_JSON_FIELDS = ("inputs", "outputs")


class Neo4jRunLog:
    """The :class:`~graph.runlog.RunLog` Protocol in the database of ``store`` (made by
    :meth:`Neo4jStore.run_log`). Closing it leaves the store's driver open."""

    def __init__(self, store: Neo4jStore) -> None:
        self._store = store
        self.location = f"the run log in Neo4j at {store.uri}"
        store.write_transaction(lambda run: [run(cypher.create_run_constraint()),
                                             run(cypher.create_run_started_index())],
                                "set up the run log's schema")

    def record(self, run: RunRecord) -> None:
        properties, steps = run_properties(run)
        self._store.write_transaction(lambda execute: execute(cypher.write_run(properties, steps)),
                                      f"record run {run.id}")

    def get(self, run_id: str) -> RunRecord | None:
        rows = self._store.read_rows(cypher.read_run(run_id), f"read run {run_id}")
        return self._from_row(rows[0]) if rows else None

    def list(self, limit: int = 20) -> list[RunRecord]:
        rows = self._store.read_rows(cypher.read_runs(limit), "list runs")
        return [self._from_row(row) for row in rows]

    def clear(self) -> None:
        """Deletes every run (the schema stays)."""
        self._store.write_transaction(lambda run: run(cypher.delete_runs()), "clear the run log")

    def close(self) -> None:
        """Nothing to release: the store owns the driver."""

    def _from_row(self, row: Mapping[str, Any]) -> RunRecord:
        try:
            return record_from_properties(row["run"], row["steps"])
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"{self.location} holds a run this version cannot read "
                             f"({type(exc).__name__}: {exc}): delete it or upgrade") from exc


def run_properties(run: RunRecord) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run node's properties and each step node's, as Neo4j stores them: the values are
    first made strict JSON, as the SQLite log writes them (a NaN or a lone surrogate a skill
    printed is replaced), then the maps become JSON strings. The run's None values stay (they
    remove the property, see :func:`graph.cypher.write_run`); a step's are left out (a step
    node is always new)."""
    data = portable_record(run)
    steps = data.pop("steps")
    for key in _JSON_FIELDS:
        data[key] = json.dumps(data[key], ensure_ascii=False)
    step_rows = []
    for order, step in enumerate(steps):
        row = {**step, "order": order}
        for key in _STEP_JSON_FIELDS:
            row[key] = json.dumps(row[key], ensure_ascii=False)
        step_rows.append({k: v for k, v in row.items() if v is not None})
    return data, step_rows


_RUN_FIELDS = frozenset(RunRecord.__dataclass_fields__) - {"steps"}
_STEP_FIELDS = frozenset(StepRecord.__dataclass_fields__)


def record_from_properties(run: Mapping[str, Any],
                           steps: Sequence[Mapping[str, Any]]) -> RunRecord:
    """The inverse of :func:`run_properties`."""
    data = {k: v for k, v in run.items() if k in _RUN_FIELDS}
    for key in _JSON_FIELDS:
        data[key] = json.loads(data.get(key) or "{}")
    ordered = sorted(steps, key=lambda s: int(s["order"]))
    step_records = []
    for step in ordered:
        values = {k: v for k, v in step.items() if k in _STEP_FIELDS}
        for key in _STEP_JSON_FIELDS:
            values[key] = json.loads(values.get(key) or "{}")
        step_records.append(StepRecord(**values))
    return RunRecord(**data, steps=tuple(step_records))
