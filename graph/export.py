"""A group's DAG as Mermaid or Graphviz DOT text, from its node record."""

from __future__ import annotations

import json
from collections.abc import Mapping

from skillgrove.graph.model import GroupNode, NodeRecord


def _label(step: Mapping[str, object]) -> str:
    kind = "group " if step.get("kind") == "group" else ""
    cond = " (if)" if step.get("conditional") else ""
    return f"{step['id']}: {kind}{step['target']}{cond}"


def to_mermaid(group: NodeRecord) -> str:
    lines = ["flowchart TD"]
    steps = GroupNode(group).steps
    for step in steps:
        shape = ('{{"', '"}}') if step.get("kind") == "group" else ('["', '"]')
        lines.append(f"    {step['id']}{shape[0]}{_label(step)}{shape[1]}")
    for step in steps:
        for need in step.get("needs", ()):
            lines.append(f"    {need} --> {step['id']}")
    return "\n".join(lines) + "\n"


def to_dot(group: NodeRecord) -> str:
    lines = [f"digraph {json.dumps(group.name)} {{", "    rankdir=LR;"]
    steps = GroupNode(group).steps
    for step in steps:
        shape = "box3d" if step.get("kind") == "group" else "box"
        lines.append(f"    {json.dumps(step['id'])} [label={json.dumps(_label(step))}, "
                     f"shape={shape}];")
    for step in steps:
        for need in step.get("needs", ()):
            lines.append(f"    {json.dumps(need)} -> {json.dumps(step['id'])};")
    lines.append("}")
    return "\n".join(lines) + "\n"
