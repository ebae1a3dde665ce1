"""The lock file: each group's member skills as they were when the group was approved.

``skillgrove groups lock`` writes ``<library>/groups/skillgrove.lock`` (JSON, sorted, meant to
be committed with the groups). For every valid group it pins each member skill by a content
hash (of every file in the skill's folder) and a snapshot of its input and output schemas::

    {"version": 1,
     "groups": {"report-analysis": {
         "file": "groups/report-analysis.yaml", "content_hash": "…",
         "skills": {"pdf-to-text": {"content_hash": "…", "inputs": {…}, "outputs": {…}}},
         "groups": {"ticket-escalation": "…"}}}}

``skillgrove check`` then reports (``member-changed``) a member whose files changed since the
lock, with what changed in its schema (inputs and outputs added, removed, or with another type
or requiredness); ``member-removed`` when it is gone. A group that is not in the lock is not
checked against it; a library without a lock file has nothing to compare.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillgrove.groups.model import Group
from skillgrove.skills import limits
from skillgrove.skills.diagnostics import Diagnostic, Severity
from skillgrove.skills.loader import UnreadableFile, read_regular_file, walk_folders
from skillgrove.skills.model import Skill

LOCK_FILE = "skillgrove.lock"
LOCK_VERSION = 1
_SKIP = frozenset({"__pycache__"})


def lock_path(root: Path) -> Path:
    """Where the lock file of the library at ``root`` lives."""
    return root / "groups" / LOCK_FILE


def skill_digest(skill: Skill) -> str:
    """sha256 over the names and bytes of the regular files in the skill's folder (nested
    skills, dotfiles and caches left out): it changes when SKILL.md or any code changes."""
    digest = hashlib.sha256()
    files: list[Path] = []
    for here, dirnames, filenames in walk_folders(skill.folder, skip=_SKIP):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not (here / d / "SKILL.md").exists())
        files.extend(here / name for name in filenames if not name.startswith(".")
                     and not name.endswith(".pyc"))
    for path in sorted(files):
        try:
            data = read_regular_file(path, limits.COMPANION_MAX_BYTES)
        except UnreadableFile:
            data = b"<unreadable>"
        digest.update(f"{path.relative_to(skill.folder).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def schema_snapshot(skill: Skill) -> dict[str, Any]:
    return {"inputs": _plain(skill.inputs), "outputs": _plain(skill.outputs)}


def _plain(schema: Mapping[str, Any] | None) -> Any:
    return json.loads(json.dumps(schema, default=str)) if schema is not None else None


def build_lock(groups: Iterable[Group], skills: Mapping[str, Skill], root: Path
               ) -> dict[str, Any]:
    """The lock content for ``groups`` (each group's direct skills and sub-groups)."""
    entries: dict[str, Any] = {}
    for group in sorted(groups, key=lambda g: g.id):
        members: dict[str, Any] = {}
        subgroups: dict[str, str] = {}
        for step in group.steps:
            if step.skill and step.skill in skills and step.skill not in members:
                skill = skills[step.skill]
                members[step.skill] = {"id": skill.id, "content_hash": skill_digest(skill),
                                       **schema_snapshot(skill)}
            elif step.group:
                subgroups[step.group] = ""
        try:
            file = group.path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            file = str(group.path)
        entries[group.id] = {"file": file, "content_hash": group.content_hash,
                             "skills": dict(sorted(members.items())),
                             "groups": sorted(subgroups)}
    return {"version": LOCK_VERSION, "groups": entries}


def write_lock(root: Path, groups: Iterable[Group], skills: Mapping[str, Skill]) -> Path:
    """Writes (atomically) the lock file of the library at ``root``; its path."""
    path = lock_path(root)
    text = json.dumps(build_lock(groups, skills, root), indent=2, sort_keys=True,
                      ensure_ascii=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".skillgrove.lock.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


@dataclass(frozen=True)
class LockedSkill:
    group: str
    name: str
    content_hash: str
    inputs: Mapping[str, Any] | None
    outputs: Mapping[str, Any] | None


def read_lock(path: Path) -> tuple[list[LockedSkill], list[Diagnostic]]:
    """The pinned skills of a lock file, or a diagnostic saying why it cannot be read."""
    try:
        data = json.loads(read_regular_file(path, limits.GROUP_FILE_MAX_BYTES * 64))
    except (UnreadableFile, ValueError) as exc:
        return [], [Diagnostic(Severity.ERROR, "bad-lock-file",
                               f"the lock file cannot be read: {exc}", path,
                               hint="write it again with `skillgrove groups lock`")]
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION \
            or not isinstance(data.get("groups"), dict):
        return [], [Diagnostic(Severity.ERROR, "bad-lock-file",
                               f"not a skillgrove lock file (version {LOCK_VERSION})", path,
                               hint="write it again with `skillgrove groups lock`")]
    pinned = []
    for group_id, entry in data["groups"].items():
        members = entry.get("skills") if isinstance(entry, dict) else None
        for name, info in (members or {}).items():
            if isinstance(info, dict):
                pinned.append(LockedSkill(str(group_id), str(name),
                                          str(info.get("content_hash")),
                                          _mapping_or_none(info.get("inputs")),
                                          _mapping_or_none(info.get("outputs"))))
    return pinned, []


def _mapping_or_none(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def schema_changes(old_inputs: Mapping[str, Any] | None, old_outputs: Mapping[str, Any] | None,
                   new_inputs: Mapping[str, Any] | None, new_outputs: Mapping[str, Any] | None
                   ) -> list[str]:
    """What changed between two (inputs, outputs) schema pairs, in words.

    >>> schema_changes(None, {"properties": {"a": {"type": "string"}}},
    ...                None, {"properties": {"b": {"type": "string"}}})
    ["output 'a' removed", "output 'b' added (string)"]
    """
    return [*_changes("input", old_inputs, new_inputs),
            *_changes("output", old_outputs, new_outputs)]


def _changes(kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
             ) -> list[str]:
    before, after = _properties(old), _properties(new)
    was_required, now_required = _required(old), _required(new)
    out = []
    for name in sorted(before.keys() - after.keys()):
        out.append(f"{kind} '{name}' removed")
    for name in sorted(after.keys() - before.keys()):
        detail = [_type(after[name]) or "any type"]
        if name in now_required:
            detail.append("required")
        out.append(f"{kind} '{name}' added ({', '.join(detail)})")
    for name in sorted(before.keys() & after.keys()):
        if _type(before[name]) != _type(after[name]):
            out.append(f"{kind} '{name}' type {_type(before[name]) or 'any'} -> "
                       f"{_type(after[name]) or 'any'}")
        elif before[name] != after[name]:
            out.append(f"{kind} '{name}' schema changed")
        if kind == "input" and (name in was_required) != (name in now_required):
            out.append(f"input '{name}' now {'required' if name in now_required else 'optional'}")
    return out


def _properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    props = (schema or {}).get("properties")
    return props if isinstance(props, Mapping) else {}


def _required(schema: Mapping[str, Any] | None) -> set[str]:
    required = (schema or {}).get("required")
    return {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()


def _type(spec: Any) -> str:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if isinstance(kind, list):
        return "/".join(str(k) for k in kind)
    return str(kind) if kind else ""


def lock_diagnostics(roots: Iterable[Path], groups: Mapping[str, Group],
                     skills: Mapping[str, Skill]) -> list[Diagnostic]:
    """A warning for each locked member that changed or is gone, on the group's file."""
    found: list[Diagnostic] = []
    digests: dict[str, str] = {}
    for root in roots:
        path = lock_path(root)
        if not path.is_file():
            continue
        pinned, problems = read_lock(path)
        found.extend(problems)
        for locked in pinned:
            group = groups.get(locked.group)
            if group is None:
                continue
            where = (group.path, *group.source.value_at(("steps",)))
            skill = skills.get(locked.name)
            if skill is None:
                found.append(Diagnostic(
                    Severity.WARNING, "member-removed",
                    f"skill '{locked.name}' of group '{group.id}' is gone since the group was "
                    f"locked ({path})", *where,
                    hint="restore the skill, or change the group and lock it again with "
                         "`skillgrove groups lock`", subject=group.id))
                continue
            if skill.name not in digests:
                digests[skill.name] = skill_digest(skill)
            if digests[skill.name] == locked.content_hash:
                continue
            changes = schema_changes(locked.inputs, locked.outputs, skill.inputs, skill.outputs)
            what = "; ".join(changes) if changes else ("its inputs and outputs are the same; "
                                                       "its instructions or code changed")
            found.append(Diagnostic(
                Severity.WARNING, "member-changed",
                f"skill '{skill.name}' changed since group '{group.id}' was locked: {what}",
                *where, hint=f"see what it breaks with `skillgrove graph impact {skill.name}`; "
                             "once the group works with it, approve it with "
                             "`skillgrove groups lock`", subject=group.id))
    return found
