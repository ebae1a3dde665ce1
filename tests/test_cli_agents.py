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


# -- ask from a script ----------------------------------------------------------------------

CLEANUP_REQUEST = "clean up this customer CSV and email the result"


def cleanup_inputs(tmp_path: Path) -> list[str]:
    return ["--input", f"csv_path={LIBRARY / 'samples' / 'customers_messy.csv'}",
            "--input", f"output_dir={tmp_path / 'clean'}",
            "--input", "notify_email=crm@example.com"]


@pytest.fixture
def outbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "outbox"
    monkeypatch.setenv("SKILLGROVE_OUTBOX", str(folder))
    for name in ("SMTP_HOST", "SKILLGROVE_ALLOW_EFFECTS"):
        monkeypatch.delenv(name, raising=False)
    return folder


def test_ask_runs_the_group_with_the_inputs_given_on_the_command_line(
        index: Path, tmp_path: Path, outbox: Path) -> None:
    code, text = cli(index, "ask", CLEANUP_REQUEST, *cleanup_inputs(tmp_path), "--yes",
                     "--json")
    answer = json.loads(text)
    assert code == 0 and answer["exit_code"] == 0
    assert answer["toolbox"]["group"]["id"] == "csv-cleanup"
    assert answer["run"]["status"] == "success"
    assert answer["run"]["inputs"]["csv_path"].endswith("customers_messy.csv")
    assert (tmp_path / "clean").is_dir() and list(outbox.glob("*.eml"))


def test_ask_without_confirmation_says_in_the_block_that_it_planned_and_did_not_run(
        index: Path, tmp_path: Path, outbox: Path) -> None:
    code, block = cli(index, "ask", CLEANUP_REQUEST, *cleanup_inputs(tmp_path))
    assert code == 3
    assert ("planned, not run: needs confirmation for sends-email (send-email)" in block)
    code, xml = cli(index, "ask", CLEANUP_REQUEST, *cleanup_inputs(tmp_path), "--format", "xml")
    assert code == 3
    assert 'status="planned, not run: needs confirmation for sends-email (send-email)' in xml
    code, text = cli(index, "ask", CLEANUP_REQUEST, *cleanup_inputs(tmp_path), "--json")
    answer = json.loads(text)
    assert code == answer["exit_code"] == 3 and answer["run"] is None
    assert answer["needs_confirmation"] == {"sends-email": ["send-email"]}
    assert "planned, not run" in answer["injection"]["text"]
    assert not (tmp_path / "clean").exists() and not outbox.exists()


def test_nothing_fits_has_its_own_exit_code(index: Path) -> None:
    request = "translate this paragraph into German"
    assert cli(index, "search", request)[0] == 4
    code, text = cli(index, "ask", request, "--json")
    assert code == json.loads(text)["exit_code"] == 4
    assert cli(index, "search", DEMO_REQUEST)[0] == 0


def test_inject_and_index_print_json(index: Path) -> None:
    block = cli_json(index, "inject", DEMO_REQUEST, "--budget", "600")
    assert set(block) == {"text", "tokens", "budget", "level", "left_out"}
    assert block["tokens"] <= 600 and block["budget"] == 600
    summary = cli_json(index, "index", "-q")
    assert summary["skills"] == 48 and summary["groups"] == 11
    assert summary["errors"] == [] and summary["left_out_groups"] == []


# -- a group left out ---------------------------------------------------------------------------


def test_a_broken_group_is_named_by_index_search_and_ask(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    library = Path(shutil.copytree(LIBRARY, tmp_path / "library"))
    group_file = library / "groups" / "report-analysis.yaml"
    group_file.write_text(group_file.read_text().replace("skill: pdf-to-text",
                                                         "skill: pdf-to-txt"))
    argv = ["--library", str(library), "--index", str(tmp_path / "index")]
    capsys.readouterr()
    assert main(["index", "-q", *argv], StringIO()) == 5
    said = capsys.readouterr().err
    assert f"group 'report-analysis' in {group_file} is left out\n" in said
    assert "pdf-to-txt" in said
    expected = f"group 'report-analysis' in {group_file} is left out: "
    out = StringIO()
    main(["search", "summarize the quarterly report PDF and email the key numbers", "--json",
          *argv], out)
    assert expected in capsys.readouterr().err
    [left_out] = json.loads(out.getvalue())["left_out_groups"]
    assert left_out["id"] == "report-analysis" and "pdf-to-txt" in left_out["errors"][0]
    main(["ask", "summarize the quarterly report PDF and email the key numbers", *argv],
         StringIO())
    assert expected in capsys.readouterr().err


def test_every_command_that_prints_a_result_prints_json(index: Path, tmp_path: Path) -> None:
    import shutil

    neighbors = cli_json(index, "graph", "neighbors", "pdf-to-text")
    assert neighbors["node"]["name"] == "pdf-to-text"
    assert {"edge": "CONTAINS", "direction": "<-", "name": "Report analysis and notification"} \
        .items() <= next(e for e in neighbors["edges"]
                         if e["id"] == "group:report-analysis").items()
    composed = cli_json(index, "compose", "convert my markdown notes into a PDF and compute "
                                          "its checksum")
    assert composed["valid"] is True and composed["errors"] == []
    assert composed["text"].startswith("# Composed at retrieval time")
    out = StringIO()
    assert main(["runs", "--json", "--index", str(index)], out) == 0
    runs = json.loads(out.getvalue())["runs"]
    assert isinstance(runs, list) and all({"id", "group", "status"} <= set(r) for r in runs)
    library = Path(shutil.copytree(LIBRARY, tmp_path / "library"))
    out = StringIO()
    assert main(["groups", "lock", "--library", str(library), "--json"], out) == 0
    [locked] = json.loads(out.getvalue())["written"]
    assert locked == {"path": str(library / "groups" / "skillgrove.lock"), "groups": 11}
    out = StringIO()
    assert main(["groups", "suggest", "--library", str(library), "--index",
                 str(tmp_path / "index"), "--json"], out) == 0
    suggested = json.loads(out.getvalue())
    assert suggested["folder"] == str(library / "groups" / "drafts")
    assert suggested["drafts"], suggested["reason"]
    for draft in suggested["drafts"]:
        assert draft["written"] is True and Path(draft["path"]).is_file()
        assert draft["steps"] >= 2 and isinstance(draft["errors"], list)


# -- skill inputs -------------------------------------------------------------------------------


@pytest.mark.parametrize(("inputs", "message"), [
    ('{"path": "q3.pdf", "max_pages": "two"}',
     "inputs.max_pages: 'two' is not of type 'integer' (skill 'pdf-to-text')"),
    ('{"pth": "q3.pdf"}', "inputs.pth: skill 'pdf-to-text' has no such input (did you mean "
                          "'path'?)"),
    ('{}', "inputs.path: 'path' is a required property (skill 'pdf-to-text')"),
])
def test_run_skill_checks_the_inputs_against_the_skill_schema_before_it_runs(
        index: Path, inputs: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code, _ = cli(index, "run-skill", "pdf-to-text", "--json-input", inputs)
    assert code == 1
    assert capsys.readouterr().err == f"skillgrove: {message}\n"
