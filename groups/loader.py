"""Reading one group YAML file into a :class:`Group`, reporting every structural problem at once.

What can be checked from the file alone is checked here (fields, types, step ids, ``needs``,
cycles, expressions and what they refer to inside the group). What needs the rest of the library
(skills exist, parameters and outputs match their schemas) is in :mod:`groups.validate`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillgrove.groups.expressions import (
    FUNCTION_NAMES,
    FUNCTIONS,
    ROOTS,
    STATUS_FUNCTIONS,
    Node,
    Template,
    calls,
    has_expression,
    parse_expression,
    parse_template,
    references,
)
from skillgrove.groups.model import INPUT_TYPES, RETRY_KINDS, Group, InputSpec, RetryPolicy, Step
from skillgrove.skills import limits
from skillgrove.skills._yaml import (
    PathKey,
    SourceMap,
    YamlLimitError,
    YamlSyntaxError,
    format_path,
    load_located,
)
from skillgrove.skills.diagnostics import Diagnostic, Severity, closest, did_you_mean
from skillgrove.skills.errors import ExpressionSyntaxError
from skillgrove.skills.loader import UnreadableFile, read_regular_file
from skillgrove.skills.model import content_hash

GROUP_FIELDS = ("id", "name", "description", "examples", "inputs", "steps", "outputs", "tags",
                "version", "expose")
EXPOSE_VALUES = ("tool",)
STEP_FIELDS = ("id", "name", "skill", "group", "with", "needs", "if", "retry", "timeout",
               "continue_on_error")
INPUT_FIELDS = ("type", "required", "default", "description", "enum")
RETRY_FIELDS = ("max_attempts", "initial_interval", "backoff_factor", "max_interval", "jitter",
                "retry_on")
_ALIASES = {
    "depends_on": "needs", "depends-on": "needs", "dependsOn": "needs", "after": "needs",
    "uses": "skill", "call": "skill", "when": "if", "condition": "if", "params": "with",
    "parameters": "with", "args": "with", "inputs": "with", "continue-on-error": "continue_on_error",
    "timeout-minutes": "timeout", "retries": "retry",
}
GROUP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_PYTHON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
                 "array": (list,), "object": (dict,)}


@dataclass(frozen=True)
class GroupLoad:
    path: Path
    group: Group | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return self.group is not None and not any(d.is_error for d in self.diagnostics)


class GroupReporter:
    """Collects diagnostics for one group file, turning YAML paths into line and column."""

    def __init__(self, path: Path, text: str, source: SourceMap | None = None) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.source = source or SourceMap()
        self.items: list[Diagnostic] = []
        self.subject: str | None = None
        self._hint_work = 0

    def suggest(self, word: str, candidates: Iterable[str]) -> str | None:
        """``did you mean 'x'?`` for ``word``, while this file's budget of comparisons lasts
        (``HINT_MAX_COMPARISONS``): each hint compares ``word`` with every candidate, and a group
        of a thousand steps that misnames each one should not take minutes to report."""
        match = self.closest(word, candidates)
        return f"did you mean '{match}'?" if match else None

    def closest(self, word: str, candidates: Iterable[str]) -> str | None:
        """The candidate ``word`` likely misspells, within the budget of :meth:`suggest`."""
        pool = list(candidates)
        self._hint_work += len(pool)
        if self._hint_work > limits.HINT_MAX_COMPARISONS:
            return None
        return closest(word, pool)

    def make(self, severity: Severity, rule: str, where: PathKey, message: str,
             hint: str | None = None, *, key: bool = False, offset: int | None = None,
             subject: str | None = None) -> Diagnostic:
        """The diagnostic :meth:`add` would report, without reporting it."""
        line, column = self.source.key_at(where) if key else self.source.value_at(where)
        if offset is not None:
            column = self._column_in_scalar(line, column, offset)
        text = f"{format_path(where)}: {message}" if where else message
        return Diagnostic(severity, rule, text, self.path, line, column, hint,
                          subject or self.subject)

    def add(self, severity: Severity, rule: str, where: PathKey, message: str,
            hint: str | None = None, *, key: bool = False, offset: int | None = None,
            subject: str | None = None) -> None:
        self.items.append(self.make(severity, rule, where, message, hint, key=key,
                                    offset=offset, subject=subject))

    def error(self, rule: str, where: PathKey, message: str, hint: str | None = None,
              **kw: Any) -> None:
        self.add(Severity.ERROR, rule, where, message, hint, **kw)

    def warn(self, rule: str, where: PathKey, message: str, hint: str | None = None,
             **kw: Any) -> None:
        self.add(Severity.WARNING, rule, where, message, hint, **kw)

    def _column_in_scalar(self, line: int, column: int, offset: int) -> int:
        """Column of character ``offset`` of a one-line scalar starting at ``column``."""
        if not 0 < line <= len(self.lines):
            return column
        first = self.lines[line - 1][column - 1 : column]
        if first in ("|", ">"):
            return column
        return column + offset + (1 if first in ("'", '"') else 0)

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.items)


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def parse_duration(value: Any) -> float | None:
    """Seconds from ``30``, ``2.5``, ``"30s"``, ``"500ms"``, ``"2m"`` or ``"1h"``; None if bad.

    A duration is finite, above zero and at most ``DURATION_MAX_SECONDS`` (a day).

    >>> parse_duration("2m"), parse_duration(".inf"), parse_duration(float("inf"))
    (120.0, None, None)
    """
    seconds = _seconds(value)
    if seconds is None or not (math.isfinite(seconds)
                               and 0 < seconds <= limits.DURATION_MAX_SECONDS):
        return None
    return seconds


def _seconds(value: Any) -> float | None:
    """What a duration says in seconds, before any bound (maybe zero, negative or infinite)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= 10**300 else (math.inf if value > 0 else -math.inf)
    if isinstance(value, float):
        return value
    if isinstance(value, str) and len(value) <= 64:
        match = _DURATION.match(value)
        if match:
            scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
            return float(match.group(1)) * scale
    return None


def _duration_problem(value: Any) -> str:
    """Why ``value`` is not a duration, for a message."""
    if _seconds(value) is None:
        return "is not a positive duration"
    return "is not a duration above 0 and at most a day (limit DURATION_MAX_SECONDS)"


def _short(value: Any, width: int = 40) -> str:
    text = repr(value) if isinstance(value, str | int | float | bool) or value is None \
        else f"<{type(value).__name__}>"
    return text if len(text) <= width else text[: width - 3] + "..."


def matches_type(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _PYTHON_TYPES.get(type_name, (object,)))


def load_group_file(path: Path) -> GroupLoad:
    """Parse and check one group file. Never raises for a user mistake.

    Only a regular file of at most ``GROUP_FILE_MAX_BYTES`` is read: a named pipe or a device
    with a group file's name is reported without being opened."""
    report = GroupReporter(path, "")
    try:
        raw = read_regular_file(path, limits.GROUP_FILE_MAX_BYTES)
    except UnreadableFile as exc:
        report.error(exc.rule, (), exc.message + (" (limit GROUP_FILE_MAX_BYTES)"
                                                  if exc.rule == "file-too-large" else ""),
                     exc.hint or ("split it into several groups" if exc.rule == "file-too-large"
                                  else None))
        return GroupLoad(path, None, tuple(report.items))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        report.items.append(Diagnostic(Severity.ERROR, "not-utf8", "the group file is not valid "
                                       "UTF-8", path, line, None, "save the file as UTF-8"))
        return GroupLoad(path, None, tuple(report.items))
    return load_group_text(text, path, content_hash(raw))


def load_group_text(text: str, path: Path, digest: str | None = None) -> GroupLoad:
    report = GroupReporter(path, text)
    try:
        located = load_located(text)
    except YamlLimitError as exc:
        report.items.append(Diagnostic(Severity.ERROR, "limit-exceeded",
                                       f"too large to read: {exc.message}", path, exc.line,
                                       exc.column, "a group file holds steps and short values; "
                                       "keep data in files the steps read"))
        return GroupLoad(path, None, tuple(report.items))
    except YamlSyntaxError as exc:
        column, message, hint = explain_yaml_error(text, exc.line, exc.column, exc.message)
        report.items.append(Diagnostic(Severity.ERROR, "yaml-syntax",
                                       f"not valid YAML: {message}", path, exc.line,
                                       column, hint))
        return GroupLoad(path, None, tuple(report.items))
    report.source = located.source
    data = located.value
    for dup, (line, column) in located.duplicate_keys:
        report.items.append(Diagnostic(Severity.ERROR, "duplicate-key",
                                       f"{format_path(dup)}: given twice", path, line, column,
                                       "remove one of them"))
    if not isinstance(data, dict):
        report.error("not-a-mapping", (), "a group file must be a mapping with id, description "
                     "and steps")
        return GroupLoad(path, None, tuple(report.items))
    group = _GroupParser(data, report).parse(path, digest or content_hash(text.encode()))
    return GroupLoad(path, group, tuple(report.items))


_KEY_LINE = re.compile(r"^( *)(?:- +)?([^\s#'\"{\[][^:#]*?)\s*:(?:\s|$)")


def explain_yaml_error(text: str, line: int, column: int, message: str
                       ) -> tuple[int, str, str | None]:
    """(column, message, hint) for a YAML syntax error, in the words of the usual mistake:
    a tab, an unquoted ``${{ }}`` inside ``{ }``, a list item or a key out of line, an unquoted
    ``': '`` in a value. The parser's own words stay when none of these fits.

    >>> explain_yaml_error("a:\\n\\tb: 1\\n", 2, 1, "found a tab character ...")
    (1, 'a tab in the indentation', 'replace the tab with spaces: YAML indents with spaces only')
    """
    lines = text.splitlines()
    here = lines[line - 1] if 0 < line <= len(lines) else ""
    indent = len(here) - len(here.lstrip(" \t"))
    if "\t" in here[:indent] or here[column - 1 : column] == "\t":
        tab = here.index("\t") + 1 if "\t" in here[: max(indent, column)] else column
        return tab, "a tab in the indentation", ("replace the tab with spaces: YAML indents "
                                                 "with spaces only")
    if message.startswith("did not find expected ','") and "${{" in here:
        expression = re.search(r"\$\{\{.*?\}\}", here)
        shown = expression.group(0) if expression else "${{ ... }}"
        return column, message, (f"an unquoted '${{{{' inside '{{ }}' or '[ ]' starts a "
                                 f"nested mapping: quote the expression ('{shown}') or write "
                                 "one key per line")
    misplaced = message.startswith(("did not find expected", "mapping values are not allowed"))
    stripped = here.lstrip(" ")
    if misplaced and (stripped == "-" or stripped.startswith("- ")):
        above = _column_above(lines[: line - 1], indent + 1, dash=True)
        if above is not None and above[0] != indent + 1:
            return indent + 1, (f"this list item ('-' in column {indent + 1}) is not in line "
                                "with the items above it"), (
                f"put its '-' in column {above[0]}, under the '-' of line {above[1]}")
    key = _KEY_LINE.match(here)
    if misplaced and key is not None:
        name, start = key.group(2), here.index(key.group(2)) + 1
        colon = here.index(":", start - 1) + 1
        if message.startswith("mapping values") and column > colon:
            return column, message, "quote the whole value: an unquoted ': ' starts a new mapping"
        above = _column_above(lines[: line - 1], start, dash=False)
        if above is not None and above[0] != start:
            return start, (f"'{name}:' in column {start} is not in line with the keys above "
                           "it"), (f"keys of one mapping start in the same column: move it to "
                                   f"column {above[0]}, under '{above[2]}:' on line {above[1]}")
    if message.startswith("mapping values are not allowed"):
        return column, message, "quote the whole value: an unquoted ': ' starts a new mapping"
    return column, message, None


def _column_above(lines: Sequence[str], column: int, *, dash: bool
                  ) -> tuple[int, int, str] | None:
    """The column nearest ``column`` where a key (or a list's ``-``) starts on the lines above,
    among the enclosing ones: (column, line number, key). Deeper wins a tie."""
    best: tuple[int, int, str] | None = None
    limit = 10**9  # only lines less indented than every line below them enclose the error
    for number in range(len(lines), 0, -1):
        text = lines[number - 1]
        stripped = text.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(stripped)
        if indent >= limit:
            continue
        limit = indent + 1
        if dash:
            if not (stripped == "-" or stripped.startswith("- ")):
                continue
            found = (indent + 1, number, "-")
        else:
            key = _KEY_LINE.match(text)
            if key is None:
                continue
            found = (text.index(key.group(2)) + 1, number, key.group(2))
        if best is None or abs(found[0] - column) < abs(best[0] - column):
            best = found
        if indent == 0:
            break
    return best


class _GroupParser:
    def __init__(self, data: dict[str, Any], report: GroupReporter) -> None:
        self.data = data
        self.r = report
        self.misspelt_needs: dict[str, list[tuple[str, int]]] = {}
        """Step id -> (the step a misspelt 'needs' entry likely means, index of its error)."""
        self.not_upstream: list[_Unordered] = []
        self.used_inputs: set[str] = set()
        self.all_inputs_used = False

    def parse(self, path: Path, digest: str) -> Group | None:
        data, r = self.data, self.r
        self.unknown_fields(data, (), GROUP_FIELDS)
        group_id = self.required_string(data, "id", ())
        if group_id is not None:
            r.subject = group_id
            if not GROUP_ID.match(group_id):
                r.error("invalid-id", ("id",), f"group id '{group_id}' may hold only letters, "
                        "digits, '-', '_' and '.', and must start with a letter or digit")
        description = self.required_string(data, "description", ())
        name = self.optional_string(data, "name", ()) or group_id or ""
        examples = self.string_list(data, "examples", ())
        if "examples" not in data:
            r.warn("no-examples", (), "no 'examples': retrieval matches requests better with a "
                   "few sample requests this group serves", key=True)
        tags = self.string_list(data, "tags", ())
        version = data.get("version")
        expose = self.expose(data)
        inputs = self.inputs(data.get("inputs"))
        steps = self.steps(data.get("steps"))
        outputs = self.outputs(data.get("outputs"))
        if steps:
            self.check_graph(steps)
            self.check_expressions(steps, inputs, outputs)
            self.check_unused_inputs(inputs)
        if group_id is None or description is None:
            return None
        return Group(
            id=group_id, name=name, description=description.strip(), path=path,
            content_hash=digest, examples=examples, inputs=inputs, steps=steps, outputs=outputs,
            tags=tags, version=str(version) if version is not None else None, expose=expose,
            source=r.source,
        )

    def expose(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        """``expose: tool`` (or a list): where the group is offered as its own entry point."""
        raw = data.get("expose")
        if raw is None:
            return ()
        values = [raw] if isinstance(raw, str) else raw
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            self.r.error("invalid-expose", ("expose",), "expose must be 'tool' or a list of "
                         "such values", hint="write `expose: tool`")
            return ()
        for value in values:
            if value not in EXPOSE_VALUES:
                self.r.error("invalid-expose", ("expose",), f"unknown expose value '{value}'",
                             hint=did_you_mean(value, EXPOSE_VALUES)
                             or "use one of " + ", ".join(EXPOSE_VALUES))
        return tuple(v for v in values if v in EXPOSE_VALUES)

    # -- fields -----------------------------------------------------------------------------

    def unknown_fields(self, mapping: Mapping[str, Any], where: PathKey,
                       allowed: Sequence[str]) -> None:
        for key in mapping:
            if key in allowed:
                continue
            alias = _ALIASES.get(str(key))
            hint = (f"did you mean '{alias}'?" if alias in allowed else None) or did_you_mean(
                str(key), allowed)
            self.r.error("unknown-field", (*where, str(key)), f"unknown field '{key}'",
                         hint or "allowed: " + ", ".join(allowed), key=True)

    def required_string(self, data: Mapping[str, Any], key: str, where: PathKey) -> str | None:
        if key not in data or data[key] is None or data[key] == "":
            self.r.error("missing-field", where, f"'{key}' is required", key=False)
            return None
        return self.optional_string(data, key, where)

    def optional_string(self, data: Mapping[str, Any], key: str, where: PathKey) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.r.error("wrong-type", (*where, key), f"'{key}' must be a string")
            return None
        return str(value)

    def string_list(self, data: Mapping[str, Any], key: str, where: PathKey) -> tuple[str, ...]:
        value = data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.r.error("wrong-type", (*where, key), f"'{key}' must be a list of strings")
            return ()
        return tuple(value)

    def inputs(self, raw: Any) -> tuple[InputSpec, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, dict):
            self.r.error("wrong-type", ("inputs",), "'inputs' must map each input name to its "
                         "spec (type, required, default, description)")
            return ()
        specs: list[InputSpec] = []
        for name, spec in raw.items():
            where: PathKey = ("inputs", str(name))
            if isinstance(spec, str):
                spec = {"type": spec}
            elif spec is None:
                spec = {}
            if not isinstance(spec, dict):
                self.r.error("wrong-type", where, "an input spec must be a mapping or a type name")
                continue
            self.unknown_fields(spec, where, INPUT_FIELDS)
            type_name = spec.get("type", "string")
            if type_name not in INPUT_TYPES:
                self.r.error("unknown-type", (*where, "type"), f"unknown type '{type_name}'",
                             did_you_mean(str(type_name), INPUT_TYPES)
                             or "use one of " + ", ".join(INPUT_TYPES))
                type_name = "string"
            required = spec.get("required", False)
            if not isinstance(required, bool):
                self.r.error("wrong-type", (*where, "required"), "'required' must be true or false")
                required = False
            enum = spec.get("enum")
            if enum is not None and not isinstance(enum, list):
                self.r.error("wrong-type", (*where, "enum"), "'enum' must be a list of values")
                enum = None
            has_default = "default" in spec
            default = spec.get("default")
            if has_default and default is not None and not matches_type(default, type_name):
                self.r.error("default-type", (*where, "default"),
                             f"default {default!r} is not of type {type_name}",
                             f"give {_article(type_name)} {type_name} default or change the type")
            if has_default and enum is not None and default not in enum:
                self.r.error("default-type", (*where, "default"),
                             f"default {default!r} is not one of the allowed values {enum}")
            specs.append(InputSpec(str(name), type_name, required, default, has_default,
                                   str(spec.get("description") or ""),
                                   tuple(enum) if enum is not None else None))
        return tuple(specs)

    def steps(self, raw: Any) -> tuple[Step, ...]:
        if raw is None:
            self.r.error("missing-field", (), "'steps' is required: a list of steps")
            return ()
        if not isinstance(raw, list) or not raw:
            self.r.error("wrong-type", ("steps",), "'steps' must be a non-empty list of steps")
            return ()
        if len(raw) > limits.GROUP_MAX_STEPS:
            self.r.error("limit-exceeded", ("steps",),
                         f"{len(raw):,} steps; a group has at most {limits.GROUP_MAX_STEPS:,} "
                         "(limit GROUP_MAX_STEPS)", "split the work into groups that call "
                         "each other (a step may run a 'group')")
            return ()
        steps: list[Step] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(raw):
            where: PathKey = ("steps", index)
            if not isinstance(item, dict):
                self.r.error("wrong-type", where, "a step must be a mapping with id and skill")
                continue
            self.unknown_fields(item, where, STEP_FIELDS)
            step_id = self.required_string(item, "id", where)
            if step_id is None:
                continue
            if not STEP_ID.match(step_id):
                self.r.error("invalid-id", (*where, "id"), f"step id '{step_id}' must start with a "
                             "letter or '_' and hold only letters, digits, '_' and '-'")
            if step_id in seen:
                self.r.error("duplicate-step", (*where, "id"),
                             f"step id '{step_id}' is already used by steps[{seen[step_id]}]")
                continue
            seen[step_id] = index
            skill = self.optional_string(item, "skill", where)
            group = self.optional_string(item, "group", where)
            if (skill is None) == (group is None):
                self.r.error("step-target", where,
                             "a step needs exactly one of 'skill' or 'group'" if skill is None else
                             "a step calls either a 'skill' or a 'group', not both")
            with_ = item.get("with") or {}
            if not isinstance(with_, dict):
                self.r.error("wrong-type", (*where, "with"), "'with' must map parameter names to "
                             "values")
                with_ = {}
            needs = self.string_list(item, "needs", where)
            if_ = item.get("if")
            if if_ is not None and not isinstance(if_, str | bool):
                self.r.error("wrong-type", (*where, "if"), "'if' must be an expression")
                if_ = None
            continue_on_error = item.get("continue_on_error", False)
            if not isinstance(continue_on_error, bool):
                self.r.error("wrong-type", (*where, "continue_on_error"), "must be true or false")
                continue_on_error = False
            timeout = None
            if item.get("timeout") is not None:
                timeout = parse_duration(item["timeout"])
                if timeout is None:
                    self.r.error("wrong-type", (*where, "timeout"),
                                 f"timeout {_short(item['timeout'])} "
                                 + _duration_problem(item["timeout"]),
                                 "write seconds (30) or a duration ('30s', '500ms', '2m', '1h')")
            retry = self.retry(item.get("retry"), (*where, "retry"))
            steps.append(Step(
                id=step_id, skill=skill, group=group, with_=with_, needs=needs,
                if_=str(if_).lower() if isinstance(if_, bool) else if_, retry=retry,
                timeout=timeout, continue_on_error=continue_on_error, index=index,
            ))
        return tuple(steps)

    def retry(self, raw: Any, where: PathKey) -> RetryPolicy | None:
        if raw is None:
            return None
        if isinstance(raw, int) and not isinstance(raw, bool):
            if not 1 <= raw <= limits.RETRY_MAX_ATTEMPTS:
                self.r.error("wrong-type", where, "retry attempts must be from 1 to "
                             f"{limits.RETRY_MAX_ATTEMPTS} (limit RETRY_MAX_ATTEMPTS)")
                return None
            return RetryPolicy(max_attempts=raw)
        if not isinstance(raw, dict):
            self.r.error("wrong-type", where, "'retry' must be a number of attempts or a mapping "
                         "(max_attempts, initial_interval, backoff_factor, max_interval, jitter, "
                         "retry_on)")
            return None
        self.unknown_fields(raw, where, RETRY_FIELDS)
        values: dict[str, Any] = {}
        for key in ("max_attempts",):
            if key in raw:
                if not (isinstance(raw[key], int) and not isinstance(raw[key], bool)
                        and 1 <= raw[key] <= limits.RETRY_MAX_ATTEMPTS):
                    self.r.error("wrong-type", (*where, key), f"'{key}' must be an integer from 1 "
                                 f"to {limits.RETRY_MAX_ATTEMPTS} (limit RETRY_MAX_ATTEMPTS)")
                else:
                    values[key] = raw[key]
        for key in ("initial_interval", "max_interval"):
            if key in raw:
                seconds = parse_duration(raw[key])
                if seconds is None:
                    self.r.error("wrong-type", (*where, key),
                                 f"{_short(raw[key])} " + _duration_problem(raw[key]),
                                 "write seconds (0.5) or a duration ('500ms', '2m')")
                else:
                    values[key] = seconds
        if "backoff_factor" in raw:
            factor = raw["backoff_factor"]
            if isinstance(factor, bool) or not isinstance(factor, int | float) or not (
                    1 <= factor <= limits.RETRY_MAX_BACKOFF_FACTOR):
                self.r.error("wrong-type", (*where, "backoff_factor"), "'backoff_factor' must be "
                             f"a number from 1 to {limits.RETRY_MAX_BACKOFF_FACTOR:g} "
                             "(limit RETRY_MAX_BACKOFF_FACTOR)")
            else:
                values["backoff_factor"] = float(factor)
        if "jitter" in raw:
            if isinstance(raw["jitter"], bool):
                values["jitter"] = raw["jitter"]
            else:
                self.r.error("wrong-type", (*where, "jitter"), "'jitter' must be true or false")
        if "retry_on" in raw:
            kinds = raw["retry_on"]
            kinds = [kinds] if isinstance(kinds, str) else kinds
            if not isinstance(kinds, list):
                self.r.error("wrong-type", (*where, "retry_on"), "'retry_on' must be a list")
            else:
                for i, kind in enumerate(kinds):
                    if kind not in RETRY_KINDS:
                        self.r.error("unknown-value", (*where, "retry_on", i),
                                     f"unknown failure kind '{kind}'",
                                     did_you_mean(str(kind), RETRY_KINDS)
                                     or "use " + ", ".join(RETRY_KINDS))
                values["retry_on"] = tuple(k for k in kinds if k in RETRY_KINDS)
        return RetryPolicy(**values)

    def outputs(self, raw: Any) -> dict[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.r.error("wrong-type", ("outputs",), "'outputs' must map output names to "
                         "expressions such as '${{ steps.summarize.outputs.summary }}'")
            return {}
        return {str(k): v for k, v in raw.items()}

    # -- the graph --------------------------------------------------------------------------

    def check_graph(self, steps: Sequence[Step]) -> None:
        ids = [s.id for s in steps]
        known = {step_id: i for i, step_id in enumerate(ids)}
        for step in steps:
            for i, need in enumerate(step.needs):
                where: PathKey = ("steps", step.index, "needs", i)
                if "needs" in self.data["steps"][step.index] and isinstance(
                        self.data["steps"][step.index]["needs"], str):
                    where = ("steps", step.index, "needs")
                if need not in known:
                    meant = self.r.closest(need, ids)
                    if meant is not None:
                        self.misspelt_needs.setdefault(step.id, []).append(
                            (meant, len(self.r.items)))
                    self.r.error("unknown-step", where, f"unknown step '{need}'",
                                 f"did you mean '{meant}'?" if meant else None, subject=step.id)
                elif need == step.id:
                    self.r.error("cycle", where, f"step '{step.id}' needs itself",
                                 subject=step.id)
        cycle = find_cycle({s.id: [n for n in s.needs if n in known and n != s.id]
                            for s in steps})
        if cycle:
            start = min(range(len(cycle)), key=lambda i: known[cycle[i]])
            ordered = cycle[start:] + cycle[:start]
            first = next(s for s in steps if s.id == ordered[0])
            self.r.error("cycle", ("steps", first.index, "needs"),
                         "steps form a cycle: " + " -> ".join([*ordered, ordered[0]]),
                         "remove one of these 'needs' so the steps can run in order",
                         subject=first.id)

    # -- expressions ------------------------------------------------------------------------

    def check_expressions(self, steps: Sequence[Step], inputs: Sequence[InputSpec],
                          outputs: Mapping[str, Any]) -> None:
        upstream = ancestors({s.id: s.needs for s in steps})
        input_names = [i.name for i in inputs]
        step_ids = {s.id: None for s in steps}  # ordered, and a quick 'in'
        for step in steps:
            base: PathKey = ("steps", step.index)
            if step.if_ is not None:
                parsed = self.parse_condition(step.if_, (*base, "if"))
                if parsed is not None:
                    node, offset = parsed
                    self.check_node(node, (*base, "if"), offset, input_names, step_ids,
                                    upstream.get(step.id, _NO_STEPS), in_condition=True,
                                    current=step.id)
            for path, template, _ in iter_templates(step.with_, (*base, "with"), self.r):
                for part in template.expressions:
                    self.check_node(part.node, path, part.offset, input_names, step_ids,
                                    upstream.get(step.id, _NO_STEPS), current=step.id)
        for path, template, _ in iter_templates(outputs, ("outputs",), self.r):
            for part in template.expressions:
                self.check_node(part.node, path, part.offset, input_names, step_ids,
                                set(step_ids), current=None)
        self.report_not_upstream(steps, upstream)

    def report_not_upstream(self, steps: Sequence[Step], upstream: Mapping[str, StepSet]
                            ) -> None:
        """Report each step that reads one it does not run after, one error per fix.

        A misspelt 'needs' entry that meant the step read is the cause; else the earliest step
        (in run order) that reads the same step without running after it: adding it to that
        step's 'needs' puts it upstream of every step that runs later too. The errors one fix
        clears are folded under the error that names the fix."""
        if not self.not_upstream:
            return
        order = {step.id: step.index for step in steps}
        readers: dict[str, list[str]] = {}
        for found in self.not_upstream:
            holders = readers.setdefault(found.target, [])
            if found.reader not in holders:
                holders.append(found.reader)

        def runs_before(a: str, b: str) -> bool:
            return a == b or a in upstream.get(b, _NO_STEPS)

        roots: dict[tuple[str, str] | int, Diagnostic] = {}
        folded: dict[tuple[str, str] | int, list[Diagnostic]] = {}
        for found in self.not_upstream:
            cause: tuple[str, str] | int | None = None
            for step_id, misspelt in self.misspelt_needs.items():
                if runs_before(step_id, found.reader):
                    cause = next((index for meant, index in misspelt
                                  if runs_before(found.target, meant)), None)
                    if cause is not None:
                        break
            if cause is None:
                earlier = [r for r in readers[found.target] if runs_before(r, found.reader)]
                first = min((r for r in earlier if not any(
                    o != r and runs_before(o, r) for o in earlier)),
                    key=lambda r: order.get(r, 0), default=found.reader)
                cause = (first, found.target)
            hint = f"add '{found.target}' to the 'needs' of step '{found.reader}'"
            diagnostic = self.r.make(
                Severity.ERROR, "not-upstream", found.where,
                f"step '{found.reader}' uses steps.{found.target} but does not run after it",
                hint, offset=found.column)
            if cause in roots or isinstance(cause, int):
                folded.setdefault(cause, []).append(replace(diagnostic, hint=None))
            else:
                roots[cause] = diagnostic
        for cause, items in folded.items():
            if isinstance(cause, int):
                self.r.items[cause] = self.r.items[cause].folding(items)
        self.r.items.extend(root.folding(folded.get(cause, []))
                            for cause, root in roots.items())

    def check_unused_inputs(self, inputs: Sequence[InputSpec]) -> None:
        if self.all_inputs_used:
            return
        for spec in inputs:
            if spec.required and not spec.has_default and spec.name not in self.used_inputs:
                self.r.warn("unused-input", ("inputs", spec.name),
                            f"required input '{spec.name}' is not used by any step or output",
                            f"pass it to a step as '${{{{ inputs.{spec.name} }}}}', or remove "
                            "it: every caller has to give it", key=True)

    def parse_condition(self, text: str, where: PathKey) -> tuple[Node, int] | None:
        """The condition's expression and its offset in the string (``${{ }}`` is optional)."""
        try:
            if has_expression(text):
                template = parse_template(text)
                if not template.is_single_expression:
                    self.r.error("expression-syntax", where, "'if' must be one expression; text "
                                 "around '${{ }}' would always be true")
                    return None
                part = template.expressions[0]
                return part.node, part.offset
            return parse_expression(text), 0
        except ExpressionSyntaxError as exc:
            self.r.error("expression-syntax", where, f"invalid expression: {exc}",
                         offset=exc.offset)
            return None

    def check_node(self, node: Node, where: PathKey, offset: int, input_names: Sequence[str],
                   step_ids: Collection[str], upstream: Container[str], *, current: str | None,
                   in_condition: bool = False) -> None:
        for call in calls(node):
            if call.func not in FUNCTION_NAMES:
                self.r.error("unknown-function", where, f"unknown function '{call.func}'",
                             did_you_mean(call.func, FUNCTION_NAMES),
                             offset=offset + call.offset)
            elif call.func in STATUS_FUNCTIONS and not in_condition:
                self.r.error("unknown-function", where,
                             f"{call.func}() can only be used in a step's 'if'",
                             offset=offset + call.offset)
            elif call.func in FUNCTIONS:
                _, low, high, _ = FUNCTIONS[call.func]
                if not low <= len(call.args) <= high:
                    arity = str(low) if low == high else f"{low} to {high}"
                    self.r.error("wrong-arguments", where,
                                 f"{call.func}() takes {arity} arguments, not {len(call.args)}",
                                 offset=offset + call.offset)
        for ref in references(node):
            col = offset + ref.offset
            if ref.root not in ROOTS:
                self.r.error("unknown-reference", where, f"unknown name '{ref.root}'",
                             did_you_mean(ref.root, ROOTS) or "use inputs, context or steps",
                             offset=col)
            elif ref.root == "inputs":
                if not ref.path or not isinstance(ref.path[0], str):
                    self.all_inputs_used = True
                    continue
                name = str(ref.path[0])
                self.used_inputs.add(name)
                if name not in input_names:
                    self.r.error("unknown-input", where, f"input '{name}' is not declared",
                                 self.r.suggest(name, input_names)
                                 or f"declare it under 'inputs:' (inputs: {name}: ...)",
                                 offset=col)
            elif ref.root == "steps":
                self.check_step_ref(ref.path, where, col, step_ids, upstream, current)

    def check_step_ref(self, path: tuple[str | int, ...], where: PathKey, col: int,
                       step_ids: Collection[str], upstream: Container[str], current: str | None) -> None:
        if not path:
            return
        target = str(path[0])
        if target not in step_ids:
            self.r.error("unknown-step", where, f"unknown step '{target}'",
                         self.r.suggest(target, step_ids), offset=col)
            return
        if target == current:
            self.r.error("not-upstream", where, f"step '{current}' uses its own steps.{target}",
                         "a step cannot read its own outputs or status; read them in a step "
                         f"that needs '{target}'", offset=col)
        elif target not in upstream and current is not None:
            self.not_upstream.append(_Unordered(current, target, where, col))
        if len(path) >= 2 and path[1] not in ("outputs", "output", "status"):
            self.r.error("bad-reference", where,
                         f"steps.{target}.{path[1]}: a step has 'outputs' and 'status'",
                         did_you_mean(str(path[1]), ["outputs", "status"]), offset=col)


def iter_templates(value: Any, where: PathKey, report: GroupReporter,
                   ) -> list[tuple[PathKey, Template, str]]:
    """Every string holding ``${{`` inside a nested value, parsed; syntax errors are reported."""
    found: list[tuple[PathKey, Template, str]] = []
    if isinstance(value, str):
        if has_expression(value):
            try:
                found.append((where, parse_template(value), value))
            except ExpressionSyntaxError as exc:
                report.error("expression-syntax", where, f"invalid expression: {exc}",
                             offset=exc.offset)
    elif isinstance(value, dict):
        for key, item in value.items():
            found.extend(iter_templates(item, (*where, str(key)), report))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(iter_templates(item, (*where, i), report))
    return found


@dataclass(frozen=True, slots=True)
class _Unordered:
    """A step that reads ``steps.<target>`` without running after it."""

    reader: str
    target: str
    where: PathKey
    column: int


_DONE = object()
_NO_STEPS: frozenset[str] = frozenset()


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """One cycle in a ``node -> upstream nodes`` graph, in order, or None.

    Depth first without recursion, linear in nodes and edges: a chain of thousands of steps
    written in any order is fine.

    >>> find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    ['c', 'b', 'a']
    """
    state: dict[str, int] = {}  # 1 while on the current path, 2 when done
    for root in graph:
        if root in state:
            continue
        path = [root]
        pending = [iter(graph.get(root, ()))]
        state[root] = 1
        while path:
            nxt = next(pending[-1], _DONE)
            if nxt is _DONE:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(nxt) == 1:  # type: ignore[call-overload]
                return list(reversed(path[path.index(nxt):]))  # type: ignore[arg-type]
            elif nxt not in state:
                assert isinstance(nxt, str)
                state[nxt] = 1
                path.append(nxt)
                pending.append(iter(graph.get(nxt, ())))
    return None


class StepSet:
    """A set of step ids held as the bits of one integer (see :func:`ancestors`)."""

    __slots__ = ("_bits", "_index")

    def __init__(self, bits: int, index: Mapping[str, int]) -> None:
        self._bits = bits
        self._index = index

    def __contains__(self, step: object) -> bool:
        position = self._index.get(step) if isinstance(step, str) else None
        return position is not None and bool(self._bits >> position & 1)

    def __len__(self) -> int:
        return self._bits.bit_count()

    def __iter__(self) -> Iterator[str]:
        return (s for s, i in self._index.items() if self._bits >> i & 1)


def ancestors(needs: Mapping[str, Sequence[str]]) -> dict[str, StepSet]:
    """For each step, every step it transitively needs; in a cycle, every step of the cycle
    (itself included) runs "before" each of them, so a cycle is reported once, as a cycle.

    Each answer is a bit set over the steps, so a chain of n steps costs n * n / 8 bytes rather
    than n * n set entries, and the walk is iterative, so any depth is fine.

    >>> sorted(ancestors({"a": [], "b": ["a"], "c": ["b"]})["c"])
    ['a', 'b']
    >>> sorted(ancestors({"a": ["b"], "b": ["a"], "c": ["a"]})["c"])
    ['a', 'b']
    """
    index = {step: i for i, step in enumerate(needs)}
    component: dict[str, int] = {}
    masks: list[int] = []  # per component: its own steps
    upstream: list[int] = []  # per component: the steps that run before it
    # Tarjan's algorithm emits a component only after every component it needs.
    for members in _strong_components(needs):
        number = len(masks)
        mask = 0
        for member in members:
            component[member] = number
            mask |= 1 << index[member]
        before = mask if len(members) > 1 or members[0] in needs[members[0]] else 0
        for member in members:
            for need in needs[member]:
                other = component.get(need)
                if other is not None and other != number:
                    before |= upstream[other] | masks[other]
        masks.append(mask)
        upstream.append(before)
    return {step: StepSet(upstream[component[step]], index) for step in needs}


def _strong_components(graph: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """The strongly connected components of a ``node -> upstream nodes`` graph, each after
    the components it reaches (Tarjan's algorithm without recursion; unknown nodes ignored)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in order:
            continue
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(graph[root]))]
        while work:
            node, pending = work[-1]
            nxt = next(pending, _DONE)
            if nxt is _DONE:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == order[node]:
                    members: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    found.append(members)
                continue
            assert isinstance(nxt, str)
            if nxt not in graph:
                continue
            if nxt not in order:
                order[nxt] = low[nxt] = len(order)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(graph[nxt])))
            elif nxt in on_stack:
                low[node] = min(low[node], order[nxt])
    return found
