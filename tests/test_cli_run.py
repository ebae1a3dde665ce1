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
                path: {{type: string}}
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
    assert "- **loud** (group output): ONE TWO THREE! " in text


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
