"""A library: the skills under some roots plus the groups that use them, all checked together.

Layout of a library root (every part optional)::

    my-library/
      skills/<name>/SKILL.md        skills, nested folders allowed (any SKILL.md counts)
      groups/<id>.yaml              group files: any .yaml/.yml under a folder named 'groups'
      anything/<id>.group.yaml      ... or any file named *.group.yaml / *.group.yml
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from skillgrove.groups import authoring
from skillgrove.groups.loader import GroupLoad, load_group_file
from skillgrove.groups.lock import lock_diagnostics
from skillgrove.groups.model import Group, group_tool_name
from skillgrove.groups.validate import MISPLACED_INPUT, validate_group
from skillgrove.skills import limits, names
from skillgrove.skills.diagnostics import Diagnostic, Severity, sort_key
from skillgrove.skills.errors import LibraryError
from skillgrove.skills.loader import (
    DEFAULT_OPTIONS,
    LoadOptions,
    SkillCatalog,
    UnreadableFile,
    discover_skills,
    read_regular_file,
    walk_folders,
)
from skillgrove.skills.model import Skill

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"})
GROUP_SUFFIXES = (".yaml", ".yml")
_UNREAD_FILES = frozenset({".DS_Store"})
"""Files a load never depends on (a ``.skill_id`` counts: it gives the skill its id)."""


@dataclass(frozen=True)
class Library:
    roots: tuple[Path, ...]
    catalog: SkillCatalog
    group_loads: tuple[GroupLoad, ...]
    groups: Mapping[str, Group]
    """Valid groups by id (a group with any error is left out, and reported)."""
    diagnostics: tuple[Diagnostic, ...]
    drafts: Mapping[str, Group] = field(default_factory=dict)
    """Draft groups (files under ``groups/drafts/``, see :mod:`groups.authoring`): checked and
    reported, never indexed or run until approved."""

    @property
    def skills(self) -> Mapping[str, Skill]:
        """Active skills by name."""
        return self.catalog.active

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity is Severity.WARNING)

    def raise_for_errors(self) -> None:
        if self.errors:
            raise LibraryError(self.errors)

    def effects(self, group: Group) -> dict[str, tuple[str, ...]]:
        """What running ``group`` changes (see :func:`group_effects`).

        >>> library.effects(library.groups["report-analysis"])
        {'sends-email': ('send-email',)}
        """
        return group_effects(group, self.skills, self.groups)


def group_effects(group: Group, skills: Mapping[str, Skill],
                  groups: Mapping[str, Group]) -> dict[str, tuple[str, ...]]:
    """Each declared effect of the group's skills (and of its sub-groups' skills), with the
    skills that have it, in step order."""
    found: dict[str, list[str]] = {}
    # Depth first in step order, without recursion; each group is entered once (a group that
    # two steps call adds nothing new the second time, and a loop cannot go round).
    entered = {group.id}
    pending = [iter(group.steps)]
    while pending:
        step = next(pending[-1], None)
        if step is None:
            pending.pop()
            continue
        if step.group:
            inner = groups.get(step.group)
            if inner is not None and inner.id not in entered:
                entered.add(inner.id)
                pending.append(iter(inner.steps))
            continue
        skill = skills.get(step.skill or "")
        if skill is None:
            continue
        for effect in skill.effects:
            holders = found.setdefault(effect, [])
            if skill.name not in holders:
                holders.append(skill.name)
    return {effect: tuple(names) for effect, names in found.items()}


def is_group_file(path: Path, root: Path) -> bool:
    """A ``*.group.yaml`` anywhere, or any YAML file in a ``groups`` folder at or below
    ``root`` (the root's own name counts)."""
    name = path.name.lower()
    inside = path.parent.relative_to(root.parent).parts
    return name.endswith((".group.yaml", ".group.yml")) or (
        path.suffix.lower() in GROUP_SUFFIXES and "groups" in inside)


def _group_id_problem(group: Group, groups: Mapping[str, Group],
                      looks: Mapping[str, str]) -> Diagnostic | None:
    """An id with invisible characters, or one that looks like an earlier group's id (see
    :mod:`skillgrove.skills.names`): an error naming both; the group is not loaded."""
    where = group.source.value_at(("id",))
    invisible = names.invisible_characters(group.id)
    if invisible:
        return Diagnostic(Severity.ERROR, "name-invisible",
                          f"group id {group.id!a} holds invisible characters: "
                          + ", ".join(invisible), group.path, *where,
                          hint="remove them: they make one id pose as another",
                          subject=group.id)
    twin = looks.get(names.skeleton(group.id))
    if twin is not None and twin != group.id:
        return Diagnostic(Severity.ERROR, "name-lookalike",
                          f"group id {group.id!a} looks like {twin!a} "
                          f"({groups[twin].path}); they differ only in "
                          f"{names.describe_difference(group.id, twin)}",
                          group.path, *where, hint="give it an id of its own",
                          subject=group.id)
    return None


def _tool_clash(group: Group, tools: dict[str, Group]) -> Diagnostic | None:
    """An error when the MCP tool ``group`` exposes has the name of another group's tool
    (``daily-report`` and ``daily_report`` are both ``group_daily_report``)."""
    name = group_tool_name(group.id)
    other = tools.setdefault(name, group)
    if other is group:
        return None
    return Diagnostic(Severity.ERROR, "tool-name-collision",
                      f"group '{group.id}' would be the MCP tool {name}, which group "
                      f"'{other.id}' ({other.path}) already is", group.path,
                      *group.source.value_at(("id",)),
                      hint="give one of them an id that differs in letters or digits",
                      subject=group.id)


def find_group_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root] if root.suffix.lower() in GROUP_SUFFIXES else []
    found: list[Path] = []
    for here, _, filenames in walk_folders(root, skip=_SKIP_DIRS):  # limits: the skill walk reports
        found.extend(here / name for name in filenames if is_group_file(here / name, root))
    return found


def library_fingerprint(paths: Sequence[Path]) -> str:
    """A digest of every file a library load reads (names, sizes, modification times), cheap
    enough to compute per request: it changes when a skill or group is added, edited or
    removed, so an index built earlier can tell it is stale."""
    # Skill ids were once digests of absolute paths: an index holding those is stale too.
    digest = hashlib.sha256(b"skill ids: path below the root\0")
    for path in paths:
        digest.update(f"root\0{path}\0".encode())
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
            continue
        for dirpath, _, filenames in walk_folders(path, skip=_SKIP_DIRS):
            for name in filenames:
                if name in _UNREAD_FILES:
                    continue
                full = os.path.join(dirpath, name)
                try:
                    stat = os.lstat(full)
                except OSError:
                    continue
                digest.update(f"{full}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def split_paths(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Roots to search for skills and groups, and group files named directly."""
    roots: list[Path] = []
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            if path.name == "SKILL.md":
                roots.append(path.parent)
                continue
            files.append(path)
            anchor = next((p.parent for p in path.parents if p.name == "groups"), path.parent)
            if anchor not in roots:
                roots.append(anchor)
        else:
            roots.append(path)
    return roots, files


def load_library(paths: Sequence[Path], options: LoadOptions = DEFAULT_OPTIONS) -> Library:
    """Load and check every skill and group under ``paths`` (folders, or group files)."""
    diagnostics: list[Diagnostic] = []
    roots, named_files = split_paths(paths)
    for path in paths:
        if not path.exists():
            diagnostics.append(Diagnostic(Severity.ERROR, "path-not-found",
                                          f"no such file or folder: {path}", path))
        elif not (path.is_dir() or path.is_file()):
            diagnostics.append(Diagnostic(Severity.ERROR, "not-a-regular-file",
                                          f"{path} is neither a folder nor a regular file; it "
                                          "was not read", path))
    roots = [r for r in roots if r.exists()]
    catalog = discover_skills(roots, options)
    diagnostics.extend(catalog.diagnostics)

    files: list[tuple[Path, Path]] = [(f, f.parent) for f in named_files if f.exists()]
    if not named_files:
        files = [(f, root) for root in roots for f in find_group_files(root)]
        # The rule of skill folders: a link is never followed (it could lead anywhere).
        linked = [(f, root) for f, root in files if os.path.islink(f)]
        for f, _ in linked:
            diagnostics.append(Diagnostic(
                Severity.ERROR, "symlink", f"{f.name} is a symbolic link (to "
                f"{os.readlink(f)}); links in a library are not followed", f,
                hint="copy the group file into the library instead"))
        files = [item for item in files if item not in linked]
    loads = [load_group_file(f) for f, _ in files]
    if not named_files:
        diagnostics.extend(_unread_group_files(roots, {f for f, _ in files}))
    groups: dict[str, Group] = {}
    origin: dict[str, Path] = {}
    looks: dict[str, str] = {}
    for load, (_, root) in zip(loads, files, strict=True):
        group = load.group
        if group is None:
            continue
        problem = _group_id_problem(group, groups, looks)
        if problem is not None:
            diagnostics.append(problem)
            continue
        if group.id in groups:
            first = groups[group.id]
            same_root = origin[group.id] == root
            diagnostics.append(Diagnostic(
                Severity.ERROR if same_root else Severity.WARNING,
                "duplicate-group" if same_root else "shadowed",
                f"group id '{group.id}' is already defined in {first.path}"
                + ("" if same_root else " from an earlier root, which is used"),
                group.path, *group.source.value_at(("id",)),
                hint="give each group its own id", subject=group.id))
            continue
        groups[group.id] = group
        origin[group.id] = root
        looks.setdefault(names.skeleton(group.id), group.id)

    valid: dict[str, Group] = {}
    drafts: dict[str, Group] = {}
    checked: list[Diagnostic] = []
    tools: dict[str, Group] = {}
    for load in loads:
        group = load.group
        found: list[Diagnostic] = []
        if group is not None and groups.get(group.id) is group:
            found = validate_group(group, catalog.active, groups)
            if "tool" in group.expose:
                clash = _tool_clash(group, tools)
                if clash is not None:
                    found.append(clash)
            if authoring.is_draft_file(group.path):
                drafts[group.id] = group
            elif load.ok and not any(d.is_error for d in found):
                valid[group.id] = group
        # An input written beside 'with:' is reported as such, not also as an unknown field.
        misplaced = {(leaf.line, leaf.column) for d in found for leaf in (d, *d.follow_ons)
                     if leaf.rule == MISPLACED_INPUT}
        checked.extend(d for d in load.diagnostics
                       if not (d.rule == "unknown-field" and (d.line, d.column) in misplaced))
        checked.extend(found)
    checked = authoring.example_warnings(checked, groups.values())
    checked += authoring.near_duplicate_groups([*valid.values(), *drafts.values()], drafts)
    checked += lock_diagnostics(roots, groups, catalog.active)
    checked += authoring.draft_notes(drafts, checked)
    diagnostics.extend(_fold_unknown_skills(checked, roots, catalog))
    diagnostics.sort(key=sort_key)
    return Library(tuple(roots), catalog, tuple(loads), valid, tuple(diagnostics), drafts)


def _fold_unknown_skills(found: list[Diagnostic], roots: Sequence[Path],
                         catalog: SkillCatalog) -> list[Diagnostic]:
    """With no skill loaded at all, every step's skill is unknown for one reason: the skills
    are elsewhere. One error says so, with the library root to check instead, and the
    unknown-skill errors folded under it."""
    unknown = [d for d in found if d.rule == "unknown-skill"]
    if catalog.active or not unknown:
        return found
    shown = ", ".join(str(r) for r in roots) or "the paths given"
    hint = "name the folder that holds the skills too"
    for root in roots:
        for parent in (root.parent, root.parent.parent):
            if parent != root and (parent / "skills").is_dir():
                hint = (f"check the library root, the folder that holds skills/ and groups/: "
                        f"skillgrove check {parent}")
                break
        else:
            continue
        break
    head = Diagnostic(Severity.ERROR, "no-skills", f"no skills were loaded from {shown}, so "
                      f"the skills of {len(unknown)} step{'s' if len(unknown) != 1 else ''} "
                      "are unknown", roots[0] if roots else None, hint=hint)
    rest = [d for d in found if d.rule != "unknown-skill"]
    return [*rest, head.folding([replace(d, hint=None) for d in unknown])]


_STEPS_LINE = re.compile(rb"^steps[ \t]*:", re.MULTILINE)
_ID_LINE = re.compile(rb"^id[ \t]*:", re.MULTILINE)


def _unread_group_files(roots: Sequence[Path], read: set[Path]) -> list[Diagnostic]:
    """A warning for each YAML file that looks like a group (a top-level ``id:`` and
    ``steps:``) but is not where groups are read from, so it would be skipped without a word."""
    found: list[Diagnostic] = []
    for root in roots:
        if not root.is_dir():
            continue
        for here, _, filenames in walk_folders(root, skip=_SKIP_DIRS):
            for name in filenames:
                path = here / name
                if path.suffix.lower() not in GROUP_SUFFIXES or path in read:
                    continue
                try:
                    head = read_regular_file(path, limits.GROUP_FILE_MAX_BYTES)
                except UnreadableFile:
                    continue
                match = _STEPS_LINE.search(head)
                if match is None or _ID_LINE.search(head) is None:
                    continue
                line = head.count(b"\n", 0, match.start()) + 1
                found.append(Diagnostic(
                    Severity.WARNING, "group-file-not-read", "this file holds 'steps:' but is "
                    "not read as a group: groups are read from a 'groups' folder or from files "
                    "named *.group.yaml", path, line, 1,
                    f"move it into {root / 'groups'} or rename it to "
                    f"{path.name.rsplit('.', 1)[0]}.group{path.suffix}"))
    return found
