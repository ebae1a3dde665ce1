"""Checking groups against the library: skills and sub-groups exist, parameters fit their schemas.

A group that passes here cannot fail at run time for a reason visible at load time: an unknown
step or skill, a missing or unknown parameter, an output the skill does not declare, or a value
whose type cannot match the parameter it feeds.

Comparisons whose answer the declared types already give are warnings: a boolean output compared
with ``'true'`` (the GitHub Actions habit, where outputs are strings) is never equal, so the step
it guards never runs; a number compared with a string is never equal either, and ordering them
fails when the step runs. The types come from the skills' output schemas
(``steps.X.outputs.Y``) and the group's inputs (``inputs.Y``); ``context`` values are not typed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from skillgrove.groups.expressions import (
    FUNCTIONS,
    Binary,
    Call,
    ExprPart,
    Index,
    ListLit,
    Lit,
    Node,
    Template,
    Unary,
    has_expression,
    parse_expression,
    parse_template,
    references,
    start_offset,
    walk,
)
from skillgrove.groups.loader import STEP_FIELDS, GroupReporter, find_cycle, iter_templates
from skillgrove.groups.model import Group, Step
from skillgrove.skills import limits
from skillgrove.skills._yaml import PathKey
from skillgrove.skills.diagnostics import Diagnostic, Severity, did_you_mean
from skillgrove.skills.errors import ExpressionSyntaxError
from skillgrove.skills.loader import UnreadableFile, check_value, read_regular_file
from skillgrove.skills.model import Skill


def validate_group(group: Group, skills: Mapping[str, Skill], groups: Mapping[str, Group],
                   text: str = "") -> list[Diagnostic]:
    """Diagnostics for ``group`` given the library's active skills and its groups (by id)."""
    report = GroupReporter(group.path, text or _read(group), group.source)
    report.subject = group.id
    input_types = {spec.name: spec.type for spec in group.inputs}
    by_id = {step.id: step for step in group.steps}
    step_keys: dict[int, list[str]] = {}  # step index -> the keys written in it
    for key in group.source.keys:
        if (len(key) == 3 and key[0] == "steps" and isinstance(key[1], int)
                and isinstance(key[2], str)):
            step_keys.setdefault(key[1], []).append(key[2])
    for step in group.steps:
        where: PathKey = ("steps", step.index)
        target_skill = skills.get(step.skill) if step.skill else None
        target_group = groups.get(step.group) if step.group else None
        if step.skill and target_skill is None:
            report.error("unknown-skill", (*where, "skill"), f"unknown skill '{step.skill}'",
                         report.suggest(step.skill, skills), subject=step.id)
        if step.group and target_group is None:
            report.error("unknown-group", (*where, "group"), f"unknown group '{step.group}'",
                         report.suggest(step.group, groups), subject=step.id)
        if target_skill is not None and not target_skill.available:
            report.warn("skill-unavailable", (*where, "skill"),
                        f"skill '{target_skill.name}' is unavailable here: "
                        + "; ".join(target_skill.availability.reasons), subject=step.id)
        if target_skill is not None and _instruction_only(target_skill) and step.with_:
            report.warn("with-ignored", (*where, "with"), f"skill '{target_skill.name}' is "
                        "instruction-only: nothing runs, so 'with:' is not used",
                        "remove 'with:'; the agent is given the skill's instructions instead",
                        key=True, subject=step.id)
        params, required, open_params = _parameters(target_skill, target_group)
        misplaced = _misplaced_inputs(step, where, params, step_keys.get(step.index, ()), report)
        if params is not None:
            _check_parameters(step, where, params, required, open_params, report, misplaced)
            root = target_skill.inputs if target_skill is not None else None
            _check_types(step, where, params, root, skills, groups, by_id, input_types, report)
        _check_output_refs(step.with_, (*where, "with"), skills, groups, by_id, report, step.id)
        if step.if_ is not None and "${{" in step.if_:
            _check_output_refs(step.if_, (*where, "if"), skills, groups, by_id, report, step.id)

    def node_type(node: Node) -> str | None:
        return _node_type(node, skills, groups, by_id, input_types)

    for step in group.steps:
        where = ("steps", step.index)
        for path, node, offset in _expressions(step.with_, (*where, "with")):
            _check_comparisons(node, path, offset, node_type, report, step.id)
        if step.if_ is not None:
            condition = _condition(step.if_)
            if condition is not None:
                _check_comparisons(condition[0], (*where, "if"), condition[1], node_type, report,
                                   step.id)
    for path, node, offset in _expressions(group.outputs, ("outputs",)):
        _check_comparisons(node, path, offset, node_type, report, None)
    _check_output_refs(group.outputs, ("outputs",), skills, groups, by_id, report, None)
    cycle = _subgroup_cycle(group, groups)
    if cycle:
        report.error("group-cycle", (), "sub-groups call each other in a loop: "
                     + " -> ".join(cycle), "a group may not call itself, directly or not")
    else:
        chain = _deep_nesting(group, groups)
        if chain:
            shown = chain if len(chain) <= 6 else [*chain[:3], "...", *chain[-2:]]
            report.error("limit-exceeded", (), f"sub-groups nest {len(chain) - 1} levels deep "
                         f"({' -> '.join(shown)}); at most {limits.GROUP_MAX_NESTING} "
                         "(limit GROUP_MAX_NESTING)", "call fewer groups inside groups")
    return report.items


def _instruction_only(skill: Skill) -> bool:
    """Nothing to run and no declared inputs or outputs: its steps take no values and give
    none (a skill without an entrypoint that declares its schemas is taken at its word)."""
    return not skill.is_executable and skill.inputs is None and skill.outputs is None


def _read(group: Group) -> str:
    try:
        return read_regular_file(group.path, limits.GROUP_FILE_MAX_BYTES).decode(
            "utf-8", errors="replace")
    except UnreadableFile:
        return ""


def _parameters(skill: Skill | None, group: Group | None
                ) -> tuple[dict[str, Any] | None, tuple[str, ...], bool]:
    """(declared parameters with their schemas, required names, extra parameters allowed)."""
    if skill is not None:
        if skill.inputs is None:
            return None, (), True
        props = dict(skill.input_properties())
        extra = skill.inputs.get("additionalProperties", not props)
        return props, skill.required_inputs(), extra is not False
    if group is not None:
        props = {spec.name: {"type": spec.type} | ({"enum": list(spec.enum)} if spec.enum else {})
                 for spec in group.inputs}
        required = tuple(s.name for s in group.inputs if s.required and not s.has_default)
        return props, required, False
    return None, (), True


def _misplaced_inputs(step: Step, where: PathKey, params: Mapping[str, Any] | None,
                      step_keys: Sequence[str], report: GroupReporter) -> dict[str, int]:
    """Report the step's unknown fields that are inputs of what it calls (the lines under
    ``with:`` were not indented): one error, at the first, the others folded under it. Their
    names, each with the index of that error."""
    names = [name for name in step_keys if name not in STEP_FIELDS and params is not None
             and name in params and name not in step.with_]
    if not names:
        return {}

    def error(name: str, hint: str | None) -> Diagnostic:
        return report.make(Severity.ERROR, MISPLACED_INPUT, (*where, name),
                           f"'{name}' is an input of {step.kind} '{step.target}', not a field "
                           "of the step", hint, key=True, subject=step.id)

    others = " and ".join(repr(n) for n in names[1:])
    them = f"it{' and ' + others if others else ''}"
    head = error(names[0], f"indent {them} under 'with:'" if "with" in step_keys
                 else f"move {them} under a 'with:' of the step")
    report.items.append(head.folding([error(name, None) for name in names[1:]]))
    return dict.fromkeys(names, len(report.items) - 1)


MISPLACED_INPUT = "misplaced-input"
"""The rule of an input written beside ``with:`` instead of under it; it replaces the loader's
``unknown-field`` error for the same key (see :func:`groups.library.load_library`)."""


def _check_parameters(step: Step, where: PathKey, params: Mapping[str, Any],
                      required: tuple[str, ...], open_params: bool,
                      report: GroupReporter, misplaced: Mapping[str, int]) -> None:
    target = f"{step.kind} '{step.target}'"
    for name in step.with_:
        if name not in params and not open_params:
            report.error("unknown-parameter", (*where, "with", str(name)),
                         f"{target} has no input '{name}'",
                         did_you_mean(str(name), params) or "its inputs: " + ", ".join(params),
                         key=True, subject=step.id)
    missing = [name for name in required if name not in step.with_]
    if not missing:
        return
    diagnostic = report.make(Severity.ERROR, "missing-parameter",
                             (*where, "with") if step.with_ else where,
                             f"{target} needs input {', '.join(repr(m) for m in missing)}",
                             "pass it under 'with:'", subject=step.id)
    if all(name in misplaced for name in missing):  # indenting them is the one fix
        cause = misplaced[missing[0]]
        report.items[cause] = report.items[cause].folding([replace(diagnostic, hint=None)])
    else:
        report.items.append(diagnostic)


def _check_types(step: Step, where: PathKey, params: Mapping[str, Any],
                 root: Mapping[str, Any] | None,
                 skills: Mapping[str, Skill], groups: Mapping[str, Group],
                 steps: Mapping[str, Step], input_types: Mapping[str, str],
                 report: GroupReporter) -> None:
    for name, value in step.with_.items():
        schema = params.get(name)
        if not isinstance(schema, Mapping):
            continue
        expected = _schema_types(schema)
        path: PathKey = (*where, "with", str(name))
        if isinstance(value, str) and "${{" in value:
            try:
                template = parse_template(value)
            except Exception:  # already reported by the loader
                continue
            actual, origin = _template_type(template, skills, groups, steps, input_types)
            if actual and expected and not _compatible(actual, expected):
                report.error("type-mismatch", path,
                             f"'{name}' expects {' or '.join(sorted(expected))} but "
                             f"{origin} is {actual}", subject=step.id)
            continue
        if not _literal(value):
            continue
        # The skill's whole input schema is the root, so its $refs resolve as they will at run
        # time; check_value skips (with a warning) what would be slow or unsafe to check.
        check = (check_value(value, root, ("properties", name)) if root is not None
                 else check_value(value, schema))
        if check.skipped:
            report.warn("value-unchecked", path, f"'{name}' not checked against the input "
                        f"schema: {check.skipped}", subject=step.id)
        elif check.problems:
            report.error("type-mismatch", path,
                         f"'{name}' does not fit the input schema: {check.problems[0]}",
                         subject=step.id)


def _literal(value: Any) -> bool:
    """Whether a nested value holds no ``${{ }}`` anywhere (without recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "${{" in item:
                return False
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _schema_types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _compatible(actual: str, expected: set[str]) -> bool:
    if actual in expected:
        return True
    return actual == "integer" and "number" in expected


def _template_type(template: Template, skills: Mapping[str, Skill], groups: Mapping[str, Group],
                   steps: Mapping[str, Step], input_types: Mapping[str, str]
                   ) -> tuple[str | None, str]:
    if not template.is_single_expression:
        return "string", "the text with '${{ }}' in it"
    part = template.parts[0]
    assert isinstance(part, ExprPart)
    return _node_type(part.node, skills, groups, steps, input_types), f"'{part.source.strip()}'"


def _node_type(node: Node, skills: Mapping[str, Skill], groups: Mapping[str, Group],
               steps: Mapping[str, Step], input_types: Mapping[str, str]) -> str | None:
    """The static type of an expression where it is known, else None."""
    if isinstance(node, Lit):
        value = node.value
        if value is None:
            return None
        if isinstance(value, bool):
            return "boolean"
        return "integer" if isinstance(value, int) else (
            "number" if isinstance(value, float) else "string")
    if isinstance(node, ListLit):
        return "array"
    if isinstance(node, Unary):
        return "boolean" if node.op == "!" else "number"
    if isinstance(node, Binary):
        if node.op in ("==", "!=", "<", "<=", ">", ">="):
            return "boolean"
        if node.op == "+":
            left = _node_type(node.left, skills, groups, steps, input_types)
            right = _node_type(node.right, skills, groups, steps, input_types)
            if "string" in (left, right):
                return "string"
            if left == right == "integer":
                return "integer"
            if left in ("integer", "number") and right in ("integer", "number"):
                return "number"
        return None
    if isinstance(node, Call):
        entry = FUNCTIONS.get(node.func)
        return (entry[3] or None) if entry else None
    if isinstance(node, Index) and not isinstance(node.key, Lit):
        return None
    refs = list(references(node))
    if len(refs) != 1:
        return None
    ref = refs[0]
    if ref.root == "inputs" and len(ref.path) == 1:
        return input_types.get(str(ref.path[0]))
    if ref.root == "steps" and len(ref.path) == 3 and ref.path[1] in ("outputs", "output"):
        schema = _output_schema(steps.get(str(ref.path[0])), skills, groups, str(ref.path[2]))
        if schema is not None:
            types = _schema_types(schema)
            return next(iter(types)) if len(types) == 1 else None
    if ref.root == "steps" and len(ref.path) == 2 and ref.path[1] == "status":
        return "string"
    return None


def _output_schema(step: Step | None, skills: Mapping[str, Skill], groups: Mapping[str, Group],
                   name: str) -> Mapping[str, Any] | None:
    if step is None or step.skill is None:
        return None
    skill = skills.get(step.skill)
    if skill is None:
        return None
    schema = skill.output_properties().get(name)
    return schema if isinstance(schema, Mapping) else None


def _declared_outputs(step: Step, skills: Mapping[str, Skill],
                      groups: Mapping[str, Group]) -> list[str] | None:
    """Output names a step is known to produce, or None when it does not say."""
    if step.skill:
        skill = skills.get(step.skill)
        if skill is not None and _instruction_only(skill):
            return []
        if skill is None or skill.outputs is None:
            return None
        if skill.outputs.get("additionalProperties") is True:
            return None
        props = skill.output_properties()
        return list(props) if props else None
    group = groups.get(step.group or "")
    return list(group.outputs) if group is not None else None


def _check_output_refs(value: Any, where: PathKey, skills: Mapping[str, Skill],
                       groups: Mapping[str, Group], steps: Mapping[str, Step],
                       report: GroupReporter, subject: str | None) -> None:
    sink = GroupReporter(report.path, "")  # syntax errors were reported by the loader
    for path, template, _ in iter_templates(value, where, sink):
        for part in template.expressions:
            for ref in references(part.node):
                if ref.root != "steps" or len(ref.path) < 3:
                    continue
                if ref.path[1] not in ("outputs", "output"):
                    continue
                step = steps.get(str(ref.path[0]))
                if step is None:
                    continue
                declared = _declared_outputs(step, skills, groups)
                name = str(ref.path[2])
                if declared == [] and step.skill:
                    report.error("unknown-output", path,
                                 f"skill '{step.skill}' of step '{step.id}' is instruction-only "
                                 f"and has no outputs: '{name}' is never set",
                                 "an instruction-only skill runs nothing; its instructions go "
                                 "to the agent, so read results from a skill that runs",
                                 offset=part.offset + ref.offset, subject=subject)
                elif declared is not None and name not in declared:
                    report.error("unknown-output", path,
                                 f"{step.kind} '{step.target}' of step '{step.id}' has no output "
                                 f"'{name}'", did_you_mean(name, declared)
                                 or "its outputs: " + ", ".join(declared),
                                 offset=part.offset + ref.offset, subject=subject)


def _expressions(value: Any, where: PathKey) -> list[tuple[PathKey, Node, int]]:
    """Every expression inside a nested value: (where, parsed node, offset in the string)."""
    sink = GroupReporter(Path(), "")  # syntax errors were reported by the loader
    return [(path, part.node, part.offset) for path, template, _ in
            iter_templates(value, where, sink) for part in template.expressions]


def _condition(text: str) -> tuple[Node, int] | None:
    """A step's ``if`` (``${{ }}`` is optional there) and its offset, None if it does not
    parse (the loader reported it)."""
    try:
        if has_expression(text):
            template = parse_template(text)
            if not template.is_single_expression:
                return None
            part = template.expressions[0]
            return part.node, part.offset
        return parse_expression(text), 0
    except ExpressionSyntaxError:
        return None


_EQUALITY = {"==": "is never true", "!=": "is always true"}
_ORDERING = ("<", "<=", ">", ">=")
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def _check_comparisons(node: Node, where: PathKey, offset: int,
                       node_type: Callable[[Node], str | None], report: GroupReporter,
                       subject: str | None) -> None:
    """Warn where the declared types decide a comparison: never equal, or not comparable."""
    for found in walk(node):
        if not isinstance(found, Binary) or (found.op not in _EQUALITY
                                              and found.op not in _ORDERING):
            continue
        left, right = node_type(found.left), node_type(found.right)
        if left is None or right is None:
            continue
        left_kind, right_kind = _kind(left), _kind(right)
        shown = f"{_show(found.left)} {found.op} {_show(found.right)}"
        sides = (f"{_show(found.left)} is {_article(left_kind)} {left_kind} and "
                 f"{_show(found.right)} is {_article(right_kind)} {right_kind}")
        if found.op in _EQUALITY and left_kind != right_kind:
            message = f"{shown} {_EQUALITY[found.op]}: {sides}"
        elif found.op in _ORDERING and not (left_kind == right_kind
                                            and left_kind in ("number", "string")):
            message = f"{shown} fails when it runs: {sides}, which '{found.op}' cannot order"
        else:
            continue
        report.warn("never-equal" if found.op in _EQUALITY else "cannot-order", where,
                    message, _comparison_hint(found, left_kind, right_kind),
                    offset=offset + start_offset(found), subject=subject)


def _kind(json_type: str) -> str:
    return "number" if json_type == "integer" else json_type


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _show(node: Node) -> str:
    """An operand as the author wrote it, near enough for a message."""
    if isinstance(node, Lit):
        value = node.value
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return "null" if value is None else str(value).lower() if isinstance(value, bool) \
            else str(value)
    refs = list(references(node))
    if len(refs) == 1 and refs[0].offset == start_offset(node) and not isinstance(
            node, Binary | Call | Unary):
        return refs[0].dotted
    if isinstance(node, Call):
        return f"{node.func}(...)"
    return "the expression"


def _comparison_hint(node: Binary, left_kind: str, right_kind: str) -> str | None:
    """The literal to write instead (``compare with true, not 'true'``), when one side is a
    literal that spells a value of the other side's type."""
    for literal, other in ((node.right, left_kind), (node.left, right_kind)):
        if not isinstance(literal, Lit):
            continue
        value = literal.value
        if isinstance(value, str):
            text = value.strip()
            if other == "boolean" and text.lower() in ("true", "false"):
                return f"compare with {text.lower()}, not '{value}'"
            if other == "number" and _NUMBER.fullmatch(text):
                return f"compare with {text}, not '{value}'"
        elif other == "string" and isinstance(value, bool | int | float):
            text = str(value).lower() if isinstance(value, bool) else str(value)
            return f"compare with '{text}', not {text}"
    if "array" in (left_kind, right_kind):
        return "to ask whether a list holds a value, use contains(list, value)"
    if "string" in (left_kind, right_kind) and {left_kind, right_kind} & {"number", "boolean"}:
        return "compare values of the same type, or convert one with string() or number()"
    return None


def _subgroup_cycle(group: Group, groups: Mapping[str, Group]) -> list[str] | None:
    graph: dict[str, list[str]] = {}
    stack = [group.id]
    while stack:
        gid = stack.pop()
        if gid in graph:
            continue
        current = group if gid == group.id else groups.get(gid)
        children = [s.group for s in current.steps if s.group] if current else []
        graph[gid] = [c for c in children if c is not None]
        stack.extend(graph[gid])
    cycle = find_cycle(graph)
    if not cycle or group.id not in cycle:
        return None
    calls_in_order = list(reversed(cycle))  # find_cycle lists a dependency graph's run order
    start = calls_in_order.index(group.id)
    ordered = calls_in_order[start:] + calls_in_order[:start]
    return [*ordered, ordered[0]]


def _deep_nesting(group: Group, groups: Mapping[str, Group]) -> list[str] | None:
    """A chain of sub-group calls from ``group`` longer than ``GROUP_MAX_NESTING``, or None.

    Breadth first, one level at a time, and never more than the limit plus one levels, so it
    ends even on a loop (which is reported on its own)."""
    levels: list[dict[str, str]] = []  # for each depth, group id -> the group that calls it
    frontier = [group.id]
    for _ in range(limits.GROUP_MAX_NESTING + 1):
        following: dict[str, str] = {}
        for gid in frontier:
            current = group if gid == group.id else groups.get(gid)
            for step in current.steps if current is not None else ():
                if step.group and step.group in groups:
                    following.setdefault(step.group, gid)
        if not following:
            return None
        levels.append(following)
        frontier = list(following)
    chain = [frontier[0]]
    for level in reversed(levels):
        chain.append(level[chain[-1]])
    return list(reversed(chain))
