"""Loading skills: one SKILL.md into a :class:`Skill`, and a set of roots into a catalog.

Loading never raises for a user mistake: every problem becomes a :class:`Diagnostic`. A skill with
an error is *rejected* (not in the catalog) and the rejection names its rule; a skill with only
warnings loads. Any file with YAML frontmatter holding ``name`` and ``description`` loads, as an
instruction-only skill when it declares nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillgrove.skills import limits, names
from skillgrove.skills._yaml import (
    PathKey,
    SourceMap,
    YamlLimitError,
    YamlSyntaxError,
    format_path,
    load_located,
)
from skillgrove.skills.diagnostics import Diagnostic, Severity, did_you_mean
from skillgrove.skills.model import (
    ID_SIDECAR,
    SKILL_FILE,
    Availability,
    Entrypoint,
    Requirements,
    Skill,
    content_hash,
    path_id,
    relative_folder,
)
from skillgrove.skills.safety import (
    FOLDER_MAX_ENTRIES,
    HEAD_BYTES,
    Action,
    SafetyPolicy,
    SkillFiles,
    binary_code,
    command_problems,
    decode_source,
    nested_imports,
    path_problem,
    scan_text,
    skill_files,
)
from skillgrove.skills.secrets import owner_listed, secret_reason

NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
COMPANION_MAX_BYTES = limits.COMPANION_MAX_BYTES
_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


def valid_skill_id(text: str) -> bool:
    """Whether ``text`` can be a skill's id (``.skill_id``): a letter or digit, then at most 127
    letters, digits, dots, underscores, colons and hyphens."""
    return bool(_ID_PATTERN.match(text))

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv"})

SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
EXTENSION_FIELDS = ("version", "tags", "inputs", "outputs", "entrypoint", "requires", "enabled",
                    "depends_on", "effects")
KNOWN_EFFECTS = ("sends-email", "sends-messages", "writes-files", "deletes-files", "network",
                 "spends-money", "changes-accounts")
"""The side effects a skill may declare. Another name is kept (and still needs confirmation)
with a warning, in case it is a typo."""
KNOWN_FIELDS = SPEC_FIELDS + EXTENSION_FIELDS
REQUIRES_FIELDS = ("bins", "any_bins", "env", "os", "mcp")
_REQUIRES_ALIASES = {"anyBins": "any_bins", "any-bins": "any_bins"}
_OS_ALIASES = {"macos": "darwin", "mac": "darwin", "osx": "darwin", "windows": "win32", "win": "win32"}


DEFAULT_SAFETY = SafetyPolicy()


@dataclass(frozen=True)
class LoadOptions:
    """How skills are loaded. Everything that touches the machine can be swapped in tests."""

    safety: SafetyPolicy = DEFAULT_SAFETY
    write_ids: bool = False
    """Write a ``.skill_id`` sidecar holding its id into each skill folder that has none. Off by
    default: ids live in the index, and only a library that opts in (``skillgrove index
    --write-ids``) gets files written into it. The id written is the one the skill has anyway,
    so writing sidecars changes no id."""
    environ: Mapping[str, str] | None = None
    which: Callable[[str], str | None] = shutil.which
    platform: str = sys.platform


DEFAULT_OPTIONS = LoadOptions()


@dataclass(frozen=True)
class SkillLoad:
    """The outcome of loading one SKILL.md: a skill, or None with the errors that rejected it."""

    path: Path
    skill: Skill | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def rejected_by(self) -> tuple[str, ...]:
        return tuple(d.rule for d in self.diagnostics if d.is_error)


@dataclass(frozen=True)
class Shadowing:
    """``hidden`` has the name of ``winner``, which answers for the name."""

    hidden: Skill
    winner: Skill

    @property
    def same_root(self) -> bool:
        return self.hidden.root == self.winner.root


def precedence_key(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Where a skill folder (its path below its root) comes among same-named ones of that root:
    compared folder by folder, letter case ignored, then with case (``PDF`` before ``pdf``), so
    the order is the same on every file system and does not put ``Zeta/`` before ``alpha/``.
    A folder comes before the folders inside it.

    >>> sorted(["ComposioHQ/pdf", "anthropics/pdf/nested", "anthropics/pdf"],
    ...        key=lambda p: precedence_key(Path(p)))
    ['anthropics/pdf', 'anthropics/pdf/nested', 'ComposioHQ/pdf']
    """
    return tuple(part.casefold() for part in folder.parts), folder.parts


@dataclass(frozen=True)
class SkillCatalog:
    """Every skill found under the roots, with name resolution already decided.

    ``active`` maps a name to the skill that answers for it: the one from the earliest root, and
    inside one root the first in :func:`precedence_key` order. The others stay in ``skills``
    under their own ids (and in ``shadowed``, with the skill they lose to). ``skills`` is in
    precedence order: roots as given, then by path inside each root.
    """

    roots: tuple[Path, ...]
    loads: tuple[SkillLoad, ...]
    skills: tuple[Skill, ...]
    active: Mapping[str, Skill]
    shadowed: tuple[Shadowing, ...]
    diagnostics: tuple[Diagnostic, ...] = field(default=())

    @property
    def rejected(self) -> tuple[SkillLoad, ...]:
        return tuple(load for load in self.loads if load.skill is None)

    def by_id(self) -> dict[str, Skill]:
        return {skill.id: skill for skill in self.skills}


class _Collector:
    def __init__(self, path: Path, source: SourceMap | None = None, subject: str | None = None):
        self.path = path
        self.source = source
        self.subject = subject
        self.items: list[Diagnostic] = []

    def add(
        self,
        severity: Severity,
        rule: str,
        message: str,
        *,
        at: PathKey | None = None,
        key: bool = False,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        if at is not None and self.source is not None:
            line, column = self.source.key_at(at) if key else self.source.value_at(at)
        self.items.append(
            Diagnostic(severity, rule, message, self.path, line, column, hint, self.subject)
        )

    def error(self, rule: str, message: str, **kw: Any) -> None:
        self.add(Severity.ERROR, rule, message, **kw)

    def warn(self, rule: str, message: str, **kw: Any) -> None:
        self.add(Severity.WARNING, rule, message, **kw)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.items)


@dataclass(frozen=True)
class Frontmatter:
    data: dict[str, Any]
    source: SourceMap
    body_line: int
    duplicate_keys: tuple[tuple[PathKey, tuple[int, int]], ...]


def split_frontmatter(text: str, out: _Collector) -> Frontmatter | None:
    """Find the ``---`` fenced YAML block at the top and parse it; report what is wrong."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        first = next((ln.strip() for ln in lines if ln.strip()), "")
        advice = "start the file with a '---' line, then 'name:' and 'description:', then '---'"
        if first == "---":
            advice = "the '---' line must be the very first line of the file"
        out.error("frontmatter-missing", "no YAML frontmatter at the top of SKILL.md",
                  line=1, column=1, hint=advice)
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        out.error("frontmatter-unterminated", "frontmatter starts with '---' but never closes",
                  line=1, column=1, hint="add a closing '---' line after the YAML fields")
        return None
    try:
        located = load_located("\n".join(lines[1:end]), line_offset=1)
    except YamlLimitError as exc:
        out.error("limit-exceeded", f"frontmatter is too large to read: {exc.message}",
                  line=exc.line, column=exc.column,
                  hint="frontmatter holds a few short fields; move data into files of the skill")
        return None
    except YamlSyntaxError as exc:
        hint: str | None = None
        if "mapping values are not allowed" in exc.message:
            hint = "a value containing ': ' must be quoted, e.g. description: \"Use when: ...\""
        out.error("frontmatter-invalid-yaml", f"frontmatter is not valid YAML: {exc.message}",
                  line=exc.line, column=exc.column, hint=hint)
        return None
    if not isinstance(located.value, dict):
        out.error("frontmatter-not-mapping",
                  "frontmatter must be a mapping of fields (name: ..., description: ...)",
                  line=2, column=1)
        return None
    return Frontmatter(located.value, located.source, end + 2, located.duplicate_keys)


def load_skill(skill_file: Path, root: Path, options: LoadOptions = DEFAULT_OPTIONS) -> SkillLoad:
    """Load one SKILL.md. Never raises for problems in the file: they come back as diagnostics."""
    out = _Collector(skill_file)
    folder = skill_file.parent.absolute()  # skills run elsewhere: never a relative folder

    if skill_file.is_symlink() or folder.is_symlink():
        out.error("symlink", "SKILL.md or its folder is a symbolic link; links are not followed",
                  hint="copy the skill into the library instead of linking it")
        return SkillLoad(skill_file, None, tuple(out.items))
    if not _is_within(folder.resolve(), root.resolve()):
        out.error("path-escapes-root", f"skill folder is outside its root {root}")
        return SkillLoad(skill_file, None, tuple(out.items))

    try:
        raw = read_regular_file(skill_file, options.safety.max_file_bytes)
    except UnreadableFile as exc:
        out.error(exc.rule, exc.message, hint=exc.hint or (
            "move long reference material into separate files the body links to"
            if exc.rule == "file-too-large" else None))
        return SkillLoad(skill_file, None, tuple(out.items))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        out.error("not-utf8", "SKILL.md is not valid UTF-8", line=line,
                  hint="save the file as UTF-8")
        return SkillLoad(skill_file, None, tuple(out.items))

    front = split_frontmatter(text, out)
    files = _scan(text, skill_file, folder, options, out)
    if front is None:
        return SkillLoad(skill_file, None, tuple(out.items))

    out.source = front.source
    data = front.data
    for dup_path, (line, column) in front.duplicate_keys:
        out.warn("duplicate-key", f"'{format_path(dup_path)}' is given twice; the last one wins",
                 line=line, column=column)

    name = _string_field(data, "name", out, required=True)
    description = _string_field(data, "description", out, required=True)
    if name is not None:
        out.subject = name
        _check_name(name, folder, out)
    if description is not None and len(description) > DESCRIPTION_MAX:
        out.warn("description-too-long",
                 f"description is {len(description)} characters; Agent Skills allows "
                 f"{DESCRIPTION_MAX}", at=("description",),
                 hint="move detail into the body and keep the description to what and when")
    compatibility = _string_field(data, "compatibility", out)
    if compatibility is not None and len(compatibility) > COMPATIBILITY_MAX:
        out.warn("compatibility-too-long",
                 f"compatibility is {len(compatibility)} characters; at most {COMPATIBILITY_MAX}",
                 at=("compatibility",))

    extra: dict[str, Any] = {}
    for key in data:
        if key not in KNOWN_FIELDS:
            extra[str(key)] = data[key]
            out.warn("unknown-field", f"unknown frontmatter field '{key}' (kept as is)",
                     at=(str(key),), key=True, hint=did_you_mean(str(key), KNOWN_FIELDS))

    inputs = _schema_field(data, "inputs", out)
    outputs = _schema_field(data, "outputs", out)
    entrypoint = _entrypoint(data, folder, out, files)
    requires = _requirements(data, out)
    tags = _string_list(data, "tags", out)
    depends_on = _string_list(data, "depends_on", out)
    effects = _effects(data, out)
    _no_engine_secrets(entrypoint, requires, effects, out, options)
    allowed_tools = _allowed_tools(data, out)
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        out.error("field-type", "'enabled' must be true or false", at=("enabled",))
        enabled = True
    version = data.get("version")
    if version is not None and not isinstance(version, str | int | float):
        out.error("field-type", "'version' must be a string", at=("version",))
        version = None
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        out.warn("field-type", "'metadata' should be a mapping of keys to values",
                 at=("metadata",))
        metadata = {}
    license_ = data.get("license")

    if out.has_errors or name is None or description is None:
        return SkillLoad(skill_file, None, tuple(out.items))

    sidecar_id = read_sidecar_id(folder)
    availability = check_requirements(requires, enabled, options)
    if not availability.available:
        out.warn("unavailable", "skill is unavailable here: " + "; ".join(availability.reasons),
                 line=1, column=1)

    skill = Skill(
        id=sidecar_id or path_id(relative_folder(folder, root)),
        id_source="sidecar" if sidecar_id else "path",
        name=name,
        description=description.strip(),
        folder=folder,
        root=root.absolute(),
        content_hash=content_hash(raw),
        body_line=front.body_line,
        declared_version=str(version) if version is not None else None,
        tags=tags,
        depends_on=depends_on,
        effects=effects,
        inputs=inputs,
        outputs=outputs,
        entrypoint=entrypoint,
        requires=requires,
        enabled=enabled,
        availability=availability,
        license=str(license_) if license_ is not None else None,
        compatibility=compatibility,
        allowed_tools=allowed_tools,
        metadata=metadata,
        extra=extra,
    )
    return SkillLoad(skill_file, skill, tuple(out.items))


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class UnreadableFile(Exception):
    """A file a load would read is not a regular file, is too large, or cannot be read.

    Internal: loaders turn it into a diagnostic with ``rule`` and ``message``.
    """

    def __init__(self, rule: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.hint = hint


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def read_own_file(folder: Path, relative: str, max_bytes: int) -> bytes:
    """The bytes of ``folder/relative`` if it is a regular file with a single link, reached
    through no link, and inside ``folder``; else :class:`UnreadableFile`. For files served or
    run from a skill folder, checked again when they are read (the folder may have changed
    since it was loaded)."""
    path = folder / relative
    real_folder = os.path.realpath(folder)
    if os.path.realpath(path) != os.path.join(real_folder, *Path(relative).parts) \
            or not os.path.realpath(path).startswith(real_folder + os.sep):
        raise UnreadableFile("symlink", f"{relative} is reached through a link or leaves the "
                             "folder; it was not read", "replace the link with the file itself")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile("not-a-regular-file", f"{relative} is not a regular file; it "
                                 "was not read", "replace it with an ordinary file")
        if info.st_nlink != 1:
            raise UnreadableFile("hard-link", f"{relative} has {info.st_nlink} links; it was "
                                 "not read", "replace it with a copy of its own")
        if info.st_size > max_bytes:
            raise UnreadableFile("file-too-large", f"{relative} is {info.st_size:,} bytes, over "
                                 f"the {max_bytes:,} limit")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(max_bytes + 1)
    finally:
        os.close(fd)


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``max_bytes``; else
    :class:`UnreadableFile`.

    The file is looked at (``os.stat``) before it is opened: a named pipe would block the load
    for good and a device can do anything on open, so neither is ever opened. The open itself
    does not block, and the file is checked again once open, in case it was swapped meanwhile.
    """
    name = path.name

    def refuse(mode: int) -> UnreadableFile:
        return UnreadableFile("not-a-regular-file",
                              f"{name} is {_file_kind(mode)}, not a regular file; it was not read",
                              "replace it with an ordinary file")

    def too_large(size: int) -> UnreadableFile:
        return UnreadableFile("file-too-large",
                              f"{name} is {size:,} bytes, over the {max_bytes:,} limit")

    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(info.st_mode)
        if info.st_size > max_bytes:
            raise too_large(info.st_size)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(path, flags)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise refuse(info.st_mode)
            chunks: list[bytes] = []
            size = 0
            while size <= max_bytes:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except OSError as exc:
        raise UnreadableFile("unreadable", f"cannot read {name}: {exc.strerror or exc}") from exc
    if size > max_bytes:
        raise too_large(size)
    return b"".join(chunks)


def walk_folders(root: Path, out: list[Diagnostic] | None = None,
                 skip: frozenset[str] | None = None) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk(root, followlinks=False)``, top down, without recursion and with limits.

    Yields ``(folder, subfolder names, other names)`` in sorted order; the caller may prune the
    subfolder list in place. Links to folders are listed but not entered. Folders deeper than
    ``LIBRARY_MAX_DEPTH`` below ``root`` are not entered, and the walk stops after
    ``LIBRARY_MAX_ENTRIES`` names; both are reported into ``out`` when it is given.
    """
    skip = _SKIP_DIRS if skip is None else skip
    stack: list[tuple[Path, int]] = [(root, 0)]
    seen = 0
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        seen += len(entries)
        if seen > limits.LIBRARY_MAX_ENTRIES:
            if out is not None:
                out.append(Diagnostic(
                    Severity.ERROR, "limit-exceeded",
                    f"more than {limits.LIBRARY_MAX_ENTRIES:,} files and folders under {root}; "
                    f"the search stopped at {current} (limit LIBRARY_MAX_ENTRIES)", current,
                    hint="point skillgrove at the folder that holds the library, not above it"))
            return
        dirnames: list[str] = []
        filenames: list[str] = []
        links: set[str] = set()
        for entry in entries:
            try:
                is_dir = entry.is_dir()
                if is_dir and entry.is_symlink():
                    links.add(entry.name)
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        dirnames[:] = [d for d in dirnames if d not in skip]
        yield current, dirnames, filenames
        below = [current / d for d in dirnames if d not in links]
        if not below:
            continue
        if depth >= limits.LIBRARY_MAX_DEPTH:
            if out is not None:
                out.append(Diagnostic(
                    Severity.ERROR, "limit-exceeded",
                    f"folders nest more than {limits.LIBRARY_MAX_DEPTH} levels below {root}; "
                    f"nothing under {current} was searched (limit LIBRARY_MAX_DEPTH)", below[0],
                    hint="move the skills nearer the library root"))
            continue
        stack.extend((folder, depth + 1) for folder in reversed(below))


def _scan(text: str, skill_file: Path, folder: Path, options: LoadOptions,
          out: _Collector) -> SkillFiles:
    """Scan SKILL.md and every other file of the skill folder; reject what the scan cannot
    vouch for: links, pipes and devices, code it cannot read (an executable, bytecode, an
    archive of code), text over the size limit, scripts that reach into a nested skill. What
    runs is then what was scanned: :func:`_entrypoint` allows only files of this listing."""
    rules = options.safety.active_rules()
    findings = scan_text(text, skill_file, rules)
    files = skill_files(folder)
    binary: list[Path] = []  # data the scan cannot read, so no entrypoint may run it
    kind = binary_code(skill_file, b"")
    if kind is not None:
        out.error("binary-code", f"SKILL.md is also {kind}", hint="a SKILL.md is text only")
    if files.truncated:
        out.error("file-too-large", f"the skill folder holds more than {FOLDER_MAX_ENTRIES:,} "
                  "files and folders; the scan stopped", hint="a skill is a few files: move data "
                  "out of the skill folder")
    for link in files.links:
        out.items.append(Diagnostic(Severity.ERROR, "symlink", f"{_relative(link, folder)} is a "
                                    "symbolic link; links in a skill folder are not followed, "
                                    "so the skill is not loaded", link, None, None,
                                    "replace the link with the file itself", out.subject))
    for linked in files.hard_links:
        out.items.append(Diagnostic(Severity.ERROR, "hard-link",
                                    f"{_relative(linked, folder)} has more than one link: it may "
                                    "be a file of another place, so the skill is not loaded",
                                    linked, None, None,
                                    "replace it with a copy of its own", out.subject))
    for odd in files.special:
        out.items.append(Diagnostic(Severity.ERROR, "not-a-regular-file",
                                    f"{_relative(odd, folder)} is not a regular file (a pipe, "
                                    "socket or device); it was not opened", odd, None, None,
                                    "remove it from the skill folder", out.subject))
    for extra_file in files.files:
        where = _relative(extra_file, folder)
        try:
            raw = read_regular_file(extra_file, COMPANION_MAX_BYTES)
        except UnreadableFile as exc:
            if exc.rule == "file-too-large":
                head = _head(extra_file)
                if head is not None and decode_source(head) is None:  # binary data
                    kind = binary_code(extra_file, head)
                    if kind is not None:
                        _binary(out, extra_file, where, kind)
                    binary.append(extra_file)
                    continue
                out.error(exc.rule, exc.message + " for scripts and references",
                          hint=f"the scan cannot vouch for {extra_file}")
            elif exc.rule != "unreadable":  # a pipe or device put there meanwhile
                out.error(exc.rule, exc.message, hint=f"the scan cannot vouch for {extra_file}")
            continue
        kind = binary_code(extra_file, raw[:HEAD_BYTES])
        if kind is not None:
            _binary(out, extra_file, where, kind)
            continue
        extra_text = decode_source(raw)
        if extra_text is None:
            binary.append(extra_file)  # an image, a font: data, unless something runs it
            continue
        findings.extend(scan_text(extra_text, extra_file, rules))
        if extra_file.suffix.lower() not in (".md", ".markdown"):
            line = nested_imports(extra_text, files)
            if line is not None:
                out.items.append(Diagnostic(
                    Severity.ERROR, "nested-skill", f"{where} reaches into a nested skill (a "
                    "sub-folder with its own SKILL.md), which is not part of this skill",
                    extra_file, line, 1, "give the nested skill its own entrypoint, or move "
                    "the shared code out of it", out.subject))
    # The scan is advice for authors and reviewers: a blocklist never proves a skill harmless,
    # and what a skill can do is decided by the sandbox it runs in (runtime/sandbox.py). What is
    # exact (paths out of the folder, links, pipes, sizes, bytecode without source, an engine
    # secret in env) stays an error above.
    for finding in findings:
        where = "" if finding.path == skill_file else f" in {finding.path.name}"
        message = f"unsafe content{where}: {finding.rule.summary}: `{finding.excerpt}`"
        rule_id = f"unsafe:{finding.rule.id}"
        hint = None
        if finding.rule.action is Action.BLOCK:
            hint = ("review it before running the skill: in the sandbox it reaches only what "
                    "its effects and inputs allow (`skillgrove check` lists that); --allow-rule "
                    f"{finding.rule.id} silences this for a trusted library")
        out.items.append(Diagnostic(Severity.WARNING, rule_id, message, finding.path,
                                    finding.line, 1, hint, out.subject))
    return replace(files, binary=tuple(binary))


def _relative(path: Path, folder: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return str(path)


def _binary(out: _Collector, path: Path, where: str, kind: str) -> None:
    out.items.append(Diagnostic(Severity.ERROR, "binary-code", f"{where} is {kind}: code the "
                                "scan cannot read, so the skill is not loaded", path, None, None,
                                "ship the source, which the scan can read, instead",
                                out.subject))


def _head(path: Path) -> bytes | None:
    """The first :data:`HEAD_BYTES` of a regular file, without blocking, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError:
        return None
    try:
        return os.read(fd, HEAD_BYTES) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _string_field(data: Mapping[str, Any], key: str, out: _Collector,
                  *, required: bool = False) -> str | None:
    if key not in data or data[key] is None:
        if required:
            out.error(f"{key}-missing", f"frontmatter has no '{key}'",
                      line=2, column=1, hint=f"add a '{key}:' line to the frontmatter")
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        out.error("field-type", f"'{key}' must be a string, not {_type_name(value)}", at=(key,))
        return None
    text = str(value)
    if required and not text.strip():
        out.error(f"{key}-empty", f"'{key}' is empty", at=(key,))
        return None
    return text


def _check_name(name: str, folder: Path, out: _Collector) -> None:
    invisible = names.invisible_characters(name)
    if invisible:
        out.error("name-invisible", f"name {name!a} holds invisible characters: "
                  + ", ".join(invisible), at=("name",),
                  hint="remove them: a reader cannot see them, and they make one name pose as "
                       "another")
    if len(name) > NAME_MAX:
        out.warn("name-too-long", f"name is {len(name)} characters; Agent Skills allows {NAME_MAX}",
                 at=("name",))
    if not NAME_PATTERN.match(name):
        suggestion = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        out.warn("name-format",
                 f"name '{name}' is not lowercase letters, digits and single hyphens",
                 at=("name",), hint=f"use '{suggestion}'" if suggestion else None)
    elif folder.name != name:
        out.warn("name-mismatch", f"name '{name}' differs from its folder '{folder.name}'",
                 at=("name",), hint="Agent Skills expects the folder to be named after the skill")


def _schema_field(data: Mapping[str, Any], key: str, out: _Collector) -> dict[str, Any] | None:
    schema = data.get(key)
    if schema is None:
        return None
    if not isinstance(schema, dict):
        out.error("schema-invalid", f"'{key}' must be a JSON Schema object", at=(key,))
        return None
    if "type" not in schema and "properties" in schema:
        schema = {"type": "object", **schema}
    from jsonschema import Draft202012Validator  # on first use: a cached load needs none
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = (key, *[p for p in exc.absolute_path if isinstance(p, str | int)])
        out.error("schema-invalid", f"'{key}' is not a valid JSON Schema: {exc.message}", at=where,
                  hint=_type_hint(schema))
        return None
    problems = schema_problems(schema)
    for where, message in problems:
        out.error("schema-invalid", f"'{key}' is not a usable JSON Schema: {message}",
                  at=(key, *where))
    if problems:
        return None
    for where, risky in _risky_patterns(schema):
        out.warn("schema-pattern-risky", f"'{key}' has the pattern {_short_repr(risky)}, which "
                 "repeats a repetition and can take exponential time to match; values are not "
                 "checked against it", at=(key, *where),
                 hint="rewrite it so that no repeated group contains a repetition or an "
                      "alternation, e.g. '^a+$' for '^(a+)+$'")
    props = schema.get("properties")
    for name, prop in (props.items() if isinstance(props, dict) else ()):
        if isinstance(prop, dict) and "default" in prop:
            at = (key, "properties", str(name), "default")
            check = check_value(prop["default"], schema, ("properties", name))
            if check.skipped:
                out.warn("default-unchecked", f"{key}.{name}: default not checked against its "
                         f"schema: {check.skipped}", at=at)
            elif check.problems:
                out.error("default-type", f"{key}.{name}: default {_short_repr(prop['default'])} "
                          f"does not fit its schema: {check.problems[0]}", at=at)
    return schema


TYPE_ALIASES = {"str": "string", "text": "string", "int": "integer", "long": "integer",
                "float": "number", "double": "number", "decimal": "number", "bool": "boolean",
                "dict": "object", "map": "object", "list": "array", "tuple": "array",
                "none": "null"}
"""Type names other tool formats use (``"STRING"``, ``"int"``, ``"dict"``), by JSON Schema's."""


def retyped(value: Any, rename: Callable[[str], str]) -> Any:
    """``value`` (a schema) with every ``type`` name (alone or in a list) renamed."""
    if isinstance(value, list):
        return [retyped(v, rename) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: retyped(v, rename) for k, v in value.items()}
    kind = value.get("type")
    if isinstance(kind, str):
        out["type"] = rename(kind)
    elif isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        out["type"] = [rename(k) for k in kind]
    return out


def _json_type(kind: str) -> str:
    return TYPE_ALIASES.get(kind.lower(), kind.lower())


def json_schema_types(value: Any) -> Any:
    """``value`` (a schema) with every ``type`` spelled as JSON Schema spells it."""
    return retyped(value, _json_type)


def _type_hint(schema: Any) -> str | None:
    """How to fix a schema refused only for its type names, or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    fixed = json_schema_types(schema)
    if fixed == schema:
        return None
    try:
        Draft202012Validator.check_schema(fixed)
    except SchemaError:
        return None
    named: set[str] = set()

    def noted(kind: str) -> str:
        named.add(kind)
        return kind

    retyped(schema, noted)
    wrong = sorted(named - set(TYPE_ALIASES.values()))
    said = ", ".join(f"'{_json_type(w)}' for '{w}'" for w in wrong)
    return ("JSON Schema's types are string, integer, number, boolean, object, array and "
            f"null: write {said}")


def contract_problem(key: str, schema: Any) -> str | None:
    """Why ``schema`` would keep a skill declaring it as its ``key`` (``inputs`` or
    ``outputs``) from loading, or None: the checks :func:`load_skill` makes, for a caller that
    writes skills (the benchmark harness)."""
    out = _Collector(Path(key))
    _schema_field({key: schema}, key, out)
    return next((d.message for d in out.items if d.is_error), None)


# -- JSON Schema, used safely ---------------------------------------------------------------
#
# A schema in a skill is checked once at load time, so that nothing about it can fail later: every
# `$ref` must resolve inside the schema (or to the JSON Schema meta-schemas; nothing is fetched
# from the network), and no chain of `$ref`s may apply to the same value forever. Defaults (and
# literal `with:` values in groups) are checked against the schema only when that is cheap and
# safe: never against a `pattern` whose repetitions nest, which can backtrack for hours, and
# within a bounded amount of work (see `skills.limits`). A value that is not checked is a
# warning, not an error.

_SCHEMA_URI = "urn:skillgrove:schema"
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "$ref")


@dataclass(frozen=True)
class ValueCheck:
    """The outcome of :func:`check_value`: the problems found, or why the value was not
    checked."""

    problems: tuple[str, ...] = ()
    skipped: str | None = None


def _short_repr(value: Any, width: int = 60) -> str:
    text = repr(value) if _count_nodes(value, 1_000) < 1_000 else f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def _count_nodes(value: Any, stop: int) -> int:
    """Values inside ``value`` (itself included), counting at most ``stop``."""
    count, stack = 0, [value]
    while stack and count < stop:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _subschemas(schema: Any) -> Iterator[tuple[tuple[str | int, ...], dict[Any, Any]]]:
    """Every mapping inside ``schema`` with its path, depth first (no recursion)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), schema)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            yield path, item
            stack.extend(((*path, k if isinstance(k, str | int) else str(k)), v)
                         for k, v in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, i), v) for i, v in enumerate(item))


def _registry(schema: Mapping[str, Any]) -> Any:
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
    from referencing.jsonschema import DRAFT202012

    resource = DRAFT202012.create_resource(dict(schema))
    registry = REGISTRY.with_resource(_SCHEMA_URI, resource)
    return registry


def _pointer(ref: str) -> tuple[str, ...] | None:
    """The path of a local ``#/a/b`` reference, or None for any other kind."""
    if ref == "#":
        return ()
    if not ref.startswith("#/"):
        return None
    from urllib.parse import unquote

    return tuple(unquote(part).replace("~1", "/").replace("~0", "~") for part in ref[2:].split("/"))


def _follow(schema: Any, pointer: tuple[str, ...]) -> tuple[str | int, ...] | None:
    """The path of the value a local pointer names, or None if it names nothing."""
    path: list[str | int] = []
    current = schema
    for part in pointer:
        if isinstance(current, dict) and part in current:
            current = current[part]
            path.append(part)
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
            path.append(int(part))
        else:
            return None
    return tuple(path)


def schema_problems(schema: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """What makes a (metaschema-valid) schema unusable: ``$ref``s that do not resolve, or that
    loop without reading any part of the value. Each problem comes with its path in ``schema``."""
    from referencing.exceptions import PointerToNowhere, Unresolvable

    problems: list[tuple[tuple[str | int, ...], str]] = []
    nested_ids = False
    resolver = _registry(schema).resolver(_SCHEMA_URI)
    local_edges: dict[tuple[str | int, ...], list[tuple[str | int, ...]]] = {}
    for path, sub in _subschemas(schema):
        if path and isinstance(sub.get("$id"), str):
            nested_ids = True
        ref = sub.get("$ref")
        if not isinstance(ref, str):
            continue
        if nested_ids:
            continue  # a nested $id moves the base of relative references; jsonschema decides
        try:
            resolver.lookup(ref)
        except PointerToNowhere:
            problems.append(((*path, "$ref"), f"$ref {ref!r} names nothing in this schema"))
            continue
        except Unresolvable:
            problems.append(((*path, "$ref"), f"$ref {ref!r} points outside this schema; only "
                             "references inside it are followed (nothing is fetched)"))
            continue
        except (ValueError, LookupError, TypeError) as exc:
            problems.append(((*path, "$ref"), f"$ref {ref!r} cannot be followed: {exc}"))
            continue
        pointer = _pointer(ref)
        target = _follow(schema, pointer) if pointer is not None and "$id" not in schema else None
        if target is not None:
            local_edges.setdefault(path, []).append(target)
    if problems or nested_ids:
        return problems
    loop = _in_place_loop(schema, local_edges)
    if loop is not None:
        problems.append(((*loop, "$ref"), "this $ref leads back to itself without reading any "
                         "part of the value, so checking a value would never end"))
    return problems


def _in_place_loop(schema: Any, refs: Mapping[tuple[str | int, ...], list[tuple[str | int, ...]]]
                   ) -> tuple[str | int, ...] | None:
    """A subschema that applies itself to the same value again (through ``$ref``, ``allOf``,
    ``not``...), or None."""
    nodes = dict(_subschemas(schema))

    def edges(path: tuple[str | int, ...]) -> list[tuple[str | int, ...]]:
        sub = nodes.get(path)
        if sub is None:
            return []
        found = list(refs.get(path, ()))
        for keyword in _IN_PLACE:
            value = sub.get(keyword)
            if keyword in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                found.extend((*path, keyword, i) for i in range(len(value)))
            elif keyword == "dependentSchemas" and isinstance(value, dict):
                found.extend((*path, keyword, str(k)) for k in value)
            elif keyword in ("not", "if", "then", "else") and isinstance(value, dict):
                found.append((*path, keyword))
        return found

    state: dict[tuple[str | int, ...], int] = {}  # 1 on the current path, 2 done
    for start in nodes:
        if start in state:
            continue
        stack = [(start, iter(edges(start)))]
        state[start] = 1
        while stack:
            node, pending = stack[-1]
            nxt = next(pending, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return next((p for p, _ in stack if p in refs), node)
            elif nxt not in state and nxt in nodes:
                state[nxt] = 1
                stack.append((nxt, iter(edges(nxt))))
    return None


def risky_pattern(pattern: str) -> bool:
    """Whether a regular expression has a repetition inside a repetition (``(a+)+``,
    ``(a|aa)*``, ``(x*y*)*``): the shapes that can make a match backtrack exponentially.

    A repeated group that starts with a literal none of its inner repetitions can match
    (``(?:-[a-z0-9]+)*``, ``(\\.\\d+)+``) is not risky: that literal marks where each round
    starts, so there is one way to split the text. Otherwise the scan is coarse on purpose: it
    may call a harmless pattern risky (then it is not applied, with a warning), never the
    reverse for these shapes.

    >>> risky_pattern("^(a+)+$"), risky_pattern("^[a-z0-9-]+$")
    (True, False)
    >>> risky_pattern("^[a-z0-9]+(?:-[a-z0-9]+)*$"), risky_pattern("^(?:[a-z-]+)*$")
    (False, True)
    """
    frames = [_Frame(0)]
    last_group: _Frame | None = None  # the group that just closed, if the last atom is one
    last_atom: str | None = None  # the last atom, if it is not a group
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        atom_group: _Frame | None = None
        atom = pattern[i]
        if char == "\\":
            atom = pattern[i : i + 2]
            i += 2
        elif char == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            atom = pattern[i : j + 1]
            i = j + 1
        elif char == "(":
            i += 1
            frames.append(_Frame(i))
        elif char == ")":
            if len(frames) > 1:
                atom_group = frames.pop()
                atom_group.led = _led_by_separator(pattern, atom_group, i)
                if atom_group.repeats:
                    frames[-1].repeats = True
                    frames[-1].atoms = None  # a repetition inside a group: no simple atom
            i += 1
        elif char == "|":
            frames[-1].alternation = True
            i += 1
        elif char in "*+?{":
            repeats, i = _quantifier(pattern, i)
            if repeats:
                if last_group is not None:
                    if (last_group.repeats or last_group.alternation) and not last_group.led:
                        return True
                    frames[-1].atoms = None
                elif frames[-1].atoms is not None and last_atom is not None:
                    frames[-1].atoms.append(last_atom)
                frames[-1].repeats = True
            last_group = None
            last_atom = None
            continue
        else:
            i += 1
        last_group = atom_group
        last_atom = atom if atom_group is None and char != "(" else None
    return False


@dataclass
class _Frame:
    """An open group of :func:`risky_pattern`: where its body starts and what it holds."""

    start: int
    repeats: bool = False
    alternation: bool = False
    atoms: list[str] | None = field(default_factory=list)
    """The atoms repeated directly inside (None once a repeated group is among them)."""
    led: bool = False
    """Set when it closes: it starts with a literal that none of ``atoms`` can match."""


def _led_by_separator(pattern: str, frame: _Frame, end: int) -> bool:
    if frame.alternation or frame.atoms is None:
        return False
    body = pattern[frame.start : end]
    if body.startswith("?:"):
        body = body[2:]
    elif body.startswith("?P<") and ">" in body:
        body = body[body.index(">") + 1 :]
    elif body.startswith("?"):
        return False  # lookarounds, flags, backreferences: not worth the trouble
    if body[:1] == "\\" and len(body) > 1 and not body[1].isalnum():
        literal = body[1]
    elif body[:1] and body[0] not in ".^$*+?{}[]\\|()":
        literal = body[0]
    else:
        return False
    width = 2 if body[0] == "\\" else 1
    if body[width : width + 1] in ("*", "+", "?", "{"):
        return False  # the literal itself is optional or repeated
    try:
        return not any(re.fullmatch(atom, literal) for atom in frame.atoms)
    except re.error:
        return False


def _quantifier(pattern: str, i: int) -> tuple[bool, int]:
    """(whether the quantifier at ``i`` repeats more than once, index after it)."""
    char = pattern[i]
    if char in "*+":
        end = i + 1
        repeats = True
    elif char == "?":
        end = i + 1
        repeats = False
    else:
        match = re.match(r"\{(\d*)(,?)(\d*)\}", pattern[i:])
        if match is None:
            return False, i + 1  # a literal '{'
        end = i + match.end()
        low, comma, high = match.groups()
        bound = (_bound(high) if high else 10**6) if comma else (_bound(low) if low else 0)
        repeats = bound > 1
    if end < len(pattern) and pattern[end] in "?+":
        end += 1  # lazy or possessive
    return repeats, end


def _bound(digits: str) -> int:
    """The number a quantifier's digits spell, capped (Python refuses very long ones)."""
    digits = digits.lstrip("0")
    return int(digits) if len(digits) <= 6 else 10**6


def _patterns(schema: Any) -> Iterator[str]:
    for _, sub in _subschemas(schema):
        if isinstance(sub.get("pattern"), str):
            yield sub["pattern"]
        if isinstance(sub.get("patternProperties"), dict):
            yield from (str(k) for k in sub["patternProperties"])


def _risky_patterns(schema: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """Each ``pattern`` (or ``patternProperties`` key) whose repetitions nest, with its path."""
    found = []
    for path, sub in sorted(_subschemas(schema), key=lambda item: [str(p) for p in item[0]]):
        if isinstance(sub.get("pattern"), str) and risky_pattern(sub["pattern"]):
            found.append(((*path, "pattern"), sub["pattern"]))
        if isinstance(sub.get("patternProperties"), dict):
            found.extend(((*path, "patternProperties", str(key)), str(key))
                         for key in sub["patternProperties"] if risky_pattern(str(key)))
    return found


def _longest_string(value: Any) -> int:
    longest, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(str(k) for k in item)
        elif isinstance(item, list):
            stack.extend(item)
    return longest


def check_value(value: Any, schema: Mapping[str, Any],
                at: tuple[str | int, ...] = ()) -> ValueCheck:
    """Check ``value`` against the part of ``schema`` at path ``at`` (references resolve against
    the whole ``schema``), within the limits above. Never raises.

    >>> check_value(3, {"properties": {"n": {"type": "string"}}}, ("properties", "n")).problems
    ("3 is not of type 'string'",)
    """
    from referencing.exceptions import Unresolvable

    patterns = list(_patterns(schema))
    risky = next((p for p in patterns if risky_pattern(p)), None)
    if risky is not None:
        return ValueCheck(skipped=f"its pattern {risky!r} repeats a repetition, which can take "
                          "exponential time to match")
    if patterns and _longest_string(value) > limits.SCHEMA_PATTERN_MAX_SUBJECT:
        return ValueCheck(skipped=f"it holds a string longer than "
                          f"{limits.SCHEMA_PATTERN_MAX_SUBJECT:,} characters to match against a "
                          "pattern (limit SCHEMA_PATTERN_MAX_SUBJECT)")
    value_nodes = _count_nodes(value, limits.SCHEMA_CHECK_MAX_WORK + 1)
    schema_nodes = _count_nodes(schema, limits.SCHEMA_CHECK_MAX_WORK + 1)
    work = value_nodes * schema_nodes
    if any("uniqueItems" in sub for _, sub in _subschemas(schema)):
        work += value_nodes * value_nodes
    if work > limits.SCHEMA_CHECK_MAX_WORK:
        return ValueCheck(skipped=f"the value ({value_nodes:,} items) and the schema "
                          f"({schema_nodes:,} items) are too large to check at load time "
                          "(limit SCHEMA_CHECK_MAX_WORK)")
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in at)
    from urllib.parse import quote

    from jsonschema import Draft202012Validator

    target = {"$ref": _SCHEMA_URI + "#" + quote(pointer, safe="/~")} if at else dict(schema)
    try:
        validator = Draft202012Validator(target, registry=_registry(schema))
        problems = tuple(error.message for error in validator.iter_errors(value))
    except Unresolvable as exc:
        return ValueCheck((f"a $ref does not resolve: {exc}",))
    except RecursionError:
        return ValueCheck(("the schema refers to itself without end",))
    except (ValueError, TypeError, OverflowError, LookupError) as exc:
        return ValueCheck((f"the value cannot be checked against it: {exc}",))
    return ValueCheck(problems)


def run_time_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for values met at run time (a skill's output, a tool's arguments) that
    cannot hang or reach the network: ``$ref`` resolves only inside ``schema`` and the
    meta-schemas, and a ``pattern`` (or the ``patternProperties`` keyword) whose repetitions
    nest is not applied (the loader warns about it, rule ``schema-pattern-risky``)."""
    from jsonschema import Draft202012Validator, validators

    base = Draft202012Validator.VALIDATORS

    def pattern(validator: Any, value: Any, instance: Any, subschema: Any) -> Any:
        if isinstance(value, str) and risky_pattern(value):
            return
        yield from base["pattern"](validator, value, instance, subschema)

    def pattern_properties(validator: Any, value: Any, instance: Any, subschema: Any) -> Any:
        if isinstance(value, dict) and any(risky_pattern(str(key)) for key in value):
            return
        yield from base["patternProperties"](validator, value, instance, subschema)

    cls = validators.extend(Draft202012Validator,  # type: ignore[no-untyped-call]
                            {"pattern": pattern, "patternProperties": pattern_properties})
    return cls(dict(schema), registry=_registry(schema))


def _entrypoint(data: Mapping[str, Any], folder: Path, out: _Collector,
                files: SkillFiles | None = None) -> Entrypoint | None:
    """The entrypoint, if every file it can run is a file of the skill that the scan read
    (``files``; see :func:`skillgrove.skills.safety.command_problems`)."""
    files = files if files is not None else skill_files(folder)
    raw = data.get("entrypoint")
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = {"python": raw} if re.search(r"\.py:\w+$", raw) else {"command": raw.split()}
    if not isinstance(raw, dict):
        out.error("entrypoint-invalid", "'entrypoint' must be a mapping with python, command or "
                  "http", at=("entrypoint",))
        return None
    kinds = [k for k in ("python", "command", "http") if k in raw]
    allowed = {"python", "command", "http", "method", "headers", "timeout", "env"}
    for key in raw:
        if key not in allowed:
            out.error("entrypoint-invalid", f"unknown entrypoint field '{key}'",
                      at=("entrypoint", str(key)), key=True,
                      hint=did_you_mean(str(key), allowed))
    if len(kinds) != 1:
        out.error("entrypoint-invalid",
                  "an entrypoint needs exactly one of 'python', 'command' or 'http'",
                  at=("entrypoint",))
        return None
    kind = kinds[0]
    timeout = raw.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not 0 < timeout <= limits.DURATION_MAX_SECONDS):
        out.error("entrypoint-invalid", "'entrypoint.timeout' must be a positive number of seconds"
                  f", at most {limits.DURATION_MAX_SECONDS:g} (limit DURATION_MAX_SECONDS)",
                  at=("entrypoint", "timeout"))
        timeout = None
    seconds = float(timeout) if timeout is not None else None
    env = raw.get("env") or []
    if isinstance(env, str):
        env = [env]
    if not isinstance(env, list) or not all(isinstance(v, str) for v in env):
        out.error("entrypoint-invalid", "'entrypoint.env' must be a list of variable names",
                  at=("entrypoint", "env"))
        env = []
    passthrough = tuple(env)
    if kind == "python":
        target = raw["python"]
        match = re.fullmatch(r"(?P<file>[^:]+\.py):(?P<func>[A-Za-z_]\w*)", str(target))
        if not match:
            out.error("entrypoint-invalid", f"python entrypoint '{target}' is not 'file.py:function'",
                      at=("entrypoint", "python"))
            return None
        problem = path_problem(match["file"], files, "python entrypoint")
        if problem is not None:
            out.error(problem.rule, problem.message, at=("entrypoint", "python"),
                      hint=problem.hint)
            return None
        return Entrypoint("python", target=str(target), timeout=seconds, env=passthrough)
    if kind == "command":
        argv = raw["command"]
        if isinstance(argv, str):
            argv = argv.split()
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            quoted = isinstance(argv, list) and any(isinstance(a, bool | int | float) for a in argv)
            out.error("entrypoint-invalid", "command entrypoint must be a list of strings "
                      "(the argument vector; no shell)", at=("entrypoint", "command"),
                      hint="quote words YAML reads as other types: 'yes', 'no', 'on', '300'"
                      if quoted else None)
            return None
        problems = command_problems(argv, files)
        for problem in problems:
            where: PathKey = ("entrypoint", "command")
            if problem.argument is not None and isinstance(raw["command"], list):
                where = ("entrypoint", "command", problem.argument)
            out.error(problem.rule, problem.message, at=where, hint=problem.hint)
        if problems:
            return None
        return Entrypoint("command", argv=tuple(argv), timeout=seconds, env=passthrough)
    url = raw["http"]
    if not isinstance(url, str) or not re.match(r"^https?://", url):
        out.error("entrypoint-invalid", "http entrypoint must be an http:// or https:// URL",
                  at=("entrypoint", "http"))
        return None
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict):
        out.error("entrypoint-invalid", "'entrypoint.headers' must be a mapping",
                  at=("entrypoint", "headers"))
        headers = {}
    method = str(raw.get("method", "POST")).upper()
    return Entrypoint("http", target=url, method=method,
                      headers=tuple((str(k), str(v)) for k, v in headers.items()), timeout=seconds,
                      env=passthrough)


def _string_list(data: Mapping[str, Any], key: str, out: _Collector,
                 at: PathKey | None = None) -> tuple[str, ...]:
    container = data
    value = container.get(key)
    where = at or (key,)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        out.error("field-type", f"'{format_path(where)}' must be a list of strings", at=where)
        return ()
    return tuple(str(v) for v in value)


def _no_engine_secrets(entrypoint: Entrypoint | None, requires: Requirements,
                       effects: tuple[str, ...], out: _Collector, options: LoadOptions) -> None:
    """A variable a skill declares is handed to it: the engine's secrets cannot be declared
    (see :mod:`skillgrove.skills.secrets`)."""
    listed = owner_listed(options.environ)
    declared: list[tuple[str, PathKey]] = [
        (name, ("requires", "env", index)) for index, name in enumerate(requires.env)]
    if entrypoint is not None:
        declared += [(name, ("entrypoint", "env", index))
                     for index, name in enumerate(entrypoint.env)]
    for name, where in declared:
        why = secret_reason(name, effects=effects, owner_listed=listed)
        if why is not None:
            out.error("engine-secret", f"'{name}' is {why}: a skill cannot be given it",
                      at=where, hint=f"remove '{name}' from the skill's env")


def _effects(data: Mapping[str, Any], out: _Collector) -> tuple[str, ...]:
    """``effects``: a list of names, or ``none`` / ``[]`` for a skill that changes nothing."""
    if isinstance(data.get("effects"), str) and data["effects"].strip().lower() == "none":
        return ()
    effects = _string_list(data, "effects", out)
    for index, effect in enumerate(effects):
        if effect not in KNOWN_EFFECTS:
            out.warn("unknown-effect", f"unknown effect '{effect}' (kept: it still needs "
                     "confirmation)", at=("effects", index),
                     hint=did_you_mean(effect, KNOWN_EFFECTS)
                     or "known effects: " + ", ".join(KNOWN_EFFECTS))
    return tuple(dict.fromkeys(effects))


def _allowed_tools(data: Mapping[str, Any], out: _Collector) -> tuple[str, ...]:
    value = data.get("allowed-tools")
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    return _string_list(data, "allowed-tools", out)


def _requirements(data: Mapping[str, Any], out: _Collector) -> Requirements:
    raw = data.get("requires")
    where: PathKey = ("requires",)
    if raw is None:
        # OpenClaw keeps its gating under metadata.openclaw; honour it when present.
        meta = data.get("metadata")
        claw = meta.get("openclaw") if isinstance(meta, dict) else None
        if isinstance(claw, dict) and isinstance(claw.get("requires"), dict):
            raw = {**claw["requires"], **({"os": claw["os"]} if "os" in claw else {})}
            where = ("metadata", "openclaw", "requires")
        else:
            return Requirements()
    if not isinstance(raw, dict):
        out.error("field-type", "'requires' must be a mapping (bins, any_bins, env, os, mcp)",
                  at=where)
        return Requirements()
    values: dict[str, tuple[str, ...]] = {}
    for key in raw:
        field_name = _REQUIRES_ALIASES.get(str(key), str(key))
        if field_name not in REQUIRES_FIELDS:
            out.warn("unknown-field", f"unknown requirement '{key}' (ignored)",
                     at=(*where, str(key)), key=True,
                     hint=did_you_mean(str(key), REQUIRES_FIELDS))
            continue
        values[field_name] = _string_list(raw, str(key), out, at=(*where, str(key)))
    if "os" in values:
        values["os"] = tuple(_OS_ALIASES.get(o.lower(), o.lower()) for o in values["os"])
    return Requirements(**values)


def check_requirements(req: Requirements, enabled: bool, options: LoadOptions) -> Availability:
    """Gating: why this skill cannot run here, if it cannot."""
    environ = os.environ if options.environ is None else options.environ
    reasons: list[str] = []
    if not enabled:
        reasons.append("disabled (enabled: false)")
    platform = options.platform
    if req.os and not any(platform.startswith(o) for o in req.os):
        reasons.append(f"needs OS {' or '.join(req.os)}, this is {platform}")
    missing = [b for b in req.bins if options.which(b) is None]
    if missing:
        reasons.append("missing binary " + ", ".join(missing))
    if req.any_bins and all(options.which(b) is None for b in req.any_bins):
        reasons.append("needs one of the binaries " + ", ".join(req.any_bins))
    unset = [v for v in req.env if not environ.get(v)]
    if unset:
        reasons.append("environment variable not set: " + ", ".join(unset))
    return Availability(not reasons, tuple(reasons))


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "a boolean"}.get(type(value), "empty")


def read_sidecar_id(folder: Path) -> str | None:
    """The id in the folder's ``.skill_id``, if it holds a valid one (never through a pipe or a
    link, never more than a few bytes)."""
    try:
        existing = read_regular_file(folder / ID_SIDECAR, limits.SKILL_ID_MAX_BYTES).decode(
            "utf-8", errors="replace").strip()
    except UnreadableFile:
        return None
    return existing if _ID_PATTERN.match(existing) else None


def write_sidecar_id(skill: Skill) -> bool:
    """Write ``skill.id`` into a ``.skill_id`` of its folder, unless one is there (a copied or
    broken sidecar is the owner's to fix) or the name is a link, pipe or device."""
    sidecar = skill.folder / ID_SIDECAR
    if sidecar.is_symlink() or sidecar.exists():
        return False
    try:
        with open(sidecar, "x", encoding="utf-8") as handle:
            handle.write(skill.id + "\n")
    except OSError:
        return False
    return True


def find_skill_files(root: Path, out: list[Diagnostic]) -> list[Path]:
    """Every SKILL.md under ``root``, nested folders included, without following links.

    Problems of the walk itself (links, limits) are appended to ``out``."""
    found: list[Path] = []
    for current, dirnames, filenames in walk_folders(root, out):
        kept = []
        for d in dirnames:
            if (current / d).is_symlink():
                if (current / d / SKILL_FILE).exists():
                    out.append(Diagnostic(Severity.ERROR, "symlink",
                                          "skill folder is a symbolic link; links are not followed",
                                          current / d / SKILL_FILE, None, None,
                                          "copy the skill into the library instead of linking it"))
                continue
            kept.append(d)
        dirnames[:] = kept
        if SKILL_FILE in filenames:
            found.append(current / SKILL_FILE)
    return found


def discover_skills(roots: Sequence[Path], options: LoadOptions = DEFAULT_OPTIONS) -> SkillCatalog:
    """Load every skill under ``roots``; for a name, earlier roots come first, then
    :func:`precedence_key` order inside a root. A SKILL.md an earlier root already holds (roots
    that overlap) is loaded once, from that root."""
    loads: list[SkillLoad] = []
    diagnostics: list[Diagnostic] = []
    seen_files: set[Path] = set()
    for root in roots:
        walk_diags: list[Diagnostic] = []
        root_loads: list[tuple[Path, SkillLoad]] = []
        for skill_file in find_skill_files(root, walk_diags):
            resolved = skill_file.resolve()
            if resolved in seen_files:
                continue
            seen_files.add(resolved)
            root_loads.append((skill_file, load_skill(skill_file, root, options)))
        root_loads.extend((d.path, SkillLoad(d.path, None, (d,))) for d in walk_diags
                          if d.path is not None and d.rule == "symlink")
        root_loads.sort(key=lambda item: precedence_key(_below(item[0].parent, root)))
        loads.extend(load for _, load in root_loads)
        diagnostics.extend(d for d in walk_diags if d.path is None or d.rule != "symlink")

    skills: list[Skill] = []
    active: dict[str, Skill] = {}
    shadowed: list[Shadowing] = []
    seen_ids: dict[str, Skill] = {}
    for load in loads:
        diagnostics.extend(load.diagnostics)
        skill = load.skill
        if skill is None:
            continue
        if skill.id in seen_ids:
            other = seen_ids[skill.id]
            fresh = _unused_id(skill, seen_ids)
            if skill.id_source == "sidecar":
                diagnostics.append(Diagnostic(
                    Severity.WARNING, "duplicate-id",
                    f"'{ID_SIDECAR}' repeats the id of {other.folder}; using {fresh} here",
                    skill.folder / ID_SIDECAR, 1, 1,
                    f"delete {skill.folder / ID_SIDECAR} so a fresh id is made", skill.name))
            # else: an earlier root holds a skill at the same relative path (no one's mistake)
            skill = replace(skill, id=fresh, id_source="path")
        if options.write_ids and skill.id_source == "path" and write_sidecar_id(skill):
            skill = replace(skill, id_source="sidecar")
        seen_ids[skill.id] = skill
        skills.append(skill)
        winner = active.get(skill.name)
        if winner is None:
            active[skill.name] = skill
            continue
        shadowed.append(Shadowing(skill, winner))
        diagnostics.append(_duplicate_diagnostic(skill, winner))
    refused = _lookalike_names(active)
    if refused:
        # Every skill of a refused name goes, the ones it shadowed too.
        gone = {name for name, skill in active.items() if skill.skill_file in refused}
        loads = [SkillLoad(load.path, None, (*load.diagnostics, refused[load.skill.skill_file]))
                 if load.skill is not None and load.skill.skill_file in refused else load
                 for load in loads]
        diagnostics.extend(refused.values())
        skills = [skill for skill in skills if skill.name not in gone]
        active = {name: skill for name, skill in active.items() if name not in gone}
        shadowed = [s for s in shadowed if s.winner.name not in gone]
    return SkillCatalog(tuple(roots), tuple(loads), tuple(skills), active, tuple(shadowed),
                        tuple(diagnostics))


def _lookalike_names(active: Mapping[str, Skill]) -> dict[Path, Diagnostic]:
    """Skills whose names look like another skill's name (same :func:`names.skeleton`, another
    spelling), each with its error. Of the names that look alike, the one kept is a name of the
    Agent Skills form (lowercase ASCII), else a plain ASCII one, else the first loaded."""
    by_look: dict[str, list[Skill]] = {}
    for skill in active.values():
        by_look.setdefault(names.skeleton(skill.name), []).append(skill)
    refused: dict[Path, Diagnostic] = {}
    for alike in by_look.values():
        if len(alike) < 2:
            continue
        order = {id(skill): index for index, skill in enumerate(alike)}
        kept = min(alike, key=lambda s: (not NAME_PATTERN.match(s.name),
                                         not names.is_plain(s.name), order[id(s)]))
        for skill in alike:
            if skill is kept:
                continue
            why = names.describe_difference(skill.name, kept.name)
            refused[skill.skill_file] = Diagnostic(
                Severity.ERROR, "name-lookalike",
                f"skill name {skill.name!a} looks like {kept.name!a} "
                f"({kept.skill_file}); they differ only in {why}",
                skill.skill_file, None, None,
                f"rename it, or remove one of the two: only {kept.name!a} is loaded",
                skill.name)
    return refused


def _below(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:
        return path


def _unused_id(skill: Skill, taken: Mapping[str, Skill]) -> str:
    """An id for a skill whose own is taken: its path id qualified by its root, numbered if
    even that is taken (never random, so it is the same on the next load)."""
    relative = relative_folder(skill.folder, skill.root)
    base = path_id(relative, skill.root)
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}-{number}"
    return candidate


def _duplicate_diagnostic(hidden: Skill, winner: Skill) -> Diagnostic:
    """Both paths, and which one answers for the name: the rule that decided, in words."""
    if hidden.root == winner.root:
        rule = "duplicate-name"
        message = (f"skill '{hidden.name}' is also defined at {winner.skill_file}, which is used "
                   "for the name (inside one root the first path wins, compared ignoring letter "
                   f"case, then upper case first); this one stays loaded, under id {hidden.id}")
        hint = ("rename one of them if both are needed, or pass the folder you prefer as an "
                "earlier root")
    else:
        rule = "shadowed"
        message = (f"skill '{hidden.name}' is shadowed by {winner.skill_file} from an earlier "
                   f"root, which is used for the name; this one stays loaded, under id "
                   f"{hidden.id}")
        hint = "rename one of them if both are needed, or change the order of the roots"
    return Diagnostic(Severity.WARNING, rule, message, hidden.skill_file, None, None, hint,
                      hidden.name)

