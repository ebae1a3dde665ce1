"""What the layers import: each package's lazy names come from one helper in the lowest layer,
and no module imports a layer above its own (skills, groups < graph < runtime)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import skillgrove.graph
import skillgrove.groups
import skillgrove.skills
from skillgrove.skills import lazy_attribute

PACKAGE = Path(skillgrove.skills.__file__).resolve().parent.parent
LAYER = {"skills": 0, "groups": 0, "graph": 1, "runtime": 2}
"""Lower numbers are lower layers; skills and groups share the lowest (groups read skills)."""


def imported_layers(path: Path) -> list[tuple[int, str]]:
    """(line, layer) of every ``skillgrove.<layer>`` a module imports, wherever the import is
    (a function's deferred import counts as much as one at the top)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "skillgrove" and len(parts) > 1 and parts[1] in LAYER:
                found.append((node.lineno, parts[1]))
    return found


@pytest.mark.parametrize("layer", ["skills", "groups", "graph"])
def test_no_module_imports_a_higher_layer(layer: str) -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{line}: imports skillgrove.{other}"
             for path in sorted((PACKAGE / layer).glob("*.py"))
             for line, other in imported_layers(path) if LAYER[other] > LAYER[layer]]
    assert wrong == []


def test_the_lazy_packages_use_the_one_helper_of_the_lowest_layer() -> None:
    for package in (skillgrove.groups, skillgrove.graph):
        source = Path(package.__file__ or "").read_text(encoding="utf-8")
        assert "from skillgrove.skills import lazy_attribute" in source
        assert "importlib" not in source


def test_lazy_attribute_imports_on_first_use_and_keeps_the_value() -> None:
    namespace: dict[str, Any] = {}
    where = {"did_you_mean": "diagnostics"}
    found = lazy_attribute("skillgrove.skills", where, namespace, "did_you_mean")
    from skillgrove.skills.diagnostics import did_you_mean

    assert found is did_you_mean and namespace == {"did_you_mean": did_you_mean}
    with pytest.raises(AttributeError, match=re.escape(
            "module 'skillgrove.skills' has no attribute 'nope'")):
        lazy_attribute("skillgrove.skills", where, namespace, "nope")


@pytest.mark.parametrize("module", [skillgrove.skills, skillgrove.groups, skillgrove.graph])
def test_an_unknown_name_of_a_package_is_an_attribute_error(module: Any) -> None:
    with pytest.raises(AttributeError, match=re.escape(
            f"module '{module.__name__}' has no attribute")):
        module.not_a_name  # noqa: B018


def test_version_is_read_only_when_asked_for() -> None:
    script = ("import sys\nfrom skillgrove.runtime import cli\ncli.build_parser()\n"
              "print('importlib.metadata' in sys.modules)\n")
    parsed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=True, timeout=120)
    assert parsed.stdout.strip() == "False"
    shown = subprocess.run([sys.executable, "-m", "skillgrove.runtime.cli", "--version"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and shown.stdout.startswith("skillgrove "), shown
