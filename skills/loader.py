"""Loading skills: one SKILL.md into a :class:`Skill`, and a set of roots into a catalog.

Loading never raises for a user mistake: every problem becomes a :class:`Diagnostic`. A skill with
an error is *rejected* (not in the catalog) and the rejection names its rule; a skill with only
warnings loads. Any file with YAML frontmatter holding ``name`` and ``description`` loads, as an
instruction-only skill when it declares nothing else.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from skillgrove.skills._yaml import PathKey, SourceMap, YamlSyntaxError, format_path, load_located
from skillgrove.skills.diagnostics import Diagnostic, Severity, did_you_mean
from skillgrove.skills.model import (
    ID_SIDECAR,
    SKILL_FILE,
    Availability,
    Entrypoint,
    Requirements,
    Skill,
    content_hash,
)
from skillgrove.skills.safety import Action, SafetyPolicy, companion_files, scan_text

NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
NAME_MAX = 64
DESCRIPTION_MAX = 1024
COMPATIBILITY_MAX = 500
COMPANION_MAX_BYTES = 1024 * 1024
_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
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
    """Write a ``.skill_id`` sidecar for skills that have none (indexing does; ``check`` does not)."""
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
    hidden: Skill
    winner: Skill


@dataclass(frozen=True)
class SkillCatalog:
    """Every skill found under the roots, with name resolution already decided.

    ``active`` maps a name to the skill that answers for it: the one from the earliest root (or,
    inside one root, the first by path). The others stay in ``skills`` under their own ids.
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
        size = skill_file.stat().st_size
        if size > options.safety.max_file_bytes:
            out.error("file-too-large",
                      f"SKILL.md is {size:,} bytes, over the {options.safety.max_file_bytes:,} limit",
                      hint="move long reference material into separate files the body links to")
            return SkillLoad(skill_file, None, tuple(out.items))
        raw = skill_file.read_bytes()
    except OSError as exc:
        out.error("unreadable", f"cannot read SKILL.md: {exc.strerror or exc}")
        return SkillLoad(skill_file, None, tuple(out.items))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        out.error("not-utf8", "SKILL.md is not valid UTF-8", line=line,
                  hint="save the file as UTF-8")
        return SkillLoad(skill_file, None, tuple(out.items))

    front = split_frontmatter(text, out)
    _scan(text, skill_file, folder, options, out)
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
    entrypoint = _entrypoint(data, folder, out)
    requires = _requirements(data, out)
    tags = _string_list(data, "tags", out)
    depends_on = _string_list(data, "depends_on", out)
    effects = _effects(data, out)
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

    availability = check_requirements(requires, enabled, options)
    if not availability.available:
        out.warn("unavailable", "skill is unavailable here: " + "; ".join(availability.reasons),
                 line=1, column=1)

    skill = Skill(
        id=_skill_id(folder, options),
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


def _scan(text: str, skill_file: Path, folder: Path, options: LoadOptions, out: _Collector) -> None:
    rules = options.safety.active_rules()
    findings = scan_text(text, skill_file, rules)
    for extra_file in companion_files(folder):
        try:
            size = extra_file.stat().st_size
            if size > COMPANION_MAX_BYTES:
                out.error("file-too-large",
                          f"{extra_file.name} is {size:,} bytes, over the "
                          f"{COMPANION_MAX_BYTES:,} limit for scripts and references",
                          hint=f"the scan cannot vouch for {extra_file}")
                continue
            extra_text = extra_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        findings.extend(scan_text(extra_text, extra_file, rules))
    for finding in findings:
        where = "" if finding.path == skill_file else f" in {finding.path.name}"
        message = f"unsafe content{where}: {finding.rule.summary}: `{finding.excerpt}`"
        rule_id = f"unsafe:{finding.rule.id}"
        if finding.rule.action is Action.BLOCK:
            out.items.append(Diagnostic(Severity.ERROR, rule_id, message, finding.path,
                                        finding.line, 1, "remove it, or allow the rule explicitly "
                                        f"with --allow-rule {finding.rule.id} for a trusted library",
                                        out.subject))
        else:
            out.items.append(Diagnostic(Severity.WARNING, rule_id, message, finding.path,
                                        finding.line, 1, None, out.subject))


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
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = (key, *[p for p in exc.absolute_path if isinstance(p, str | int)])
        out.error("schema-invalid", f"'{key}' is not a valid JSON Schema: {exc.message}", at=where)
        return None
    props = schema.get("properties")
    for name, prop in (props.items() if isinstance(props, dict) else ()):
        if isinstance(prop, dict) and "default" in prop:
            problems = list(Draft202012Validator(prop).iter_errors(prop["default"]))
            if problems:
                out.error("default-type", f"{key}.{name}: default {prop['default']!r} does not "
                          f"fit its schema: {problems[0].message}",
                          at=(key, "properties", str(name), "default"))
    return schema


def _entrypoint(data: Mapping[str, Any], folder: Path, out: _Collector) -> Entrypoint | None:
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
                                or timeout <= 0):
        out.error("entrypoint-invalid", "'entrypoint.timeout' must be a positive number of seconds",
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
        script = (folder / match["file"]).resolve()
        if not _is_within(script, folder.resolve()):
            out.error("path-escapes-root",
                      f"python entrypoint '{match['file']}' is outside the skill folder",
                      at=("entrypoint", "python"))
            return None
        if not script.is_file():
            out.error("entrypoint-invalid", f"python entrypoint file '{match['file']}' not found",
                      at=("entrypoint", "python"))
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


def _skill_id(folder: Path, options: LoadOptions) -> str:
    sidecar = folder / ID_SIDECAR
    try:
        existing = sidecar.read_text(encoding="utf-8").strip()
        if _ID_PATTERN.match(existing):
            return existing
    except OSError:
        pass
    if options.write_ids:
        new_id = "sk-" + secrets.token_hex(10)
        try:
            sidecar.write_text(new_id + "\n", encoding="utf-8")
            return new_id
        except OSError:
            pass
    # Read-only library and no sidecar: an id derived from the location, stable while it stays.
    return "sk-" + content_hash(str(folder.resolve()).encode())[:20]


def find_skill_files(root: Path, out: list[Diagnostic]) -> list[Path]:
    """Every SKILL.md under ``root``, nested folders included, without following links."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        current = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            if d in _SKIP_DIRS:
                continue
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
    """Load every skill under ``roots``, earlier roots taking precedence for a name."""
    loads: list[SkillLoad] = []
    diagnostics: list[Diagnostic] = []
    for root in roots:
        walk_diags: list[Diagnostic] = []
        for skill_file in find_skill_files(root, walk_diags):
            loads.append(load_skill(skill_file, root, options))
        loads.extend(SkillLoad(d.path, None, (d,)) for d in walk_diags if d.path is not None)

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
            derived = "sk-" + content_hash(str(skill.folder.resolve()).encode())[:20]
            diagnostics.append(Diagnostic(
                Severity.WARNING, "duplicate-id",
                f"'{ID_SIDECAR}' repeats the id of {other.folder}; using {derived} here",
                skill.folder / ID_SIDECAR, 1, 1,
                f"delete {skill.folder / ID_SIDECAR} so a fresh id is made", skill.name))
            skill = _replace_id(skill, derived)
        seen_ids[skill.id] = skill
        skills.append(skill)
        winner = active.get(skill.name)
        if winner is None:
            active[skill.name] = skill
            continue
        shadowed.append(Shadowing(skill, winner))
        same_root = winner.root == skill.root
        rule = "duplicate-name" if same_root else "shadowed"
        message = (f"skill '{skill.name}' is also defined at {winner.skill_file}; that one is used"
                   if same_root else
                   f"skill '{skill.name}' is shadowed by {winner.skill_file} from an earlier root")
        diagnostics.append(Diagnostic(Severity.WARNING, rule, message, skill.skill_file,
                                      None, None, "rename one of them if both are needed",
                                      skill.name))
    return SkillCatalog(tuple(roots), tuple(loads), tuple(skills), active, tuple(shadowed),
                        tuple(diagnostics))


def _replace_id(skill: Skill, new_id: str) -> Skill:
    return replace(skill, id=new_id)
