"""What a skill's current schema does to the groups that use it (``skillgrove graph impact``).

For a skill, every group that calls it, directly or through sub-groups (any depth), and for
each the problems ``check`` finds on the steps that call it or read its outputs: a ``with:`` key
that is no longer an input, a required input not bound, an output read that no longer exists, a
type mismatch. A group that uses it through a sub-group breaks when that sub-group does. When the
library has a lock file (:mod:`groups.lock`), what changed in the skill's schema since each
group was locked comes too.

>>> report = skill_impact(library, "pdf-to-text")
>>> [(use.group, use.via, bool(use.problems)) for use in report.uses]
[('invoice-to-ledger', (), False), ('report-analysis', (), True)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrove.groups.authoring import is_draft_file
from skillgrove.groups.library import Library
from skillgrove.groups.lock import lock_path, read_lock, schema_changes
from skillgrove.groups.model import Group
from skillgrove.groups.validate import validate_group
from skillgrove.skills.diagnostics import Diagnostic


@dataclass(frozen=True)
class GroupUse:
    group: str
    path: Path
    steps: tuple[str, ...]
    """The group's steps that call the skill (empty when it is used through ``via``)."""
    via: tuple[str, ...] = ()
    """The sub-groups it is used through, outermost first."""
    problems: tuple[Diagnostic, ...] = ()
    """Errors the skill's current schema causes here (for ``via``: in the innermost group)."""
    changed_since_lock: tuple[str, ...] = ()
    """What changed in the skill's schema since this group was locked."""
    draft: bool = False

    @property
    def breaks(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "path": str(self.path), "steps": list(self.steps),
                "via": list(self.via), "breaks": self.breaks, "draft": self.draft,
                "problems": [d.to_dict() for d in self.problems],
                "changed_since_lock": list(self.changed_since_lock)}


@dataclass(frozen=True)
class Impact:
    skill: str
    known: bool
    """Whether the library has the skill now (a removed skill breaks every group using it)."""
    uses: tuple[GroupUse, ...] = field(default=())

    @property
    def broken(self) -> tuple[GroupUse, ...]:
        return tuple(u for u in self.uses if u.breaks)

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.skill, "known": self.known,
                "uses": [u.to_dict() for u in self.uses],
                "broken": [u.group for u in self.broken]}


def skill_impact(library: Library, skill: str) -> Impact:
    groups = {load.group.id: load.group for load in library.group_loads
              if load.group is not None}
    direct: dict[str, GroupUse] = {}
    for group in groups.values():
        steps = tuple(s.id for s in group.steps if s.skill == skill)
        if steps:
            direct[group.id] = GroupUse(group.id, group.path, steps,
                                        problems=_problems(group, steps, library, groups),
                                        draft=is_draft_file(group.path))
    uses = dict(direct)
    # Callers of callers, breadth first: each group once, by its shortest chain.
    # group -> the chain of sub-groups down to a direct user
    frontier: dict[str, tuple[str, ...]] = {gid: () for gid in direct}
    chains: dict[str, tuple[str, ...]] = dict(frontier)
    while frontier:
        following: dict[str, tuple[str, ...]] = {}
        for group in groups.values():
            if group.id in chains:
                continue
            for step in group.steps:
                if step.group in frontier:
                    following[group.id] = (step.group, *frontier[step.group])
                    break
        for gid, chain in following.items():
            chains[gid] = chain
            inner = direct[chain[-1]]
            uses[gid] = GroupUse(gid, groups[gid].path, (), chain, inner.problems,
                                 draft=is_draft_file(groups[gid].path))
        frontier = following
    changes = _lock_changes(library, skill)
    ordered = sorted(uses.values(), key=lambda u: (len(u.via), u.group))
    final = tuple(GroupUse(u.group, u.path, u.steps, u.via, u.problems,
                           tuple(changes.get(u.group, ())), u.draft) for u in ordered)
    return Impact(skill, skill in library.skills, final)


def _problems(group: Group, steps: tuple[str, ...], library: Library,
              groups: Mapping[str, Group]) -> tuple[Diagnostic, ...]:
    """The group's errors about the steps that call the skill or read their outputs."""
    mentions = [f"step '{s}'" for s in steps]
    found = []
    for diagnostic in validate_group(group, library.skills, groups):
        for leaf in (diagnostic, *diagnostic.follow_ons):
            if leaf.is_error and (leaf.subject in steps
                                  or any(m in leaf.message for m in mentions)
                                  or f"steps.{leaf.subject}" in leaf.message):
                found.append(leaf)
    return tuple(dict.fromkeys(found))


def _lock_changes(library: Library, skill: str) -> dict[str, list[str]]:
    current = library.skills.get(skill)
    out: dict[str, list[str]] = {}
    for root in library.roots:
        path = lock_path(root)
        if not path.is_file():
            continue
        pinned, _ = read_lock(path)
        for locked in pinned:
            if locked.name != skill:
                continue
            if current is None:
                out[locked.group] = ["the skill is gone"]
            else:
                out[locked.group] = schema_changes(locked.inputs, locked.outputs,
                                                   current.inputs, current.outputs)
    return out
