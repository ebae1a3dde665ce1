"""The loader against 1,321 real SKILL.md files from eight public repositories."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO

import pytest

from skillgrove.runtime.cli import main
from skillgrove.skills import discover_skills
from tests.conftest import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpora is not here")


def test_every_real_skill_file_is_processed() -> None:
    catalog = discover_skills([CORPUS])
    assert len(catalog.loads) == 1321
    assert len(catalog.skills) == 1313
    rejected = Counter(rule for load in catalog.rejected for rule in load.rejected_by)
    assert rejected == {"frontmatter-invalid-yaml": 4, "frontmatter-missing": 3,
                        "description-missing": 1}
    warnings = Counter(d.rule for d in catalog.diagnostics if not d.is_error)
    assert warnings["name-format"] == 92  # e.g. 'Cloudinary Automation'
    assert warnings["description-too-long"] == 2
    assert warnings["duplicate-name"] == 14  # the same skill copied into two repositories
    assert len(catalog.active) == len(catalog.skills) - 14
    # Anthropic's own skills answer for their names, not the copies in ComposioHQ's collection.
    copied = [s for s in catalog.shadowed if s.winner.root == CORPUS
              and s.hidden.relative_path.startswith("ComposioHQ__")]
    assert len(copied) == 9
    assert all(s.winner.relative_path.startswith("anthropics__skills/") for s in copied)
    assert len({s.id for s in catalog.skills}) == 1313


def test_check_cli_on_the_corpus() -> None:
    out = StringIO()
    code = main(["check", str(CORPUS), "--json"], out)
    payload = json.loads(out.getvalue())
    assert code == 1
    assert payload["summary"]["skill_files"] == 1321
    assert payload["summary"]["skills_rejected"] == 8
    first_error = next(d for d in payload["diagnostics"] if d["severity"] == "error")
    assert first_error["line"] is not None and first_error["path"].endswith("SKILL.md")


def test_chinese_skills_load_with_their_text() -> None:
    catalog = discover_skills([CORPUS / "JimLiu__baoyu-skills"])
    assert catalog.skills
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in s.description + s.body()[:2000])
               for s in catalog.skills)
