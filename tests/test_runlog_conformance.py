"""One conformance suite for every RunLog: the SQLite file and the Neo4j run log.

Each test runs on both (the ``neo4j`` parameter against the real server ``.ci/test`` starts;
only runs are deleted before each test, the graph is left alone). A "second process" is a
second log opened on the same place: a new SQLite connection to the file, a new driver to the
server.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from skillgrove.graph.runlog import RunLog, RunRecord, SqliteRunLog, StepRecord

LOGS = ["sqlite", pytest.param("neo4j", marks=pytest.mark.neo4j)]

Opener = Callable[[], RunLog]


@pytest.fixture(params=LOGS)
def open_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the log under test; every log opened is closed at the end."""
    opened: list[tuple[RunLog, object]] = []
    if request.param == "sqlite":
        def opener() -> RunLog:
            log = SqliteRunLog(tmp_path / "runs.sqlite")
            opened.append((log, None))
            return log
    else:
        from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
        from tests.conftest import NEO4J_URI

        def opener() -> RunLog:
            store = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
            log = store.run_log()
            opened.append((log, store))
            return log

        opener().clear()  # type: ignore[attr-defined]
    try:
        yield opener
    finally:
        for log, store in opened:
            log.close()
            if store is not None:
                store.close()  # type: ignore[attr-defined]


def a_run(run_id: str = "run-1", *, started_at: float = 1_000.0, **changes: object) -> RunRecord:
    """A run with every field set, nested values, non-ASCII text and a skipped step."""
    run = RunRecord(
        id=run_id, group="report-analysis", status="failure",
        inputs={"pdf_path": "/data/q3.pdf", "pages": [1, 2, 3], "options": {"ocr": False}},
        context={"team_email": "team@example.org", "name": "Zoë 周报"},
        outputs={"summary": "三个要点", "numbers": {"revenue": 1.5e6, "growth": -0.25}},
        steps=(
            StepRecord("extract", "pdf-to-text", "skill", "success",
                       inputs={"path": "/data/q3.pdf"}, outputs={"text": "Revenue grew."},
                       attempts=1, started_at=started_at + 0.5, seconds=0.25,
                       definition="sha256:abc"),
            StepRecord("mail", "send-email", "skill", "failure", inputs={"to": ["a@x.io"]},
                       error="SMTP_HOST is not set", attempts=3, started_at=started_at + 1.0,
                       seconds=0.1, continued=True, note="re-run: its inputs changed"),
            StepRecord("archive", "zip-files", "skill", "skipped"),
        ),
        started_at=started_at, seconds=1.75, request="summarize the report and mail it",
        resumed_from="run-0", error="step 'mail' failed", run_dir="/idx/runs/run-1",
        library="/lib/a\n/lib/b", sandboxed=True)
    return replace(run, **changes)  # type: ignore[arg-type]


def test_a_run_comes_back_as_it_was_recorded(open_log: Opener) -> None:
    log = open_log()
    run = a_run()
    log.record(run)
    assert log.get("run-1") == run
    assert [s.id for s in log.get("run-1").steps] == ["extract", "mail", "archive"]  # type: ignore[union-attr]


@pytest.mark.parametrize("sandboxed", [True, False, None])
def test_the_sandbox_flag_keeps_its_three_values(open_log: Opener, sandboxed: bool | None) -> None:
    log = open_log()
    log.record(a_run(sandboxed=sandboxed))
    found = log.get("run-1")
    assert found is not None and found.sandboxed is sandboxed


def test_a_minimal_run_keeps_its_empty_and_missing_fields(open_log: Opener) -> None:
    log = open_log()
    run = RunRecord("bare", "skill:echo", "success", {}, {}, {}, (), 5.0, 0.0)
    log.record(run)
    assert log.get("bare") == run


def test_another_process_reads_what_one_recorded(open_log: Opener) -> None:
    open_log().record(a_run())
    assert open_log().get("run-1") == a_run()


def test_an_unknown_id_is_none_and_a_pattern_matches_nothing(open_log: Opener) -> None:
    log = open_log()
    log.record(a_run("run_1"))
    assert log.get("nope") is None
    for pattern in ("run%", "run?1", "run.1", "run_%", ".*", ""):
        assert log.get(pattern) is None, pattern
    assert log.get("run_1") is not None


def test_recording_a_run_again_replaces_it_whole(open_log: Opener) -> None:
    log = open_log()
    log.record(a_run())
    resumed = a_run(status="success", error=None, outputs={"summary": "done"},
                    steps=(StepRecord("extract", "pdf-to-text", "skill", "success",
                                      note="reused from run run-0"),))
    log.record(resumed)
    assert log.get("run-1") == resumed
    assert [r.id for r in log.list()] == ["run-1"]


def test_runs_are_listed_newest_first_up_to_the_limit(open_log: Opener) -> None:
    log = open_log()
    for number, started in enumerate([30.0, 10.0, 50.0, 20.0, 40.0]):
        log.record(a_run(f"r{number}", started_at=started))
    assert [r.id for r in log.list()] == ["r2", "r4", "r0", "r3", "r1"]
    assert [r.id for r in log.list(limit=2)] == ["r2", "r4"]
    assert log.list(limit=0) == []
    assert all(len(r.steps) == 3 for r in log.list())


def test_what_strict_json_cannot_hold_is_replaced_not_lost(open_log: Opener) -> None:
    """A skill may print NaN or a lone surrogate; the record is still written and read back,
    with the same replacements in every log."""
    log = open_log()
    log.record(a_run(outputs={"ratio": math.nan, "text": "a\ud800b", "big": math.inf},
                     error="bad \udcff byte"))
    found = log.get("run-1")
    assert found is not None
    assert dict(found.outputs) == {"ratio": "nan", "text": "a\ufffdb", "big": "inf"}
    assert found.error == "bad \ufffd byte"
    json.dumps(found.to_dict(), allow_nan=False)


def test_runs_recorded_at_once_from_many_threads_are_all_kept(open_log: Opener) -> None:
    log = open_log()
    errors: list[BaseException] = []

    def record(first: int) -> None:
        try:
            for number in range(first, first + 10):
                log.record(a_run(f"t{number:03d}", started_at=float(number)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(start,)) for start in range(0, 80, 10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    listed = log.list(limit=1000)
    assert [r.id for r in listed] == [f"t{n:03d}" for n in reversed(range(80))]
    assert all(r == a_run(r.id, started_at=r.started_at) for r in listed)


def test_two_processes_recording_one_run_at_once_leave_one_whole_record(
        open_log: Opener) -> None:
    """A run recorded again (resumed, say) by two processes at the same moment: what is read
    back is one of the two records, whole, never the steps of both."""
    logs = [open_log(), open_log()]
    versions = [a_run("same", status="failure"),
                a_run("same", status="success", error=None,
                      steps=tuple(replace(s, id=f"{s.id}-again", status="success")
                                  for s in a_run().steps[:2]))]
    for _ in range(10):
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def record(log: RunLog, run: RunRecord, barrier: threading.Barrier = barrier,
                   errors: list[BaseException] = errors) -> None:
            barrier.wait()
            try:
                log.record(run)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=record, args=pair)
                   for pair in zip(logs, versions, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for log in logs:
            assert log.get("same") in versions
            assert [r.id for r in log.list()] == ["same"]


# -- which log the engine uses ----------------------------------------------------------------

def test_an_engine_on_a_store_without_a_log_of_its_own_keeps_runs_in_sqlite(
        tmp_path: Path, encoder: object) -> None:
    """A GraphStore object without a run log (here an in-memory embedded store): runs go to the
    SQLite file beside the index, which indexing does not create when no run was recorded."""
    from skillgrove import Skillgrove
    from skillgrove.graph.embedded import EmbeddedStore
    from tests.helpers import copy_fixture_library

    library = copy_fixture_library(tmp_path / "lib")
    with Skillgrove([library], index=tmp_path / "index", store=EmbeddedStore(None),
                    encoder=encoder) as engine:  # type: ignore[arg-type]
        engine.index()
        assert not (tmp_path / "index" / "runs.sqlite").exists()
        assert isinstance(engine.run_log, SqliteRunLog)
        assert engine.run_log.location == str(tmp_path / "index" / "runs.sqlite")


@pytest.mark.neo4j
def test_an_engine_on_neo4j_keeps_runs_in_neo4j(tmp_path: Path, encoder: object) -> None:
    from skillgrove import Skillgrove
    from skillgrove.graph.neo4j_runlog import Neo4jRunLog
    from skillgrove.graph.neo4j_store import Neo4jConfig, Neo4jStore
    from tests.conftest import NEO4J_URI

    store = Neo4jStore.from_config(Neo4jConfig(uri=NEO4J_URI))
    with Skillgrove(index=tmp_path / "index", store=store,
                    encoder=encoder) as engine:  # type: ignore[arg-type]
        assert isinstance(engine.run_log, Neo4jRunLog)
        engine.run_log.record(a_run("engine-run"))
        assert engine.get_run("engine-run") == a_run("engine-run")
        with pytest.raises(Exception, match="no run 'gone' in the run log in Neo4j at bolt://"):
            engine.get_run("gone")
    assert not (tmp_path / "index" / "runs.sqlite").exists()
