"""A warm ``skillgrove ask`` (the same request again, caches filled) answers exactly as the cold
one did, without the model; any change to the library is in the next answer. Each ask runs in a
process of its own, as a user's commands do, with a cache folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import copy_fixture_library

FALLBACK = "translate this paragraph into German"
"""A request no group of the fixture library serves: one skill is injected."""
GROUP = "summarize the quarterly report PDF and email the numbers to my team"
"""A request the report-analysis group serves (planned, with the context below)."""

DEFERRED = ("onnxruntime", "tokenizers", "torch", "sentence_transformers", "transformers",
            "scipy", "networkx", "jsonschema", "xml.sax.saxutils", "importlib.metadata",
            "skillgrove.runtime.runner")
"""What a warm ask that falls back to single skills never imports: the model's runtime and
tokenizer (the query vector is cached), scipy (fitting the router only), networkx (not used by
the embedded store), the XML escapes (Markdown block), package metadata (``--version`` only)
and the runner (nothing is planned or run)."""

ASK = """
import json, sys
from io import StringIO
from skillgrove.runtime import cli
out = StringIO()
code = cli.main(sys.argv[2:], out)
watched = json.loads(sys.argv[1])
print(json.dumps({"code": code, "out": out.getvalue(),
                  "imported": [m for m in watched if m in sys.modules]}))
"""


def real_cache() -> Path:
    configured = os.environ.get("SKILLGROVE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "skillgrove"


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Any]:
    library = copy_fixture_library(tmp_path / "lib")
    past = time.time() - 100
    for folder, _, files in os.walk(library):
        for name in files:
            os.utime(os.path.join(folder, name), (past, past))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    if (real_cache() / "onnx").is_dir():  # the model's ONNX export (made once per machine)
        (cache / "onnx").symlink_to(real_cache() / "onnx")
    env = dict(os.environ, HF_HUB_OFFLINE="1", SKILLGROVE_CACHE=str(cache))
    env.pop("SKILLGROVE_PATH", None)
    index = tmp_path / "index"
    done = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "index", "--library",
                           str(library), "--index", str(index), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    context = tmp_path / "context.json"
    context.write_text(json.dumps({"values": {"pdf_path": "q3.pdf"}}), encoding="utf-8")
    return {"library": library, "index": index, "env": env, "cache": cache, "context": context}


def ask(setup: dict[str, Any], request: str, *extra: str, code: int = 0) -> dict[str, Any]:
    command = [sys.executable, "-c", ASK, json.dumps(DEFERRED), "ask", request, "--plan-only",
               "--library", str(setup["library"]), "--index", str(setup["index"]), *extra]
    done = subprocess.run(command, env=setup["env"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["err"] = done.stderr
    assert result["code"] == code, done.stderr
    return result


def test_a_warm_ask_answers_as_the_cold_one_and_imports_none_of_the_model(
        setup: dict[str, Any]) -> None:
    cold = ask(setup, FALLBACK)
    # The cold process had to embed the request: the check below can see the model's runtime.
    assert "onnxruntime" in cold["imported"] or "torch" in cold["imported"], cold["imported"]
    assert "translate-text" in cold["out"]
    warm = ask(setup, FALLBACK)
    assert warm["out"] == cold["out"]
    assert warm["imported"] == [], f"a warm ask imported {warm['imported']}"


def test_a_warm_ask_of_a_group_plans_what_the_cold_one_planned(setup: dict[str, Any]) -> None:
    cold = ask(setup, GROUP, "--context", str(setup["context"]))
    assert "report-analysis" in cold["out"] and "planned, not run" in cold["err"]
    warm = ask(setup, GROUP, "--context", str(setup["context"]))
    assert warm["out"] == cold["out"] and warm["err"] == cold["err"]
    assert not {"onnxruntime", "tokenizers", "torch", "scipy", "networkx"} & set(warm["imported"])


def test_an_edited_skill_is_in_the_next_ask(setup: dict[str, Any]) -> None:
    before = ask(setup, FALLBACK)
    ask(setup, FALLBACK)  # warm: the library cache and the query vector are in use
    skill = setup["library"] / "skills" / "translate-text" / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    marker = "Keeps the register of the original: formal stays formal."
    skill.write_text(text.rstrip("\n") + "\n\n" + marker + "\n", encoding="utf-8")
    after = ask(setup, FALLBACK)
    assert "the library changed since it was indexed: re-indexing" in after["err"]
    assert marker in after["out"] and marker not in before["out"]
    assert ask(setup, FALLBACK)["out"] == after["out"]


def test_a_removed_skill_is_gone_from_the_next_ask(setup: dict[str, Any]) -> None:
    before = ask(setup, FALLBACK)
    assert "translate-text" in before["out"]
    skill = setup["library"] / "skills" / "translate-text" / "SKILL.md"
    skill.rename(skill.with_name("NOTES.md"))
    # No other skill of the fixture library translates: nothing fits (exit 4). The summarizer,
    # the nearest, shares no word with the request and its embedding alone is not a fit.
    after = ask(setup, FALLBACK, code=4)
    assert "re-indexing" in after["err"]
    assert "translate-text" not in after["out"]
