"""Groups: YAML-defined DAGs of skills, their expressions, loading and validation."""

from skillgrove.groups.expressions import parse_template, render, render_value
from skillgrove.groups.library import Library, load_library
from skillgrove.groups.loader import GroupLoad, load_group_file, load_group_text
from skillgrove.groups.model import Group, InputSpec, RetryPolicy, Step
from skillgrove.groups.validate import validate_group

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
