"""The published group schema agrees with the loader; public APIs are sorted and complete."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from skillgrove.groups.loader import GROUP_FIELDS, INPUT_FIELDS, RETRY_FIELDS, STEP_FIELDS
from skillgrove.groups.schema import group_schema
from skillgrove.runtime.paths import bundled_library
from tests.conftest import FIXTURES


def test_schema_is_valid_and_matches_the_loader() -> None:
    schema = group_schema()
    Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]) == set(GROUP_FIELDS)
    assert set(schema["$defs"]["step"]["properties"]) == set(STEP_FIELDS)
    spec = schema["properties"]["inputs"]["additionalProperties"]["oneOf"][2]
    assert set(spec["properties"]) == set(INPUT_FIELDS)
    retry = schema["$defs"]["step"]["properties"]["retry"]["oneOf"][1]
    assert set(retry["properties"]) == set(RETRY_FIELDS)


@pytest.mark.parametrize("path", sorted([*FIXTURES.glob("library/groups/*.yaml"),
                                         *bundled_library().glob("groups/*.yaml")]),
                         ids=lambda p: p.name)
def test_valid_groups_pass_the_schema(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = list(Draft202012Validator(group_schema()).iter_errors(data))
    assert errors == []


def test_schema_catches_an_unknown_step_field() -> None:
    data = {"id": "g", "description": "d", "steps": [{"id": "a", "skill": "x", "depends": []}]}
    assert list(Draft202012Validator(group_schema()).iter_errors(data))


@pytest.mark.parametrize("module", ["skillgrove", "skillgrove.skills", "skillgrove.groups",
                                    "skillgrove.graph"])
def test_public_all_is_sorted_and_complete(module: str) -> None:
    mod = importlib.import_module(module)
    exported = mod.__all__
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(mod, name), name
