"""The command line as an agent's script drives it, on the bundled library: compact JSON by
default, ``--detail full`` for every score."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from skillgrove.runtime.cli import main
from skillgrove.runtime.inject import count_tokens
from skillgrove.runtime.paths import bundled_library

LIBRARY = bundled_library()
DEMO_REQUEST = "summarize this PDF report and email the key numbers to the team"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cli-agents") / "index"
    assert main(["index", "-q", "--library", str(LIBRARY), "--index", str(folder)],
                StringIO()) == 0
    return folder


def cli(index: Path, *argv: str) -> tuple[int, str]:
    out = StringIO()
    code = main([*argv, "--library", str(LIBRARY), "--index", str(index)], out)
    return code, out.getvalue()


def cli_json(index: Path, *argv: str) -> dict[str, Any]:
    code, text = cli(index, *argv, "--json")
    assert code == 0, text
    found: dict[str, Any] = json.loads(text)
    return found


def test_search_json_is_the_compact_toolbox_unless_full_detail_is_asked_for(
        index: Path) -> None:
    compact = cli_json(index, "search", DEMO_REQUEST)
    assert compact["detail"] == "compact" and compact["group"]["id"] == "report-analysis"
    assert compact["group"]["inputs"][0] == {"name": "pdf_path", "type": "string",
                                             "required": True}
    assert count_tokens(json.dumps(compact, ensure_ascii=False)) <= 1500
    full = cli_json(index, "search", DEMO_REQUEST, "--detail", "full")
    assert full["detail"] == "full" and full["reason"] == compact["reason"]
    assert all("score" in skill for skill in full["skills"])
