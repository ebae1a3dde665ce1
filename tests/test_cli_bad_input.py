"""Bad files and folders given to the CLI: a damaged run log or index, context files of the
wrong shape, encoding or depth, an index folder that is a file or cannot be written, a file
where a folder is needed. Each gives exactly one line on stderr that names the thing and the
fix, exit code 1, and no traceback. The CLI runs in-process (its ``main``); one case runs as a
real process to read its stderr as a person would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.graph.runlog import RunRecord, SqliteRunLog
from tests.helpers import copy_fixture_library

HOSTILE = Path(__file__).resolve().parent / "hostile" / "storage"
NOT_SQLITE = HOSTILE / "runs-not-sqlite.sqlite"
LATIN1_CONTEXT = HOSTILE / "context-latin1.json"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the CLI in-process: (exit code, stderr); an escaping exception fails the test."""
    from skillgrove.runtime.cli import main

    out = StringIO()
    code = main(list(args), out)
    err = capsys.readouterr().err
    assert "Traceback" not in out.getvalue() + err
    return code, err


def one_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, err = cli(capsys, *args)
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("skillgrove: "), err
    return err.removeprefix("skillgrove: ").rstrip("\n")


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return copy_fixture_library(tmp_path / "library")


# -- a damaged run log or index ---------------------------------------------------------------

RUN_LOG_COMMANDS = [
    pytest.param(["runs"], id="runs"),
    pytest.param(["runs", "show", "abc"], id="runs-show"),
    pytest.param(["run", "report-analysis", "--input", "pdf_path=x.pdf", "--library", "{lib}"],
                 id="run"),
    pytest.param(["index", "{lib}", "-q"], id="index"),
]


def _args(command: list[str], library: Path, index: Path) -> list[str]:
    return [part.replace("{lib}", str(library)) for part in command] + ["--index", str(index)]


@pytest.mark.parametrize("command", RUN_LOG_COMMANDS)
def test_a_run_log_that_is_not_sqlite(command: list[str], library: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    index.mkdir()
    shutil.copy(NOT_SQLITE, index / "runs.sqlite")
    assert one_line(capsys, *_args(command, library, index)) == (
        f"the run log {index}/runs.sqlite is not a SQLite database: move it aside (a new one "
        "is started) and run again")


def test_after_moving_the_run_log_aside_the_command_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    index.mkdir()
    shutil.copy(NOT_SQLITE, index / "runs.sqlite")
    assert cli(capsys, "runs", "--index", str(index))[0] == 1
    (index / "runs.sqlite").rename(index / "runs.sqlite.broken")
    assert cli(capsys, "runs", "--index", str(index)) == (0, "")


def test_a_truncated_run_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    log = SqliteRunLog(index / "runs.sqlite")
    for number in range(200):
        log.record(RunRecord(f"run{number:04d}", "g", "success", {"text": "x" * 2000}, {}, {},
                             (), float(number), 0.1))
    log.close()
    path = index / "runs.sqlite"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for command in (["runs"], ["runs", "show", "run0001"]):
        assert one_line(capsys, *command, "--index", str(index)) == (
            f"the run log {path} cannot be read (database disk image is malformed): move it "
            "aside (a new one is started) and run again")


def test_a_run_record_this_version_cannot_read(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    SqliteRunLog(index / "runs.sqlite").close()
    import sqlite3

    with sqlite3.connect(index / "runs.sqlite") as db:
        db.execute("INSERT INTO run VALUES ('r1', 'g', 'success', 1.0, '{\"id\": \"r1\"}')")
    assert one_line(capsys, "runs", "--index", str(index)).startswith(
        f"the run log {index}/runs.sqlite holds a record this version cannot read (KeyError: ")


def test_an_index_that_is_not_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    index.mkdir()
    shutil.copy(NOT_SQLITE, index / "graph.sqlite")
    assert one_line(capsys, "search", "summarize a pdf", "--index", str(index)) == (
        f"the index {index}/graph.sqlite is not a SQLite database: move it aside and run "
        "`skillgrove index` to rebuild it")


def test_a_real_process_prints_one_line(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    index.mkdir()
    shutil.copy(NOT_SQLITE, index / "runs.sqlite")
    result = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "runs", "--index",
                             str(index)], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"skillgrove: the run log {index}/runs.sqlite is not a SQLite "
                             "database: move it aside (a new one is started) and run again\n")


# -- context files ----------------------------------------------------------------------------

DEEP = '{"values": {"x": ' + "[" * 100 + "]" * 100 + "}}"
DEEPER_THAN_THE_PARSER = '{"values": ' + "[" * 100_000 + "]" * 100_000 + "}"

CONTEXTS = [
    ('{"values": 5}', "context.values: must be an object (got integer)"),
    ('{"values": ["a"]}', "context.values: must be an object (got array)"),
    ('{"recent_skills": 5}', "context.recent_skills: must be a list of strings (got integer)"),
    ('{"recent_skills": "pdf-to-text"}',
     "context.recent_skills: must be a list of strings (got string)"),
    ('{"recent_skills": ["pdf-to-text", {"name": "x"}]}',
     "context.recent_skills[1]: must be a string (got object)"),
    ('{"recent_skills": [["pdf-to-text"]]}',
     "context.recent_skills[0]: must be a string (got array)"),
    ('{"conversation": "hello"}', "context.conversation: must be a list of strings (got string)"),
    ('{"conversation": ["send it to the team", 3]}',
     "context.conversation[1]: must be a string (got integer)"),
    ('{"conversation": [{"role": "user", "content": "hi"}]}',
     "context.conversation[0]: must be a string (got object)"),
    ('{"team_email": "team@example.com"}',
     'context.team_email: unknown field: a context is {values, recent_skills, conversation}; '
     'put what you know under values: {"values": {"team_email": ...}}'),
    ('{"value": {"pdf_path": "q3.pdf"}}', "context.value: unknown field (did you mean 'values'?)"),
    ("[1, 2]", "context must be a JSON object"),
    (DEEP, "context is nested more than 64 levels deep (objects and lists): flatten it"),
    (DEEPER_THAN_THE_PARSER,
     "context is nested more than 64 levels deep (objects and lists): flatten it"),
]


@pytest.mark.parametrize(("text", "message"), CONTEXTS,
                         ids=[m.split(":")[0] + f"-{i}" for i, (_, m) in enumerate(CONTEXTS)])
@pytest.mark.parametrize("command", [["search", "summarize the pdf"],
                                     ["run", "report-analysis", "--input", "pdf_path=x.pdf"]],
                         ids=["search", "run"])
def test_a_context_file_of_the_wrong_shape(command: list[str], text: str, message: str,
                                           library: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "context.json"
    path.write_text(text, encoding="utf-8")
    args = [*command, "--context", str(path), "--index", str(tmp_path / "idx")]
    if command[0] == "run":
        args += ["--library", str(library)]
    assert one_line(capsys, *args) == f"{path}: {message}"


@pytest.mark.parametrize("command", [
    ["plan", "report-analysis", "--input", "pdf_path=x.pdf", "--library", "{lib}"],
    ["run", "report-analysis", "--dry-run", "--library", "{lib}"],
    ["ask", "summarize the quarterly report PDF and email it to my team", "--yes"],
    ["inject", "summarize the quarterly report PDF"],
    ["compose", "count the words of this text"],
], ids=["plan", "run-dry-run", "ask", "inject", "compose"])
def test_every_command_refuses_a_flat_context_naming_the_key(
        command: list[str], library: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "context.json"
    path.write_text(json.dumps({"team_email": "team@example.com", "pdf_path": "q3.pdf"}))
    args = [part.replace("{lib}", str(library)) for part in command]
    assert one_line(capsys, *args, "--context", str(path), "--index", str(tmp_path / "idx")) \
        == (f'{path}: context.team_email: unknown field: a context is {{values, recent_skills, '
            'conversation}; put what you know under values: {"values": {"team_email": ...}}')


def test_the_values_shape_reaches_the_plan(library: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from skillgrove.runtime.cli import main

    path = tmp_path / "context.json"
    path.write_text(json.dumps({"values": {"team_email": "team@example.com",
                                           "report_name": "Q3"},
                                "recent_skills": ["pdf-to-text"]}))
    out = StringIO()
    assert main(["plan", "report-analysis", "--input", "pdf_path=x.pdf", "--library",
                 str(library), "--context", str(path), "--index", str(tmp_path / "idx"),
                 "--json"], out) == 0, capsys.readouterr().err
    notify = next(s for s in json.loads(out.getvalue())["steps"] if s["id"] == "notify")
    assert notify["skip_reason"] is None and notify["inputs"]["to"] == "team@example.com"


def test_a_context_file_in_latin1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offset = LATIN1_CONTEXT.read_bytes().index(b"\xe7")
    assert one_line(capsys, "search", "summarize the pdf", "--context", str(LATIN1_CONTEXT),
                    "--index", str(tmp_path / "idx")) == (
        f"{LATIN1_CONTEXT}: context is not UTF-8 (byte 0xe7 at offset {offset}): save the file "
        "as UTF-8")


def test_a_context_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from skillgrove.runtime.commands import load_context

    path = tmp_path / "context.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"values": {"a": 1}}).encode())
    assert dict(load_context(path).values) == {"a": 1}


# -- the index folder -------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["index", "-q"], ["search", "summarize the pdf"], ["runs"],
                                     ["run-skill", "text-statistics", "--input", "text=hi"]],
                         ids=["index", "search", "runs", "run-skill"])
def test_an_index_that_is_a_file(command: list[str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    assert one_line(capsys, *command, "--index", str(file)) == (
        f"--index {file} is a file, not a folder: give a folder for the index (it is created "
        "when missing)")
    assert one_line(capsys, *command, "--index", str(file / "idx")) == (
        f"--index {file}/idx cannot be created: {file} is a file; give a folder for the index")
    assert file.read_text() == "mine\n"


def test_an_index_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine\n")
    monkeypatch.setenv("SKILLGROVE_INDEX", str(file))
    assert one_line(capsys, "runs") == (
        f"the index folder {file} ($SKILLGROVE_INDEX) is a file, not a folder: give a folder "
        "for the index (it is created when missing)")


def test_an_index_that_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root may write anywhere: let the check see what a user would
        real_access = os.access

        def access(path: object, mode: int, **kwargs: object) -> bool:
            if Path(str(path)) == locked and mode & os.W_OK:
                return False
            return real_access(path, mode, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
    try:
        assert one_line(capsys, "runs", "--index", str(locked)) == (
            f"--index {locked} is not writable: give a folder you can write to, or change its "
            "permissions")
        assert one_line(capsys, "runs", "--index", str(locked / "idx")) == (
            f"--index {locked}/idx is not writable ({locked} is not writable): give a folder "
            "you can write to, or change its permissions")
    finally:
        locked.chmod(0o755)
    assert list(locked.iterdir()) == []


# -- groups suggest --out ---------------------------------------------------------------------

def test_groups_suggest_out_must_be_a_folder(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "drafts.yaml"
    file.write_text("mine\n")
    assert one_line(capsys, "groups", "suggest", "--out", str(file), "--index",
                    str(tmp_path / "idx")) == (
        f"--out {file} is a file: it must be a folder (one YAML file is written into it per "
        "draft group)")
    assert file.read_text() == "mine\n"
    assert not (tmp_path / "idx").exists()
