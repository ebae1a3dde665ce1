"""``skillgrove check``: exit codes, text and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from skillgrove.runtime.cli import main
from skillgrove.runtime.paths import bundled_library
from tests.helpers import copy_fixture_library, write_group, write_skill


def run(args: list[str]) -> tuple[int, str]:
    out = StringIO()
    return main(args, out), out.getvalue()


def test_clean_library_exits_zero(fixture_library: Path) -> None:
    code, text = run(["check", str(fixture_library)])
    assert code == 0
    assert "7 SKILL.md files: 7 loaded (0 unavailable here), 0 rejected; 2 group files: 2 valid" \
        in text
    assert "0 errors, 0 warnings" in text


def test_bundled_library_is_clean() -> None:
    code, text = run(["check", str(bundled_library())])
    assert code == 0, text


def test_errors_exit_one_with_file_line_column(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path)
    path = write_group(root, "bad.yaml", "id: bad\ndescription: d\nexamples: [x]\nsteps:\n"
                       "  - id: a\n    skill: summarise-text\n")
    code, text = run(["check", str(root)])
    assert code == 1
    assert (f"{path}:6:12: error: steps[0].skill: unknown skill 'summarise-text' "
            "(did you mean 'summarize-text'?) [unknown-skill]") in text.splitlines()


def test_json_output(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path)
    write_group(root, "bad.yaml", "id: bad\ndescription: d\nexamples: [x]\nsteps:\n"
                "  - id: a\n    skill: summarise-text\n")
    code, text = run(["check", str(root), "--json"])
    payload = json.loads(text)
    assert code == 1 and payload["ok"] is False
    assert payload["summary"]["groups_valid"] == 2
    assert payload["diagnostics"][0] == {
        "severity": "error", "rule": "unknown-skill",
        "message": "steps[0].skill: unknown skill 'summarise-text'",
        "path": str(root / "groups" / "bad.yaml"), "line": 6, "column": 12,
        "hint": "did you mean 'summarize-text'?", "subject": "a"}


def test_a_group_file_can_be_checked_alone(fixture_library: Path) -> None:
    code, text = run(["check", str(fixture_library / "groups" / "report-analysis.yaml")])
    assert code == 0, text


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    code, text = run(["check", str(tmp_path / "nope")])
    assert code == 1
    assert "no such file or folder" in text


def test_usage_error_exits_two() -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--no-such-flag"])
    assert info.value.code == 2


def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "SKILL.md").write_text("---\nname: s\ndescription: x: y\n---\n")
    result = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "check", str(tmp_path)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "SKILL.md:3:15: error: frontmatter is not valid YAML" in result.stdout


def test_a_comparison_that_is_never_true_is_a_warning_with_its_fix(tmp_path: Path) -> None:
    root = copy_fixture_library(tmp_path)
    write_skill(root / "skills", "check-text", """
        ---
        name: check-text
        description: Say whether a text is valid.
        inputs:
          properties:
            text: {type: string}
        outputs:
          properties:
            valid: {type: boolean}
        ---
        Checks a text.
        """)
    path = write_group(root, "guarded.yaml", "id: guarded\ndescription: d\nexamples: [x]\n"
                       "steps:\n  - id: check\n    skill: check-text\n    with: {text: t}\n"
                       "  - id: s\n    skill: summarize-text\n    needs: [check]\n"
                       "    if: ${{ steps.check.outputs.valid == 'true' }}\n"
                       "    with: {text: t}\n")
    code, text = run(["check", str(root)])
    assert code == 0, text  # warnings leave the library valid
    assert (f"{path}:11:13: warning: steps[1].if: steps.check.outputs.valid == 'true' is never "
            "true: steps.check.outputs.valid is a boolean and 'true' is a string (compare with "
            "true, not 'true') [never-equal]") in text.splitlines()
    assert "3 group files: 3 valid" in text and "0 errors, 1 warning" in text
    quiet_code, quiet = run(["check", str(root), "--quiet"])
    assert quiet_code == 0 and "never-equal" not in quiet


def test_the_summary_counts_drafts_apart(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "lib"
    shutil.copytree(bundled_library(), root)
    drafts = root / "groups" / "drafts"
    drafts.mkdir()
    (drafts / "copy.yaml").write_text((root / "groups" / "report-analysis.yaml").read_text(
        encoding="utf-8").replace("id: report-analysis", "id: report-analysis-copy", 1),
        encoding="utf-8")
    (drafts / "broken.yaml").write_text("id: broken-draft\ndescription: x\nexamples: [x]\n"
                                        "steps:\n  - id: a\n    skill: nope\n", encoding="utf-8")
    out = StringIO()
    assert main(["check", "--library", str(root)], out) == 1
    assert "13 group files: 11 valid (drafts in groups/drafts/: 1 valid of 2)" in out.getvalue()
    out = StringIO()
    main(["check", "--library", str(root), "--json"], out)
    summary = json.loads(out.getvalue())["summary"]
    assert (summary["groups_valid"], summary["drafts"], summary["drafts_valid"]) == (11, 2, 1)
