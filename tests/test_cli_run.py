"""``skillgrove plan``, ``run``, ``runs`` and ``ask`` on a small runnable library."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.runtime.cli import main
from tests.helpers import write_group, write_skill


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    for name, code, outputs in [
        ("word-count", "def run(text):\n    return {'words': len(text.split())}\n",
         "words: {type: integer}"),
        ("shout", "def run(text, times=1):\n    return {'text': (text.upper() + '! ') * times}\n",
         "text: {type: string}"),
        ("flaky-file", "import os\ndef run(path):\n    if not os.path.exists(path):\n"
         "        raise FileNotFoundError(path)\n    return {'ok': True}\n", "ok: {type: boolean}"),
    ]:
        path = write_skill(root / "skills", name, f"""
            ---
            name: {name}
            description: {name.replace('-', ' ')} of a text
            entrypoint: {{python: "main.py:run"}}
            inputs:
              properties:
                text: {{type: string}}
                times: {{type: integer}}
                path: {{type: string, format: path}}
            outputs:
              properties:
                {outputs}
            ---
            Use it on short texts.
            """)
        (path.parent / "main.py").write_text(code)
    write_group(root, "loud.yaml", """
        id: loud-count
        description: Count the words of a text and shout it back.
        examples: [count and shout this text]
        inputs:
          text: {type: string, required: true}
          times: {type: integer, default: 1}
          marker: {type: string, default: /nonexistent/marker}
        steps:
          - id: count
            skill: word-count
            with: {text: "${{ inputs.text }}"}
          - id: shout
            skill: shout
            needs: [count]
            if: ${{ steps.count.outputs.words > 0 }}
            with: {text: "${{ inputs.text }}", times: "${{ inputs.times }}"}
          - id: check
            skill: flaky-file
            needs: [shout]
            with: {path: "${{ inputs.marker }}"}
        outputs:
          words: ${{ steps.count.outputs.words }}
          loud: ${{ steps.shout.outputs.text }}
        """)
    return root


def cli(*args: str) -> tuple[int, str]:
    out = StringIO()
    return main(list(args), out), out.getvalue()


def test_plan(library: Path, tmp_path: Path) -> None:
    code, text = cli("plan", "loud-count", "--library", str(library), "--input", "text=hi there",
                     "--index", str(tmp_path / "idx"))
    assert code == 0
    assert "level 0:\n  count: skill word-count\n      text = \"hi there\"" in text
    assert "level 2:\n  check: skill flaky-file" in text


def test_run_fail_then_resume(library: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    index = str(tmp_path / "idx")
    marker = tmp_path / "marker"
    code, text = cli("run", "loud-count", "--library", str(library), "--input", "text=hi there",
                     "--input", "times=2", "--input", f"marker={marker}", "--index", index)
    assert code == 1
    progress = capsys.readouterr().err
    assert "  ok    count" in progress and "  FAIL  check: FileNotFoundError" in progress
    code, listing = cli("runs", "--index", index)
    run_id = listing.split()[0]
    assert "loud-count" in listing and "failure" in listing and "failed: check" in listing
    marker.write_text("now it exists")
    code, text = cli("run", "loud-count", "--library", str(library), "--resume", run_id,
                     "--index", index)
    assert code == 0
    assert json.loads(text) == {"words": 2, "loud": "HI THERE! HI THERE! "}
    assert "reused from run " + run_id in capsys.readouterr().err
    code, shown = cli("runs", "show", run_id, "--index", index)
    assert json.loads(shown)["status"] == "failure"


def test_bad_input_is_a_clear_error(library: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli("run", "loud-count", "--library", str(library), "--input", "times=2",
                  "--index", str(tmp_path / "idx"))
    assert code == 1
    assert "missing required input 'text'" in capsys.readouterr().err


def test_ask_runs_the_group_and_injects(library: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    context = tmp_path / "context.json"
    marker = tmp_path / "m"
    marker.write_text("x")
    context.write_text(json.dumps({"values": {"text": "one two three", "marker": str(marker)}}))
    code, text = cli("ask", "count the words of this text and shout it back", "--library",
                     str(library), "--context", str(context), "--index", str(tmp_path / "idx"))
    assert code == 0, capsys.readouterr().err
    assert "Group **loud-count**" in text
    assert "- **words** (group output): 3" in text
    assert "- **loud** (group output): ONE TWO THREE!" in text


def test_a_library_given_by_a_relative_path_runs(library: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(library.parent)
    code, text = cli("run", "loud-count", "--library", library.name, "--input", "text=a b",
                     "--input", f"marker={library / 'groups' / 'loud.yaml'}", "--index",
                     str(tmp_path / "idx"))
    assert code == 0, text
    assert json.loads(text)["words"] == 2


def test_demo_runs_the_bundled_library_end_to_end(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(tmp_path / "outbox"))
    monkeypatch.chdir(tmp_path)
    code, text = cli("demo", "--index", str(tmp_path / "idx"))
    assert code == 0, capsys.readouterr().err
    assert "Group **Report analysis and notification**" in text
    assert "(run " in text and ": success)" in text
    assert list((tmp_path / "outbox").glob("*.eml"))


def failed_run(library: Path, index: str, marker: Path) -> str:
    code, _ = cli("run", "loud-count", "--library", str(library), "--input", "text=hi there",
                  "--input", "times=2", "--input", f"marker={marker}", "--index", index)
    assert code == 1
    code, listing = cli("runs", "--index", index)
    return listing.split()[0]


def test_resume_with_one_input_keeps_the_others(library: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    index = str(tmp_path / "idx")
    run_id = failed_run(library, index, tmp_path / "missing")
    marker = tmp_path / "marker"
    marker.write_text("here")
    code, text = cli("run", "loud-count", "--library", str(library), "--resume", run_id,
                     "--input", f"marker={marker}", "--index", index, "--json")
    assert code == 0, capsys.readouterr().err
    record = json.loads(text)
    assert record["inputs"] == {"text": "hi there", "times": 2, "marker": str(marker)}
    assert record["outputs"] == {"words": 2, "loud": "HI THERE! HI THERE! "}
    assert [s["note"] for s in record["steps"]] == [
        f"reused from run {run_id}", f"reused from run {run_id}",
        f"not reused: it failed in run {run_id}"]


def test_resume_reruns_a_skill_whose_code_changed(library: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    index = str(tmp_path / "idx")
    marker = tmp_path / "marker"
    run_id = failed_run(library, index, marker)
    capsys.readouterr()
    (library / "skills" / "shout" / "main.py").write_text(
        "def run(text, times=1):\n    return {'text': (text.upper() + '!!! ') * times}\n")
    marker.write_text("now it exists")
    code, text = cli("run", "loud-count", "--library", str(library), "--resume", run_id,
                     "--index", index)
    assert code == 0
    assert json.loads(text)["loud"] == "HI THERE!!! HI THERE!!! "
    progress = capsys.readouterr().err
    assert f"  ok    count 0.00 s (reused from run {run_id})" in progress
    assert f"  >     shout: re-run: its definition changed since run {run_id}" in progress


def test_resume_under_another_group_names_the_runs_group(
        library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_group(library, "other.yaml", """
        id: other-count
        description: Count the words of a text.
        examples: [count words]
        inputs: {text: {type: string, required: true}}
        steps:
          - {id: count, skill: word-count, with: {text: "${{ inputs.text }}"}}
        """)
    index = str(tmp_path / "idx")
    run_id = failed_run(library, index, tmp_path / "missing")
    capsys.readouterr()
    code, _ = cli("run", "other-count", "--library", str(library), "--resume", run_id,
                  "--index", index)
    assert code == 1
    assert capsys.readouterr().err == (
        f"skillgrove: run {run_id} belongs to group 'loud-count', not 'other-count'; resume it "
        f"with `skillgrove run loud-count --resume {run_id}`\n")


def test_each_run_writes_into_its_own_folder_which_a_resume_keeps(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "lib"
    path = write_skill(root / "skills", "write-note", """
        ---
        name: write-note
        description: write a note to a file
        entrypoint: {python: "main.py:run"}
        outputs: {properties: {path: {type: string}}}
        ---
        Writes.
        """)
    (path.parent / "main.py").write_text(
        "import os, tempfile\nfrom pathlib import Path\n"
        "def run(text, fail=False):\n"
        "    if fail:\n        raise RuntimeError('asked to fail')\n"
        "    folder = Path(os.environ.get('SKILLGROVE_STEP_DIR') or tempfile.mkdtemp())\n"
        "    target = folder / 'note.txt'\n    target.write_text(text)\n"
        "    return {'path': str(target)}\n")
    write_group(root, "notes.yaml", """
        id: notes
        description: Write two notes.
        examples: [write notes]
        inputs: {fail: {type: boolean, default: false}}
        steps:
          - {id: one, skill: write-note, with: {text: first}}
          - {id: two, skill: write-note, needs: [one],
             with: {text: second, fail: "${{ inputs.fail }}"}}
        outputs: {one: "${{ steps.one.outputs.path }}", two: "${{ steps.two.outputs.path }}"}
        """)
    index = tmp_path / "idx"
    records = []
    for fail in ("false", "true"):
        cli("run", "notes", "--library", str(root), "--index", str(index), "--input",
            f"fail={fail}", "--json")
        records.append(json.loads(cli("runs", "show", cli("runs", "--index", str(index))[1]
                                      .split()[0], "--index", str(index))[1]))
    done, failed = records
    assert done["status"] == "success" and failed["status"] == "failure"
    for record in records:
        assert record["run_dir"] == str(index.absolute() / "runs" / record["id"])
    assert done["outputs"] == {"one": f"{done['run_dir']}/one/note.txt",
                               "two": f"{done['run_dir']}/two/note.txt"}
    assert Path(done["outputs"]["two"]).read_text() == "second"
    assert sorted(p.name for p in Path(failed["run_dir"]).iterdir()) == ["one"]
    capsys.readouterr()
    code, _ = cli("run", "notes", "--library", str(root), "--index", str(index), "--resume",
                  failed["id"], "--input", "fail=false")
    assert code == 0
    resumed = json.loads(cli("runs", "show", cli("runs", "--index", str(index))[1].split()[0],
                             "--index", str(index))[1])
    assert resumed["resumed_from"] == failed["id"] and resumed["run_dir"] == failed["run_dir"]
    assert resumed["outputs"]["one"] == f"{failed['run_dir']}/one/note.txt"
    assert Path(resumed["outputs"]["one"]).read_text() == "first"
    assert f"(files in {failed['run_dir']})" in capsys.readouterr().err


def test_run_and_demo_share_one_outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skillgrove.runtime.paths import bundled_library

    monkeypatch.delenv("SKILLGROVE_OUTBOX", raising=False)
    index = tmp_path / "idx"
    code, text = cli("run-skill", "send-email", "--library", str(bundled_library()), "--index",
                     str(index), "--input", "to=team@example.com", "--input", "subject=Hello",
                     "--input", "body=Hi")
    assert code == 0, text
    sent = Path(json.loads(text)["path"])
    assert sent.parent == index.absolute() / "outbox" and sent.is_file()
