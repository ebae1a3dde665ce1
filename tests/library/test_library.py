"""The bundled library as a whole: lint-clean, every skill tested, contracts match the code."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from functools import cache
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrove.groups import Library, load_library
from skillgrove.runtime.cli import main
from tests.library.conftest import LIBRARY, SAMPLES, call_skill, skill_definition, skill_module

SKILL_NAMES = sorted(p.parent.name for p in (LIBRARY / "skills").glob("*/SKILL.md"))
EXECUTABLE = [n for n in SKILL_NAMES if skill_definition(n).entrypoint is not None]
GROUP_FILES = sorted((LIBRARY / "groups").glob("*.yaml"))
CJK = re.compile(r"[\u4e00-\u9fff]")


@cache
def library() -> Library:
    return load_library([LIBRARY])


def test_check_reports_no_errors_and_no_warnings() -> None:
    out = StringIO()
    code = main(["check", str(LIBRARY)], out)
    text = out.getvalue()
    assert code == 0, text
    assert "0 errors, 0 warnings" in text, text
    assert library().diagnostics == ()
    assert sorted(library().skills) == SKILL_NAMES
    assert sorted(library().groups) == [p.stem for p in GROUP_FILES]


def test_library_size_and_mix() -> None:
    assert len(SKILL_NAMES) >= 40
    assert len(EXECUTABLE) >= 0.8 * len(SKILL_NAMES)
    assert len(GROUP_FILES) >= 10
    assert "report-analysis" in library().groups
    assert any(step.group and step.if_ for group in library().groups.values()
               for step in group.steps), "at least one conditional sub-group branch"


def test_every_executable_skill_has_a_test() -> None:
    called = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        called |= set(re.findall(r"(?:run_skill|call_skill)\(\s*\"([a-z0-9-]+)\"",
                                 path.read_text(encoding="utf-8")))
    assert sorted(set(EXECUTABLE) - called) == []


@pytest.mark.parametrize("name", SKILL_NAMES)
def test_frontmatter_is_complete(name: str) -> None:
    skill = skill_definition(name)
    assert skill.tags, "tags help retrieval"
    assert 40 <= len(skill.description) <= 1024
    assert len(skill.body()) > 300, "the body must teach an agent how to use the skill"
    if skill.entrypoint is None:
        return
    for section in ("inputs", "outputs"):
        schema = getattr(skill, section)
        assert schema["type"] == "object" and "required" in schema, section
        for key, prop in schema["properties"].items():
            assert "type" in prop and prop.get("description"), f"{section}.{key}"


@pytest.mark.parametrize("name", EXECUTABLE)
def test_entry_function_matches_the_declared_inputs(name: str) -> None:
    skill = skill_definition(name)
    function = getattr(skill_module(name), skill.entrypoint.target.split(":")[1])  # type: ignore[union-attr]
    parameters = inspect.signature(function).parameters
    properties = skill.input_properties()
    assert list(parameters) and set(parameters) == set(properties)
    for key, parameter in parameters.items():
        required = key in skill.required_inputs()
        assert (parameter.default is inspect.Parameter.empty) == required, key
        declared = properties[key].get("default")
        if not required:
            assert "default" in properties[key], f"{key} has no declared default"
            assert parameter.default == declared or (parameter.default is None
                                                     and declared in ([], {})), key


@pytest.mark.parametrize("name", EXECUTABLE)
def test_skills_use_only_the_standard_library_and_the_declared_dependencies(name: str) -> None:
    allowed = set(sys.stdlib_module_names) | {"pypdf", "fpdf"}
    for script in (LIBRARY / "skills" / name).rglob("*.py"):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                else [])
            for module in names:
                assert module.split(".")[0] in allowed, f"{script.name} imports {module}"


@pytest.mark.parametrize("path", GROUP_FILES, ids=lambda p: p.name)
def test_group_files_follow_the_house_format(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=../../groups/group.schema.json\n")
    data = yaml.safe_load(text)
    assert data["id"] == path.stem
    assert 4 <= len(data["examples"]) <= 6
    assert len(set(data["examples"])) == len(data["examples"])


@pytest.mark.parametrize("group_id", ["weekly-report-zh", "customer-complaint-zh"])
def test_chinese_workflows_are_written_in_chinese(group_id: str) -> None:
    group = library().groups[group_id]
    assert CJK.search(group.name) and CJK.search(group.description)
    assert all(CJK.search(example) for example in group.examples)
    for skill in group.skills:
        if skill.endswith("-zh"):
            assert CJK.search(skill_definition(skill).description), skill
            assert re.fullmatch(r"[a-z0-9-]+", skill)


ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("pdf-to-text", {"path": "/no/such.pdf"}, "path: no such file: /no/such.pdf"),
    ("pdf-to-text", {"path": str(SAMPLES / "kpi_daily.csv")}, "path: kpi_daily.csv is not a "
                                                              "readable PDF"),
    ("extract-metrics", {"text": "  "}, "text: nothing to scan"),
    ("summarize-text", {"text": "Title only"}, "text: no complete sentences"),
    ("markdown-table", {"rows": [{"a": 1}], "columns": ["b"]}, "columns: no row has 'b'"),
    ("sla-deadline", {"priority": "asap"}, "priority: expected one of urgent, high, normal, low"),
    ("sla-deadline", {"priority": "high", "received_at": "yesterday"},
     "received_at: 'yesterday' is not an ISO 8601 date and time"),
    ("csv-statistics", {"path": str(SAMPLES / "kpi_daily.csv"), "columns": ["profit"]},
     "columns: 'profit' not in the file; columns are: date, visitors"),
    ("compare-periods", {"path": str(SAMPLES / "kpi_daily.csv"), "date_column": "day"},
     "date_column: 'day' not in the file"),
    ("compare-periods", {"path": str(SAMPLES / "kpi_daily.csv"), "period_days": 30},
     "period_days: no rows in the previous 30-day window"),
    ("render-chart", {"csv_path": str(SAMPLES / "kpi_daily.csv"), "x_column": "date",
                      "y_columns": ["profit"]}, "y_columns: no column 'profit'"),
    ("render-chart", {"x_column": "date", "y_columns": ["revenue"]},
     "csv_path or rows: give the data to plot"),
    ("extract-action-items", {"turns": [], "meeting_date": "7 Oct"},
     "meeting_date: '7 Oct' is not a YYYY-MM-DD date"),
    ("validate-invoice", {"invoice": {}, "as_of": "soon"}, "as_of: 'soon' is not a YYYY-MM-DD"),
    ("append-ledger-row", {"invoice": {"vendor": "V"}, "ledger_path": "/tmp/x.csv"},
     "invoice: cannot record an invoice without invoice_number, total"),
    ("file-checksum", {"paths": ["/no/such"]}, "paths[0]: no such file: /no/such"),
    ("extract-links", {"path": str(SAMPLES / "article.html"), "base_url": "ftp://x"},
     "base_url: 'ftp://x' must start with http:// or https://"),
    ("csv-deduplicate", {"path": str(SAMPLES / "kpi_daily.csv"), "key_columns": ["id"]},
     "key_columns: 'id' not in the file"),
    ("zip-files", {"files": ["", None]}, "files: nothing to archive"),
    ("parse-work-log", {"path": str(SAMPLES / "ticket_question.txt")},
     "path: ticket_question.txt has no dated work entries"),
    ("compose-weekly-report-zh", {"entries": []}, "entries: 没有工作条目"),
    ("redact-pii", {"text": "x", "kinds": ["passport"]}, "kinds: unknown passport"),
    ("text-statistics", {"text": ""}, "text: nothing to measure"),
]


@pytest.mark.parametrize(("name", "inputs", "message"), ERRORS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(ERRORS)])
def test_bad_input_errors_name_the_input(name: str, inputs: dict[str, Any], message: str,
                                         tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        call_skill(name, **inputs)
    assert str(caught.value).startswith(message)


def test_make_samples_regenerates_identical_pdfs(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SAMPLES / "make_samples.py"), str(tmp_path)], check=True,
                   capture_output=True)
    for name in ("quarterly_report.pdf", "invoice.pdf"):
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
