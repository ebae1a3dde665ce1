"""Run bundled skills in-process on the sample files, checking their declared contracts.

``run_skill(name, **inputs)`` loads ``library/skills/<name>/main.py`` by path, validates the inputs
against the skill's ``inputs`` schema, calls the entry function, and validates the result
against its ``outputs`` schema, so every test also checks that SKILL.md tells the truth.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from skillgrove.skills.loader import load_skill
from skillgrove.skills.model import Skill

LIBRARY = Path(__file__).resolve().parents[2] / "library"
SAMPLES = LIBRARY / "samples"


@cache
def skill_definition(name: str) -> Skill:
    loaded = load_skill(LIBRARY / "skills" / name / "SKILL.md", LIBRARY)
    assert loaded.skill is not None, loaded.diagnostics
    return loaded.skill


@cache
def skill_module(name: str) -> ModuleType:
    definition = skill_definition(name)
    assert definition.entrypoint is not None, f"{name} is not executable"
    file_name, function = definition.entrypoint.target.split(":")
    module_name = "skillgrove_library_" + name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, definition.folder / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    assert callable(getattr(module, function))
    return module


def run_skill(name: str, **inputs: Any) -> dict[str, Any]:
    definition = skill_definition(name)
    errors = list(Draft202012Validator(dict(definition.inputs or {})).iter_errors(inputs))
    assert not errors, f"test passes inputs that {name}'s schema rejects: {errors[0].message}"
    function = definition.entrypoint.target.split(":")[1]  # type: ignore[union-attr]
    result = getattr(skill_module(name), function)(**inputs)
    errors = list(Draft202012Validator(dict(definition.outputs or {})).iter_errors(result))
    assert not errors, f"{name} returned output its schema rejects: {errors[0].message}"
    return dict(result)


@pytest.fixture
def samples() -> Path:
    return SAMPLES


def call_skill(name: str, **inputs: Any) -> Any:
    """Call the entry function without schema checks (for inputs the schema would reject)."""
    function = skill_definition(name).entrypoint.target.split(":")[1]  # type: ignore[union-attr]
    return getattr(skill_module(name), function)(**inputs)
