"""Small builders for test libraries written into tmp_path."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

FIXTURE_LIBRARY = Path(__file__).resolve().parent / "fixtures" / "library"


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def copy_fixture_library(dest: Path) -> Path:
    shutil.copytree(FIXTURE_LIBRARY, dest, dirs_exist_ok=True)
    return dest


def write_group(root: Path, name: str, text: str) -> Path:
    path = root / "groups" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path
