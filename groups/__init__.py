"""Groups: YAML-defined DAGs of skills, their expressions, loading and validation.

The names below load on first use, so that importing one small module of this package (the
group model) does not pull in the YAML loader, the validator and JSON Schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillgrove.skills import lazy_attribute

if TYPE_CHECKING:
    from skillgrove.groups.expressions import parse_template, render, render_value
    from skillgrove.groups.library import Library, load_library
    from skillgrove.groups.loader import GroupLoad, load_group_file, load_group_text
    from skillgrove.groups.model import Group, InputSpec, RetryPolicy, Step
    from skillgrove.groups.validate import validate_group

_WHERE = {
    "parse_template": "expressions", "render": "expressions", "render_value": "expressions",
    "Library": "library", "load_library": "library",
    "GroupLoad": "loader", "load_group_file": "loader", "load_group_text": "loader",
    "Group": "model", "InputSpec": "model", "RetryPolicy": "model", "Step": "model",
    "validate_group": "validate",
}

__all__ = [
    "Group",
    "GroupLoad",
    "InputSpec",
    "Library",
    "RetryPolicy",
    "Step",
    "load_group_file",
    "load_group_text",
    "load_library",
    "parse_template",
    "render",
    "render_value",
    "validate_group",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _WHERE, globals(), name)
