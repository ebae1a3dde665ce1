"""What retrieval reads for each skill and group: texts and node records built from the library.

A skill's text: its name in words, description, tags, the key facts of its contract (input and
output names with their descriptions) and the start of its body. A group's text: its name,
description, examples, its member skills with their descriptions, and how they connect ("pdf to
text, then extract metrics") — never the name alone.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from skillgrove.graph.model import NodeKind, NodeRecord
from skillgrove.groups.model import Group
from skillgrove.skills.model import Skill

BODY_CHARS = 600
GROUP_PREFIX = "group:"


def words(name: str) -> str:
    """A name as the words it is made of: separators and camelCase read as spaces
    (``get-current-time``, ``GET_CURRENT_TIME`` and ``getCurrentTime`` all give three).

    >>> words("getHTTPStatus_code")
    'get HTTP Status code'
    """
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return re.sub(r"[-_./\s]+", " ", spaced).strip()


def _contract(schema: Mapping[str, Any] | None) -> str:
    if not schema:
        return ""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    parts = []
    for key, spec in props.items():
        described = spec.get("description", "") if isinstance(spec, Mapping) else ""
        parts.append(f"{words(str(key))} {described}".strip())
    return "; ".join(parts)


def _body_start(body: str) -> str:
    text = re.sub(r"```.*?```", " ", body, flags=re.S)
    text = re.sub(r"[#>*_`|\[\]()-]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()[:BODY_CHARS]


def skill_text(skill: Skill) -> str:
    pieces = [words(skill.name), skill.description]
    if skill.tags:
        pieces.append("tags: " + ", ".join(skill.tags))
    inputs, outputs = _contract(skill.inputs), _contract(skill.outputs)
    if inputs:
        pieces.append("inputs: " + inputs)
    if outputs:
        pieces.append("outputs: " + outputs)
    try:
        body = skill.body()
    except OSError:
        body = ""
    start = _body_start(body)
    if start:
        pieces.append(start)
    return "\n".join(pieces)


def group_text(group: Group, skills: Mapping[str, Skill]) -> str:
    pieces = [words(group.name), group.description]
    if group.examples:
        pieces.append("examples: " + " | ".join(group.examples))
    members = []
    for step in group.steps:
        skill = skills.get(step.skill) if step.skill else None
        if skill is not None:
            members.append(f"{words(skill.name)}: {skill.description}")
        elif step.group:
            members.append(f"{words(step.group)} (group)")
    if members:
        pieces.append("steps: " + " ; ".join(members))
    flow = [f"{words(group.step(a).target)} then {words(group.step(b).target)}"
            for a, b in group.edges()]
    if flow:
        pieces.append("flow: " + ", ".join(flow))
    if group.tags:
        pieces.append("tags: " + ", ".join(group.tags))
    return "\n".join(pieces)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def skill_record(skill: Skill, shadowed_by: str | None = None) -> NodeRecord:
    """``shadowed_by``: the id of the same-named skill that answers for the name, when this one
    does not (it is indexed all the same, under its own id)."""
    text = skill_text(skill)
    data = {
        "description": skill.description,
        "tags": list(skill.tags),
        "effects": list(skill.effects),
        "path": str(skill.folder),
        "available": skill.available,
        "unavailable_reasons": list(skill.availability.reasons),
        "executable": skill.is_executable,
        "inputs": list(skill.input_properties()),
        "required_inputs": list(skill.required_inputs()),
        "outputs": list(skill.output_properties()),
        "input_schema": dict(skill.inputs) if skill.inputs else None,
        "output_schema": dict(skill.outputs) if skill.outputs else None,
        "root": str(skill.root),
        "entrypoint": skill.entrypoint.kind if skill.entrypoint else None,
    }
    if shadowed_by is not None:
        data["shadowed_by"] = shadowed_by
    return NodeRecord(skill.id, NodeKind.SKILL, skill.name, text,
                      _digest(skill.content_hash, text, data), data)


def group_id(group: Group) -> str:
    return GROUP_PREFIX + group.id


EXAMPLE_PREFIX = "example:"


def example_id(group_node_id: str, example: str) -> str:
    """The node id of one example request of a group (from the group's node id)."""
    digest = hashlib.sha256(example.strip().encode()).hexdigest()[:12]
    return f"{EXAMPLE_PREFIX}{group_node_id.removeprefix(GROUP_PREFIX)}:{digest}"


def example_records(group: Group) -> list[NodeRecord]:
    """One node per distinct example request of the group."""
    out = []
    for index, example in enumerate(dict.fromkeys(e.strip() for e in group.examples if e.strip())):
        out.append(NodeRecord(example_id(group_id(group), example), NodeKind.EXAMPLE,
                              f"{group.id} example {index + 1}", example,
                              _digest(example, group.id), {"group": group_id(group)}))
    return out


def group_record(group: Group, skills: Mapping[str, Skill]) -> NodeRecord:
    text = group_text(group, skills)
    members = [skills[s.skill].id for s in group.steps if s.skill and s.skill in skills]
    data = {
        "description": group.description,
        "examples": list(group.examples),
        "path": str(group.path),
        "members": members,
        "member_names": [s.target for s in group.steps],
        "steps": [{"id": s.id, "target": s.target, "kind": s.kind, "needs": list(s.needs),
                   "conditional": s.if_ is not None} for s in group.steps],
        "edges": [[group.step(a).target, group.step(b).target] for a, b in group.edges()],
        "inputs": [{"name": i.name, "type": i.type, "required": i.required,
                    "has_default": i.has_default, "description": i.description}
                   for i in group.inputs],
        "subgroups": [s.group for s in group.steps if s.group],
        "expose": list(group.expose),
    }
    return NodeRecord(group_id(group), NodeKind.GROUP, group.name, text,
                      _digest(group.content_hash, text, data), data)
