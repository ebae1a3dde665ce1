"""Errors a person can act on: each mistake below gives one line on stderr that says where and
what to do, and an exit code; never a traceback. Most run the real CLI in-process (its
``main``); the closed-pipe cases need a process of their own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from skillgrove import Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.runtime.errors import NotFoundError
from tests.helpers import copy_fixture_library, write_group, write_skill

SALES_SNAPSHOT = """
    id: sales-snapshot
    description: Summarize the weekly sales snapshot text for the sales team.
    examples: [summarize this week's sales snapshot]
    inputs:
      text: {type: string, required: true}
    steps:
      - id: summary
        skill: summarize-text
        with: {text: "${{ inputs.text }}"}
    """

WORD_COUNT = """
    ---
    name: word-count
    description: Count the words of a text.
    entrypoint: {python: "main.py:run"}
    inputs:
      properties:
        text: {type: string}
      required: [text]
    outputs:
      properties:
        words: {type: integer}
    ---
    Counts whitespace-separated words.
    """


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr), with no traceback anywhere."""
    from skillgrove.runtime.cli import main

    out = StringIO()
    code = main(list(args), out)
    err = capsys.readouterr().err
    assert "Traceback" not in out.getvalue() + err
    return code, out.getvalue(), err


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("SKILLGROVE_PATH", raising=False)


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return copy_fixture_library(tmp_path / "lib")


@pytest.fixture
def extra(tmp_path: Path) -> Path:
    """A second library folder whose one group uses a skill of the first."""
    root = tmp_path / "extra"
    write_group(root, "sales-snapshot.yaml", SALES_SNAPSHOT)
    return root


# -- 1. an index built from more folders than the command was given ---------------------------


def test_ask_with_fewer_folders_than_the_index_says_so_and_reindexes(
        library: Path, extra: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "idx"
    code, _, err = cli(capsys, "index", str(library), str(extra), "--index", str(index), "-q")
    assert code == 0, err
    code, text, err = cli(capsys, "ask", "summarize this week's sales snapshot", "--library",
                          str(library), "--index", str(index))
    assert code == 0, err
    assert (f"skillgrove: the index in {index} was built from {library}, {extra}: re-indexing "
            f"it from {library}") in err.splitlines()
    assert "sales-snapshot" not in text


def test_a_library_given_relative_is_the_same_library_from_any_folder(
        library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The index records the folders it was built from: a relative spelling is recorded as the
    folder it names, so the index serves it from elsewhere and the absolute spelling of the same
    folder does not re-index it."""
    index = tmp_path / "idx"
    monkeypatch.chdir(library.parent)
    code, _, err = cli(capsys, "index", library.name, "--index", str(index), "-q")
    assert code == 0, err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for given in ([], ["--library", str(library)]):
        code, text, err = cli(capsys, "search", "summarize this text", "--index", str(index),
                              *given)
        assert code == 0, err
        assert "re-indexing" not in err and "no such folder" not in err
        assert "summarize" in text


def test_ask_on_an_index_that_holds_a_group_the_library_lacks_does_not_run_it(
        library: Path, extra: Path, tmp_path: Path, encoder: CachedEncoder) -> None:
    """A server between a change and its re-index: the index still chooses the group."""
    index = tmp_path / "idx"
    Skillgrove([library, extra], index=index, encoder=encoder).index()
    engine = Skillgrove([library], index=index, encoder=encoder, auto_refresh=False)
    answer = engine.ask("summarize this week's sales snapshot", {"values": {"text": "Up 4%."}})
    assert answer.toolbox.group is not None and answer.toolbox.group.id == "group:sales-snapshot"
    assert answer.run is None
    assert answer.notes == (f"group 'sales-snapshot' is in the index but not among the valid "
                            f"groups of {library}; not run (re-index the library)",)


# -- 2. the reader of the output goes away (`| head`) ----------------------------------------


@pytest.fixture
def indexed(library: Path, tmp_path: Path, encoder: CachedEncoder) -> Path:
    """An index of the library, with two runs in its run log."""
    skill = write_skill(library / "skills", "word-count", WORD_COUNT)
    (skill.parent / "main.py").write_text("def run(text):\n    return {'words': len(text.split())}\n")
    engine = Skillgrove([library], index=tmp_path / "idx", encoder=encoder)
    for text in ("one two", "three four five"):
        assert engine.run_skill("word-count", {"text": text}).status == "success"
    engine.index()
    engine.close()
    return tmp_path / "idx"


@pytest.mark.parametrize("command", [
    ["runs"],
    ["graph", "neighbors", "summarize-text"],
    ["search", "make the weekly KPI report from this CSV", "--json"],
], ids=["runs", "graph neighbors", "search --json"])
def test_a_closed_pipe_ends_the_command_quietly(indexed: Path, command: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first line is written
    try:
        result = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", *command,
                                 "--index", str(indexed)], stdout=writer,
                                stderr=subprocess.PIPE, text=True, timeout=300, check=False,
                                env={**os.environ, "HF_HUB_OFFLINE": "1"})
    finally:
        os.close(writer)
    assert result.stderr == ""
    assert result.returncode == 141  # 128 + SIGPIPE, what the shell reports for git


# -- 3. a group that exists but has errors --------------------------------------------------


def test_running_a_group_with_errors_names_them_and_the_check_command(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_group(library, "all-mistakes.yaml", """
        id: all-mistakes
        examples: [make mistakes]
        stepz: 1
        steps:
          - id: a
            skill: summarise-text
            timeout: soon
          - id: b
            skill: summarize-text
            needs: [zz]
            with: {text: t, lenght: 3}
        """)
    code, _, err = cli(capsys, "run", "all-mistakes", "--library", str(library), "--index",
                       str(tmp_path / "idx"))
    assert code == 1
    assert err == (f"skillgrove: group 'all-mistakes' has 4 errors and cannot run; the first: "
                   f"{path}:1:1: 'description' is required; `skillgrove check {library}` lists "
                   "them all\n")


def test_a_group_that_parses_but_does_not_validate(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_group(library, "half-right.yaml", """
        id: half-right
        description: d
        examples: [e]
        steps:
          - id: a
            skill: summarise-text
            with: {text: t}
        """)
    code, _, err = cli(capsys, "plan", "half-right", "--library", str(library), "--index",
                       str(tmp_path / "idx"))
    assert code == 1
    assert err == (f"skillgrove: group 'half-right' has 1 error and cannot run; the first: "
                   f"{path}:6:12: steps[0].skill: unknown skill 'summarise-text' (did you mean "
                   f"'summarize-text'?); `skillgrove check {library}` lists them all\n")


# -- 4. a library folder that does not exist ------------------------------------------------


def test_a_missing_library_folder_is_an_error(library: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    code, _, err = cli(capsys, "plan", "kpi-report", "--input", "csv_path=x.csv", "--library",
                       str(library), "--library", str(missing), "--index", str(tmp_path / "idx"))
    assert (code, err) == (1, f"skillgrove: no such folder: {missing}\n")


def test_a_missing_folder_in_skillgrove_path_is_an_error(
        library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    monkeypatch.setenv("SKILLGROVE_PATH", f"{library}{os.pathsep}{missing}")
    code, _, err = cli(capsys, "plan", "kpi-report", "--input", "csv_path=x.csv", "--index",
                       str(tmp_path / "idx"))
    assert (code, err) == (1, f"skillgrove: no such folder: {missing} (in $SKILLGROVE_PATH)\n")


def test_an_indexed_folder_that_is_gone_is_an_error(
        tmp_path: Path, encoder: CachedEncoder, capsys: pytest.CaptureFixture[str]) -> None:
    gone = copy_fixture_library(tmp_path / "gone")
    index = tmp_path / "idx"
    Skillgrove([gone], index=index, encoder=encoder).index()
    shutil.rmtree(gone)
    code, _, err = cli(capsys, "plan", "kpi-report", "--input", "csv_path=x.csv", "--index",
                       str(index))
    assert (code, err) == (1, f"skillgrove: no such folder: {gone} (the index in {index} was "
                              "built from it: give the library folders, or index the ones you "
                              "have)\n")


# -- 5. folders joined with os.pathsep ------------------------------------------------------


def test_library_folders_joined_with_pathsep_are_split(
        library: Path, extra: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    joined = f"{library}{os.pathsep}{extra}"
    code, text, err = cli(capsys, "plan", "sales-snapshot", "--input", "text=Up 4%.",
                          "--library", joined, "--index", str(tmp_path / "idx"))
    assert code == 0, err
    assert text.startswith("group sales-snapshot\n")
    code, text, _ = cli(capsys, "check", joined)
    assert code == 0 and "3 group files: 3 valid" in text


# -- 6. did you mean ------------------------------------------------------------------------


def test_a_mistyped_group_with_errors_is_suggested(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_group(library, "all-mistakes.yaml", "id: all-mistakes\nsteps: []\n")
    code, _, err = cli(capsys, "run", "all-mistake", "--library", str(library), "--index",
                       str(tmp_path / "idx"))
    assert (code, err) == (1, "skillgrove: no group 'all-mistake' (did you mean "
                              "'all-mistakes'?)\n")


def test_index_lookups_suggest_skills_and_groups_not_their_examples(
        library: Path, tmp_path: Path, encoder: CachedEncoder) -> None:
    engine = Skillgrove([library], index=tmp_path / "idx", encoder=encoder)
    with pytest.raises(NotFoundError) as group:
        engine.export("kpi-reprot")
    assert str(group.value) == ("no skill or group 'kpi-reprot' in the index (did you mean "
                                "'kpi-report'?)")
    with pytest.raises(NotFoundError) as skill:
        engine.neighbors("sumarize-text")
    assert str(skill.value) == ("no skill or group 'sumarize-text' in the index (did you mean "
                                "'summarize-text'?)")


def test_a_rejected_skill_says_why_and_is_suggested(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_skill(library / "skills", "bad-skill",
                       "---\nname: bad-skill\ndescription: x: y\n---\nDoes nothing.\n")
    index = ["--library", str(library), "--index", str(tmp_path / "idx")]
    code, _, err = cli(capsys, "show", "bad-skill", *index)
    assert (code, err) == (1, f"skillgrove: skill 'bad-skill' has 1 error and cannot be used; "
                              f"the first: {path}:3:15: frontmatter is not valid YAML: mapping "
                              "values are not allowed in this context (a value containing ': ' "
                              "must be quoted, e.g. description: \"Use when: ...\"); "
                              f"`skillgrove check {library}` lists them all\n")
    code, _, err = cli(capsys, "run-skill", "bad-skil", *index)
    assert (code, err) == (1, "skillgrove: no skill 'bad-skil' (did you mean 'bad-skill'?)\n")
