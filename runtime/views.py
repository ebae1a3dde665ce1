"""What every interface returns: JSON-able views of skills, groups, toolboxes and runs.

The CLI's ``--json``, the MCP tools' structured content and the HTTP API all serve these same
shapes, so an agent gets the same facts whichever way it asks. Each skill and group carries what
an agent needs to use it: name, description, location, input schema, and whether it can run
here (and why not).

Where a skill is, in every skill view: ``location`` (its SKILL.md), ``root`` (the library root
it was found under) and ``path`` (its folder below that root, ``/``-separated), which is what
tells two same-named skills apart: ``{"name": "pdf", "path": "vendor/PDF", ...}``.

A toolbox has two views. The **compact** one (the default everywhere) is what an agent reads
before acting, a few hundred tokens: what to use, in what order, with which inputs (a compact
signature: name, type, required) and why, in one sentence (``Toolbox.reason``). The **full**
one (``detail="full"``) adds every ranked skill with its scores and explanations, the complete
JSON Schemas, the group candidates and the timings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal

from skillgrove.graph.documents import GROUP_PREFIX
from skillgrove.graph.model import NodeRecord, SkillNode
from skillgrove.graph.retrieval import GroupChoice, ScoredSkill, Toolbox
from skillgrove.graph.runlog import RunRecord
from skillgrove.groups.library import group_effects
from skillgrove.groups.model import Group, InputSpec
from skillgrove.skills.model import Skill

EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}
Detail = Literal["compact", "full"]
DETAILS: tuple[Detail, ...] = ("compact", "full")
DEFAULT_DETAIL: Detail = "compact"
SUMMARY_LIMIT = 200
"""Characters of a description a compact view keeps (its first sentence, at most this)."""
COMPACT_OTHERS = 5
"""Ranked but unselected skills a compact view names (names only)."""


def signature(schema: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The compact signature of an input schema: each input's name, type and whether it is
    required, in the schema's order.

    >>> signature({"properties": {"path": {"type": "string"}, "n": {"type": "integer",
    ...            "default": 0}}, "required": ["path"]})
    [{'name': 'path', 'type': 'string', 'required': True}, {'name': 'n', 'type': 'integer', \
'required': False}]
    """
    if not schema:
        return []
    required = set(schema.get("required") or ())
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type", "any") if isinstance(prop, Mapping) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        out.append({"name": name, "type": str(kind), "required": name in required})
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?。])\s")


def summary(text: str | None) -> str:
    """The first sentence of a description (cut at ``SUMMARY_LIMIT`` characters)."""
    text = " ".join((text or "").split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(first) > SUMMARY_LIMIT:
        first = first[:SUMMARY_LIMIT - 1].rstrip() + "…"
    return first


def input_schema(specs: tuple[InputSpec, ...]) -> dict[str, Any]:
    """A group's declared inputs as a JSON Schema object (what a tool call must send)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for spec in specs:
        prop: dict[str, Any] = {"type": spec.type}
        if spec.description:
            prop["description"] = spec.description
        if spec.has_default:
            prop["default"] = spec.default
        if spec.enum is not None:
            prop["enum"] = list(spec.enum)
        properties[spec.name] = prop
        if spec.required and not spec.has_default:
            required.append(spec.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def skill_view(skill: Skill) -> dict[str, Any]:
    entry = skill.entrypoint
    return {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "location": str(skill.skill_file),
        "root": str(skill.root),
        "path": skill.relative_path,
        "tags": list(skill.tags),
        "input_schema": dict(skill.inputs) if skill.inputs else dict(EMPTY_SCHEMA),
        "output_schema": dict(skill.outputs) if skill.outputs else None,
        "runnable": entry is not None,
        "entrypoint": entry.kind if entry is not None else None,
        "available": skill.available,
        "unavailable_reasons": list(skill.availability.reasons),
        "effects": list(skill.effects),
    }


def skill_view_from_record(record: NodeRecord) -> dict[str, Any]:
    """The same view from the index alone (a skill the loaded library does not hold)."""
    node = SkillNode(record)
    path, root = node.path, node.root
    return {
        "id": record.id,
        "name": record.name,
        "description": node.description,
        "location": f"{path}/SKILL.md" if path else None,
        "root": root,
        "path": _below(path, root) if path and root else path or None,
        "tags": list(node.tags),
        "input_schema": node.input_schema or dict(EMPTY_SCHEMA),
        "output_schema": node.output_schema,
        "runnable": node.executable,
        "entrypoint": node.entrypoint,
        "available": node.available,
        "unavailable_reasons": list(node.unavailable_reasons),
        "effects": list(node.effects),
    }


def _below(folder: str, root: str) -> str:
    """``folder`` below ``root`` as the loader names it, from the index's strings alone."""
    try:
        return PurePath(folder).relative_to(root).as_posix()
    except ValueError:
        return folder


def short_location(view: Mapping[str, Any], several_roots: bool) -> str:
    """A skill view's folder for a listing: below its root, led by the root's folder name when
    the library has several roots (``first/PDF``, ``second/Pdf``)."""
    path = str(view.get("path") or view.get("location") or "")
    root = view.get("root")
    if several_roots and root:
        return f"{PurePath(str(root)).name}/{path}" if path != "." else PurePath(str(root)).name
    return path


def group_view(group: Group, skills: Mapping[str, Skill],
               groups: Mapping[str, Group] | None = None) -> dict[str, Any]:
    """``effects``: effect -> the skills (sub-groups' too, given ``groups``) that have it."""
    members = [skills[s.skill] for s in group.steps if s.skill and s.skill in skills]
    blocked = [f"{m.name}: {'; '.join(m.availability.reasons)}" for m in members
               if not m.available]
    return {
        "id": group.id,
        "name": group.name,
        "description": group.description,
        "location": str(group.path),
        "examples": list(group.examples),
        "input_schema": input_schema(group.inputs),
        "outputs": sorted(group.outputs),
        "steps": [{"id": s.id, "kind": s.kind, "target": s.target, "needs": list(s.needs),
                   "if": s.if_} for s in group.steps],
        "edges": [[a, b] for a, b in group.edges()],
        "expose": group.expose,
        "runnable": not blocked,
        "unavailable_reasons": blocked,
        "effects": {effect: list(names) for effect, names
                    in group_effects(group, skills, groups or {}).items()},
    }


class ToolboxViews:
    """Turns a :class:`Toolbox` into its view, resolving ids through the loaded library first and
    the index second."""

    def __init__(self, skills_by_id: Mapping[str, Skill], groups: Mapping[str, Group],
                 skills_by_name: Mapping[str, Skill],
                 record: Any = None) -> None:
        self.skills_by_id = skills_by_id
        self.groups = groups
        self.skills_by_name = skills_by_name
        self.record = record
        """``record(id) -> NodeRecord | None``: the index's node, for ids the library lacks."""
        self._name_counts: Counter[str] | None = None
        self._loaded: dict[str, Mapping[str, Any]] = {}

    def loaded(self, skill: Skill) -> Mapping[str, Any]:
        """The view of a loaded skill, made once per library: a view resolves the skill's
        folder against its root (two realpath walks), which is most of a toolbox's cost when
        repeated on every answer. Callers copy it before changing it."""
        found = self._loaded.get(skill.id)
        if found is None or self.skills_by_id.get(skill.id) is not skill:
            found = self._loaded[skill.id] = skill_view(skill)
        return found

    def shared_name(self, name: str) -> bool:
        """Whether more than one loaded skill has this name (a listing should then say which
        one it means)."""
        if self._name_counts is None:
            self._name_counts = Counter(s.name for s in self.skills_by_id.values())
        return self._name_counts[name] > 1

    def where(self, skill_id: str, name: str = "") -> str:
        """The skill's short location when its name is shared by another loaded skill, else
        ``""``: what a text listing adds to tell same-named skills apart."""
        view = self.skill(skill_id, name)
        if not self.shared_name(str(view["name"])):
            return ""
        several_roots = len({s.root for s in self.skills_by_id.values()}) > 1
        return short_location(view, several_roots)

    def skill(self, skill_id: str, name: str = "") -> dict[str, Any]:
        skill = self.skills_by_id.get(skill_id)
        if skill is not None:
            return dict(self.loaded(skill))
        record = self.record(skill_id) if self.record is not None else None
        if record is not None:
            return skill_view_from_record(record)
        return {"id": skill_id, "name": name or skill_id, "description": "", "location": None,
                "root": None, "path": None,
                "input_schema": dict(EMPTY_SCHEMA), "runnable": False, "available": False,
                "unavailable_reasons": ["not in the loaded library; re-index"]}

    def _scored(self, scored: ScoredSkill, selected: set[str]) -> dict[str, Any]:
        view = self.skill(scored.id, scored.name)
        view.update(score=round(scored.score, 4), selected=scored.id in selected,
                    explanation=scored.explanation.to_dict())
        return view

    def _group(self, choice: GroupChoice) -> dict[str, Any]:
        gid = choice.id.removeprefix(GROUP_PREFIX)
        group = self.groups.get(gid)
        view: dict[str, Any]
        if group is not None:
            view = group_view(group, self.skills_by_name, self.groups)
        else:
            view = {"id": gid, "name": choice.name, "steps": [], "edges": list(choice.edges)}
        view.update(score=round(choice.score, 4), ready=choice.ready,
                    missing_inputs=list(choice.missing_inputs),
                    members=[self.skill(m, n) for m, n in
                             zip(choice.members, choice.member_names, strict=False)],
                    explanation=choice.explanation.to_dict())
        return view

    def toolbox(self, toolbox: Toolbox) -> dict[str, Any]:
        selected = set(toolbox.selected)
        ranked = [self._scored(s, selected) for s in toolbox.skills]
        listed = {s.id for s in toolbox.skills}
        # Every selected skill is described, ranked or not (a group member may rank low).
        for sid in toolbox.selected:
            if sid not in listed:
                view = self.skill(sid)
                view.update(score=None, selected=True,
                            explanation={"reason": "member of the chosen group"})
                ranked.append(view)
        names = {v["id"]: v["name"] for v in ranked}
        return {
            "request": toolbox.request,
            "shape": toolbox.shape,
            "edges": [[names.get(a, a), names.get(b, b)] for a, b in toolbox.edges],
            "group": self._group(toolbox.group) if toolbox.group is not None else None,
            "fallback_reason": toolbox.fallback_reason,
            "selected": [names.get(sid, sid) for sid in toolbox.selected],
            "skills": ranked,
            "suggestions": [{**self.skill(s.id, s.name), "reason": s.reason,
                             "weight": round(s.weight, 4)} for s in toolbox.suggestions],
            "group_candidates": [{"id": gid.removeprefix(GROUP_PREFIX), "score": score}
                                 for gid, score in toolbox.group_candidates],
            "latency_ms": round(toolbox.latency_ms, 2),
        }


    def view(self, toolbox: Toolbox, detail: Detail = DEFAULT_DETAIL,
             tools: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The toolbox's view at ``detail``; ``tools`` (group id -> tool name) names the MCP
        tool of a group exposed as one."""
        if detail == "full":
            return {**self.toolbox(toolbox), "reason": toolbox.reason, "detail": "full"}
        if detail == "compact":
            return self.compact(toolbox, tools)
        raise ValueError(f"detail must be one of {', '.join(DETAILS)}, not {detail!r}")

    def compact(self, toolbox: Toolbox, tools: Mapping[str, str] | None = None,
                ) -> dict[str, Any]:
        """What an agent needs to act, in a few hundred tokens: the chosen group (its steps,
        their order and its inputs) or the selected skills (in order, with their inputs), why
        in one sentence, and what is usually used with them. Scores and explanations are in
        the full view."""
        by_id: dict[str, str] = {s.id: s.name for s in toolbox.skills}
        # A group's members take what its steps wire into them: the group's inputs are what
        # the caller sends, so the members' own signatures are left to the full view.
        members = set(toolbox.group.members) if toolbox.group is not None else set()
        selected = [self._compact_skill(sid, by_id.get(sid, ""), sid not in members)
                    for sid in toolbox.selected]
        names = {sid: view["name"] for sid, view in zip(toolbox.selected, selected, strict=True)}
        chosen = set(toolbox.selected)
        others = [s.name for s in toolbox.skills if s.id not in chosen][:COMPACT_OTHERS]
        group = None
        if toolbox.group is not None:
            group = self._compact_group(toolbox, tools or {})
        return {
            "request": toolbox.request,
            "shape": toolbox.shape,
            "reason": toolbox.reason,
            "group": group,
            "skills": selected,
            "edges": [[names.get(a, by_id.get(a, a)), names.get(b, by_id.get(b, b))]
                      for a, b in toolbox.edges],
            "fallback_reason": toolbox.fallback_reason,
            "suggestions": [{"name": s.name, "reason": str(s.reason).split(";")[0]}
                            for s in toolbox.suggestions],
            "others": others,
            "detail": "compact",
        }

    def _compact_skill(self, skill_id: str, name: str = "", inputs: bool = True,
                       ) -> dict[str, Any]:
        full = self.skill(skill_id, name)
        view: dict[str, Any] = {"name": full["name"],
                                "description": summary(full.get("description"))}
        if inputs:
            view["inputs"] = signature(full.get("input_schema"))
        view["runnable"] = bool(full.get("runnable"))
        if self.shared_name(str(full["name"])):
            view.update(id=full["id"], path=full.get("path"))
        if full.get("effects"):
            view["effects"] = list(full["effects"])
        if not full.get("available", True):
            view["unavailable_reasons"] = list(full.get("unavailable_reasons") or [])
        return view

    def _compact_group(self, toolbox: Toolbox, tools: Mapping[str, str]) -> dict[str, Any]:
        choice = toolbox.group
        assert choice is not None
        gid = choice.id.removeprefix(GROUP_PREFIX)
        group = self.groups.get(gid)
        view: dict[str, Any] = {"id": gid, "name": choice.name}
        if group is not None:
            full = group_view(group, self.skills_by_name, self.groups)
            view.update(
                description=summary(group.description),
                steps=[{"id": s.id, s.kind: s.target, **({"if": s.if_} if s.if_ else {})}
                       for s in group.steps],
                edges=full["edges"],
                inputs=signature(full["input_schema"]),
                outputs=full["outputs"])
            if full["effects"]:
                view["effects"] = full["effects"]
            if full["unavailable_reasons"]:
                view["unavailable_reasons"] = full["unavailable_reasons"]
        else:
            view.update(steps=[], edges=[list(edge) for edge in choice.edges], inputs=[])
        view.update(ready=choice.ready, missing_inputs=list(choice.missing_inputs))
        if gid in tools:
            view["tool"] = tools[gid]
        return view


def run_view(run: RunRecord) -> dict[str, Any]:
    return run.to_dict()


def injection_view(injection: Any) -> dict[str, Any]:
    """An :class:`~skillgrove.runtime.inject.Injection` as JSON."""
    return {"text": injection.text, "tokens": injection.tokens, "budget": injection.budget,
            "level": injection.level, "left_out": list(injection.left_out)}


def answer_view(answer: Any, views: ToolboxViews, detail: Detail = DEFAULT_DETAIL,
                ) -> dict[str, Any]:
    """What :meth:`Skillgrove.ask` did (an ``Answer``), as JSON: the toolbox at ``detail``, the
    run (when the group ran), the block, the notes, and the plan and the effects that kept the
    group from running."""
    from dataclasses import asdict

    return {"toolbox": views.view(answer.toolbox, detail),
            "run": answer.run.to_dict() if answer.run is not None else None,
            "injection": injection_view(answer.injection),
            "notes": list(answer.notes),
            "plan": asdict(answer.plan) if answer.plan is not None else None,
            "needs_confirmation": {k: list(v) for k, v in answer.needs_confirmation.items()}}


def left_out_groups(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The group files an index leaves out (they have errors) or serves from their last good
    version, from :meth:`Skillgrove.groups`: ``{location, id, status, errors}`` each."""
    return [{"location": g.get("location"), "id": g.get("id"), "status": g["status"],
             "errors": list(g.get("errors") or [])}
            for g in groups if g.get("status") in ("errors", "last-good")]
