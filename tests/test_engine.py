"""The engine object every interface calls: the Python API, freshness, last good versions,
searches during a re-index, and watching a library."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from skillgrove import Skillgrove
from skillgrove.graph.embeddings import CachedEncoder
from skillgrove.runtime.errors import InvalidRequestError, NotFoundError
from tests.helpers import copy_fixture_library, write_group, write_skill

REPO = Path(__file__).resolve().parents[1]

WORD_COUNT = """
    ---
    name: word-count
    description: Count the words of a text.
    entrypoint: {python: "main.py:run"}
    inputs:
      properties:
        text: {type: string, description: The text to count}
      required: [text]
    outputs:
      properties:
        words: {type: integer}
    ---
    Counts whitespace-separated words.
    """

TRANSLATE_TWICE = """
    id: translate-twice
    description: Translate a text into German, then the German back into English.
    examples: [translate this to german and back again]
    inputs:
      text: {type: string, required: true}
    steps:
      - id: there
        skill: translate-text
        with: {text: "${{ inputs.text }}", language: German}
      - id: back
        skill: translate-text
        needs: [there]
        with: {text: "${{ steps.there.outputs.translation }}", language: English}
    """


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = copy_fixture_library(tmp_path / "lib")
    skill = write_skill(root / "skills", "word-count", WORD_COUNT)
    (skill.parent / "main.py").write_text("def run(text):\n    return {'words': len(text.split())}\n")
    return root


@pytest.fixture
def engine(library: Path, tmp_path: Path, encoder: CachedEncoder) -> Skillgrove:
    return Skillgrove([library], index=tmp_path / "index", encoder=encoder)


def test_the_python_api_as_the_readme_shows_it(engine: Skillgrove, library: Path) -> None:
    toolbox = engine.search("make the weekly KPI report from this CSV and mail it to the team")
    assert toolbox.group is not None and toolbox.group.id == "group:kpi-report"
    view = engine.views.toolbox(toolbox)
    assert view["shape"] == "group" and view["group"]["id"] == "kpi-report"
    assert view["group"]["input_schema"]["required"] == ["csv_path"]
    assert [m["name"] for m in view["group"]["members"]] == ["csv-stats", "make-chart",
                                                             "send-email"]
    fallback = engine.toolbox("count the words in this paragraph", detail="full")
    assert fallback["shape"] in ("skill", "skills") and fallback["selected"][0] == "word-count"
    top = fallback["skills"][0]
    assert top["location"] == str(library / "skills" / "word-count" / "SKILL.md")
    assert top["input_schema"]["required"] == ["text"] and top["runnable"]

    details = engine.skill("word-count")
    assert details.body.startswith("Counts whitespace-separated words.")
    assert [f.path for f in details.files] == ["SKILL.md", "main.py"]
    assert engine.skill_file("word-count", "main.py").startswith(b"def run")
    record = engine.run_skill("word-count", {"text": "one two three"})
    assert record.status == "success" and record.outputs == {"words": 3}
    assert engine.get_run(record.id).group == "skill:word-count"


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda e: e.search(""), InvalidRequestError, "request: must be a non-empty string"),
    (lambda e: e.search("x", k=0), InvalidRequestError, "k: must be a whole number from 1 to 50"),
    (lambda e: e.search("x", k=51), InvalidRequestError,
     "k: must be a whole number from 1 to 50"),
    (lambda e: e.skill("word-cont"), NotFoundError, "did you mean 'word-count'?"),
    (lambda e: e.plan("kpi-reprot"), NotFoundError, "did you mean 'kpi-report'?"),
    (lambda e: e.skill_file("word-count", "../secret"), NotFoundError, "no file '../secret'"),
    (lambda e: e.run_skill("translate-text", {}), InvalidRequestError, "instruction-only"),
    (lambda e: e.get_run("nope"), NotFoundError, "no run 'nope'"),
    (lambda e: e.inject(budget=10), InvalidRequestError, "give a request or a run id"),
    (lambda e: e.search("x", {"values": 5}), InvalidRequestError, "context.values"),
])
def test_mistakes_are_engine_errors_with_a_code(engine: Skillgrove, call, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as caught:
        call(engine)
    assert message in str(caught.value)
    assert caught.value.to_dict()["code"] in ("invalid_request", "not_found")


def test_search_reindexes_a_library_that_changed(library: Path, tmp_path: Path) -> None:
    """Outside a server, a group file added after indexing is noticed by the next search."""
    index = tmp_path / "index"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "skillgrove.runtime.cli"]
    subprocess.run([*cli, "index", str(library), "--index", str(index), "-q"], check=True,
                   env=env, capture_output=True, timeout=300)
    write_group(library, "translate-twice.yaml", TRANSLATE_TWICE)
    result = subprocess.run([*cli, "search", "translate this to german and back again",
                             "--index", str(index)], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "the library changed since it was indexed: re-indexing" in result.stderr
    assert result.stdout.startswith("Group  translate-twice")
    again = subprocess.run([*cli, "search", "translate this to german and back again",
                            "--index", str(index)], env=env, capture_output=True, text=True,
                           timeout=300)
    assert "re-indexing" not in again.stderr and again.stdout.startswith("Group  translate-twice")


def test_a_broken_group_keeps_its_last_good_version(engine: Skillgrove, library: Path) -> None:
    path = write_group(library, "translate-twice.yaml", TRANSLATE_TWICE)
    engine.index()
    assert engine.plan("translate-twice", {"text": "hello"}).levels == (("there",), ("back",))
    broken = path.read_text().replace("skill: translate-text\n    needs",
                                      "skill: translate-txt\n    needs")
    assert "translate-txt" in broken
    path.write_text(broken)
    engine.refresh()
    listed = {g["id"]: g for g in engine.groups()}
    assert listed["translate-twice"]["status"] == "last-good"
    assert "unknown skill 'translate-txt'" in listed["translate-twice"]["errors"][0]
    assert engine.health().broken_groups.keys() == {"translate-twice"}
    toolbox = engine.search("translate this to german and back again")
    assert toolbox.group is not None and toolbox.group.id == "group:translate-twice"
    assert engine.check().groups.get("translate-twice") is None  # check tells the truth
    path.unlink()
    engine.refresh()
    assert "translate-twice" not in {g["id"] for g in engine.groups()}
    assert not engine.health().broken_groups


def test_searches_during_a_reindex_all_succeed(engine: Skillgrove, library: Path) -> None:
    engine.index()
    request = "translate this to german and back again"
    seen: set[str | None] = set()
    failures: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            try:
                toolbox = engine.search(request)
                seen.add(toolbox.group.id if toolbox.group else None)
            except BaseException as exc:  # any failure fails the test
                failures.append(exc)
                return

    workers = [threading.Thread(target=search) for _ in range(4)]
    for worker in workers:
        worker.start()
    path = library / "groups" / "translate-twice.yaml"
    for _ in range(3):
        write_group(library, "translate-twice.yaml", TRANSLATE_TWICE)
        engine.index()
        path.unlink()
        engine.index()
    stop.set()
    for worker in workers:
        worker.join(30)
    assert not failures, failures
    assert "group:translate-twice" in seen


def test_watch_serves_an_edited_skill_within_two_seconds(engine: Skillgrove,
                                                         library: Path) -> None:
    engine.index()
    watcher = engine.watch()
    try:
        assert watcher.ready.wait(30)
        skill_file = library / "skills" / "word-count" / "SKILL.md"
        skill_file.write_text(skill_file.read_text().replace(
            "Count the words of a text.", "Count the words of a text, like wc -w."))
        started = time.monotonic()
        while time.monotonic() - started < 2.0:
            view = engine.toolbox("count the words in this paragraph",
                                  detail="full")["skills"][0]
            if view["description"].endswith("like wc -w."):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the edited skill was not served within 2 s")
        write_group(library, "translate-twice.yaml", TRANSLATE_TWICE)
        started = time.monotonic()
        while time.monotonic() - started < 2.0:
            if "translate-twice" in {g["id"] for g in engine.groups()}:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the added group was not served within 2 s")
    finally:
        watcher.stop()
        watcher.join(5)


SHOUT = """
    ---
    name: shout-text
    description: Turn a text into upper case letters.
    entrypoint: {python: "main.py:run"}
    inputs:
      properties:
        text: {type: string}
      required: [text]
    outputs:
      properties:
        text: {type: string}
    ---
    Upper-cases the text.
    """


def test_a_composed_toolbox_can_be_planned_run_and_saved(library: Path, tmp_path: Path,
                                                         encoder: CachedEncoder) -> None:
    shout = write_skill(library / "skills", "shout-text", SHOUT)
    (shout.parent / "main.py").write_text("def run(text):\n    return {'text': text.upper()}\n")
    counter = library / "skills" / "word-count" / "SKILL.md"
    counter.write_text(counter.read_text().replace("entrypoint:", "depends_on: [shout-text]\n"
                                                                  "entrypoint:"))
    engine = Skillgrove([library], index=tmp_path / "index2", encoder=encoder)
    toolbox = engine.search("count the words in this paragraph")
    assert toolbox.shape == "composed"
    composed = engine.compose(toolbox)
    assert composed.group is not None, [d.format() for d in composed.diagnostics]
    assert "text: ${{ steps.shout_text.outputs.text }}" in composed.text
    assert "text: ${{ inputs.text }}" in composed.text
    record = engine.run_composed(composed, {"text": "one two three"})
    assert record.status == "success", record.error
    assert record.step("word_count").outputs == {"words": 3}  # type: ignore[union-attr]
    saved = library / "groups" / f"{composed.group.id}.yaml"
    saved.write_text(composed.text)
    assert composed.group.id in engine.check().groups


def test_run_statistics_stay_with_the_library_they_came_from(tmp_path: Path) -> None:
    """Two libraries indexed into one folder share its run log; each index mines only the runs
    of its own library (a run recorded before runs named their library counts for a library
    that has its group)."""
    import shutil
    from dataclasses import replace

    first = tmp_path / "first"
    path = write_skill(first / "skills", "emit", """
        ---
        name: emit
        description: emit a count
        entrypoint: {python: "main.py:run"}
        outputs:
          properties:
            count: {type: integer}
        ---
        Emits a count.
        """)
    (path.parent / "main.py").write_text("def run():\n    return {'count': 3}\n")
    write_group(first, "emit.yaml", """
        id: emit-twice
        description: Emit, then emit again.
        examples: [emit twice]
        steps:
          - {id: a, skill: emit}
          - {id: b, skill: emit, needs: [a]}
        """)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    index = tmp_path / "index"
    record = Skillgrove([first], index=index).run("emit-twice")
    assert record.status == "success"
    stored = Skillgrove([first], index=index).get_run(record.id)
    assert stored.library == str(first.resolve())
    assert [r["id"] for r in Skillgrove([first], index=index)._recorded_runs()] == [record.id]
    other = Skillgrove([second], index=index)
    assert other._recorded_runs() == []
    other.run_log.record(replace(stored, id="legacy", library=None))
    assert [r["id"] for r in other._recorded_runs()] == ["legacy"]


def test_index_warns_about_skills_retrieval_cannot_tell_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skillgrove.runtime.cli import main

    root = copy_fixture_library(tmp_path / "lib")
    original = (root / "skills" / "summarize-text" / "SKILL.md").read_text(encoding="utf-8")
    write_skill(root / "skills", "summarize_text", original.replace(
        "name: summarize-text", "name: summarize_text"))
    engine = Skillgrove([root], index=tmp_path / "index")
    engine.index()
    (found,) = engine.look_alike_skills()
    assert found.rule == "look-alike-skills" and found.hint
    assert {"'summarize-text'", "'summarize_text'"} <= set(found.message.split())
    engine.close()
    assert main(["index", "--library", str(root), "--index", str(tmp_path / "index")]) == 0
    captured = capsys.readouterr()
    assert "[look-alike-skills]" in captured.err and "look-alike" not in captured.out
