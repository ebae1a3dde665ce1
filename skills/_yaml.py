"""YAML with positions: every value and mapping key remembers where it stood in the file.

Parsing is always PyYAML's safe loader; positions come from the composed node tree, so a
diagnostic can point at ``steps[1].needs`` by line and column. Duplicate mapping keys, which
PyYAML silently lets the last one win, are reported.

Any text comes back as a value or as a :class:`YamlSyntaxError` with a position, never as another
exception. Before anything is built, one pass over the parser's events measures the document:
how deep it nests and how many values it holds once every alias (``*name``) is counted as a full
copy of what it names. A document over :data:`~skills.limits.YAML_MAX_DEPTH` or
:data:`~skills.limits.YAML_MAX_NODES` raises :class:`YamlLimitError` at the place it crossed the
line, so a few hundred bytes of nested aliases cost microseconds, not gigabytes. Scalars the safe
constructor cannot read (``2024-02-30``, ``!!float abc``, an integer of 5,000 digits) are errors
at their own position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from skillgrove.skills.limits import YAML_MAX_DEPTH, YAML_MAX_NODES, YAML_MAX_NUMBER_CHARS

PathKey = tuple[str | int, ...]
Position = tuple[int, int]


@dataclass
class YamlSyntaxError(Exception):
    """The text is not YAML we can read: bad syntax, or a value its tag cannot hold.

    (Not frozen: Python sets ``__traceback__`` on an exception as it travels.)"""

    message: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.message}"


@dataclass
class YamlLimitError(YamlSyntaxError):
    """The text is YAML, but larger or deeper than :mod:`skills.limits` allows."""

    limit: str = ""
    """The name of the constant in :mod:`skills.limits` that was exceeded."""


@dataclass(frozen=True)
class SourceMap:
    """Where each value (and each mapping key) of a parsed document starts, 1-based."""

    values: Mapping[PathKey, Position] = field(default_factory=dict)
    keys: Mapping[PathKey, Position] = field(default_factory=dict)

    def value_at(self, path: PathKey) -> Position:
        """The position of the value at ``path``, or of its nearest ancestor that has one."""
        return self._lookup(self.values, path)

    def key_at(self, path: PathKey) -> Position:
        """The position of the mapping key that introduces ``path`` (falls back to its value)."""
        if path in self.keys:
            return self.keys[path]
        return self.value_at(path)

    @staticmethod
    def _lookup(table: Mapping[PathKey, Position], path: PathKey) -> Position:
        probe = path
        while probe:
            if probe in table:
                return table[probe]
            probe = probe[:-1]
        return table.get((), (1, 1))


@dataclass(frozen=True)
class Located:
    value: Any
    source: SourceMap
    duplicate_keys: tuple[tuple[PathKey, Position], ...]


# libyaml's parser when present: the same safe constructor, several times faster.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq",
                              "tag:yaml.org,2002:set", "tag:yaml.org,2002:omap",
                              "tag:yaml.org,2002:pairs"})
"""Tags a list or mapping may carry; it is read as a plain list or mapping either way."""
_NUMBER_TAGS = {"tag:yaml.org,2002:int": "an integer", "tag:yaml.org,2002:float": "a number"}
_TAG_NAMES = {**_NUMBER_TAGS, "tag:yaml.org,2002:timestamp": "a date",
              "tag:yaml.org,2002:bool": "a boolean", "tag:yaml.org,2002:binary": "binary data"}


def _pos(mark: Any, line_offset: int) -> Position:
    if mark is None:
        return (1 + line_offset, 1)
    return (mark.line + 1 + line_offset, mark.column + 1)


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def measure(text: str, *, line_offset: int = 0) -> int:
    """The number of values in ``text`` with aliases expanded; raises :class:`YamlLimitError`
    where the document first nests deeper than ``YAML_MAX_DEPTH`` or grows past
    ``YAML_MAX_NODES`` (and :class:`yaml.YAMLError` for bad syntax)."""
    parser = _Loader(text)
    total = 0
    open_frames: list[tuple[str | None, int, int]] = []  # (anchor, total at start, height so far)
    done: dict[str, tuple[int, int]] = {}  # anchor -> (values, height) once its node is complete
    opened: set[str] = set()
    try:
        while True:
            event = parser.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return total
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_frames) >= YAML_MAX_DEPTH:
                    raise _limit(f"lists and mappings nest more than {YAML_MAX_DEPTH} levels deep",
                                 "YAML_MAX_DEPTH", event.start_mark, line_offset)
                total += 1
                if event.anchor is not None:
                    opened.add(event.anchor)
                open_frames.append((event.anchor, total, 1))
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, start, height = open_frames.pop()
                if anchor is not None:
                    done[anchor] = (total - start + 1, height)
                    opened.discard(anchor)
                _raise_height(open_frames, height)
            elif isinstance(event, yaml.ScalarEvent):
                total += 1
                if event.anchor is not None:
                    done[event.anchor] = (1, 0)
            elif isinstance(event, yaml.AliasEvent):
                name = event.anchor or ""
                if name in opened:
                    raise YamlSyntaxError(f"alias *{name} refers to a value that contains it",
                                          *_pos(event.start_mark, line_offset))
                values, height = done.get(name, (1, 0))
                if len(open_frames) + height > YAML_MAX_DEPTH:
                    raise _limit(f"alias *{name} makes lists and mappings nest more than "
                                 f"{YAML_MAX_DEPTH} levels deep", "YAML_MAX_DEPTH",
                                 event.start_mark, line_offset)
                total += values
                _raise_height(open_frames, height)
            else:
                continue
            if total > YAML_MAX_NODES:
                raise _limit(f"the document holds more than {YAML_MAX_NODES:,} values (every use "
                             "of an alias counts as a copy of what it names)", "YAML_MAX_NODES",
                             event.start_mark, line_offset)
    finally:
        parser.dispose()


def _raise_height(frames: list[tuple[str | None, int, int]], child_height: int) -> None:
    if frames:
        anchor, start, height = frames[-1]
        if child_height + 1 > height:
            frames[-1] = (anchor, start, child_height + 1)


def _limit(message: str, limit: str, mark: Any, line_offset: int) -> YamlLimitError:
    return YamlLimitError(f"{message} (limit {limit})", *_pos(mark, line_offset), limit=limit)


def load_located(text: str, *, line_offset: int = 0) -> Located:
    """Parse one YAML document safely, recording positions.

    ``line_offset`` shifts reported lines, for YAML that starts below line 1 of its file
    (SKILL.md frontmatter starts on line 2). Raises :class:`YamlSyntaxError` (or its
    :class:`YamlLimitError`) and nothing else, whatever the text.
    """
    try:
        measure(text, line_offset=line_offset)
        return _build(text, line_offset)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = _pos(mark, line_offset) if mark is not None else (1 + line_offset, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.problem == "second occurrence" and exc.context and exc.context_mark:
            first = _pos(exc.context_mark, line_offset)[0]
            problem = f"{exc.context.split(';')[0]} (first given on line {first})"
        if problem == "exceeded maximum nesting depth":  # libyaml's own limit, met first
            raise YamlLimitError(f"lists and mappings nest more than {YAML_MAX_DEPTH} levels "
                                 "deep (limit YAML_MAX_DEPTH)", line, column,
                                 limit="YAML_MAX_DEPTH") from exc
        raise YamlSyntaxError(problem, line, column) from exc
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        line = before.count("\n") + 1 + line_offset
        column = exc.position - (before.rfind("\n") + 1) + 1
        raise YamlSyntaxError(f"unacceptable character #x{exc.character:04x}: {exc.reason}",
                              line, column) from exc
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML raises the two above in practice
        raise YamlSyntaxError(str(exc), 1 + line_offset, 1) from exc
    except UnicodeError as exc:
        raise YamlSyntaxError(f"the text is not valid Unicode: {exc}",
                              1 + line_offset, 1) from exc


def _build(text: str, line_offset: int) -> Located:
    loader = _Loader(text)
    values: dict[PathKey, Position] = {}
    keys: dict[PathKey, Position] = {}
    duplicates: list[tuple[PathKey, Position]] = []
    unrecorded: dict[PathKey, Position] = {}

    def scalar(n: yaml.Node) -> Any:
        if n.tag in _NUMBER_TAGS and len(n.value) > YAML_MAX_NUMBER_CHARS:
            raise _limit(f"{_NUMBER_TAGS[n.tag]} written with {len(n.value):,} characters",
                         "YAML_MAX_NUMBER_CHARS", n.start_mark, line_offset)
        try:
            return loader.construct_object(n, deep=True)
        except (ValueError, TypeError, OverflowError, ArithmeticError, LookupError,
                AttributeError) as exc:  # the safe constructor's own slips (`!!timestamp x`)
            what = _TAG_NAMES.get(n.tag, n.tag)
            detail = f": {exc}" if type(exc) in (ValueError, OverflowError) else ""
            raise YamlSyntaxError(f"cannot read {_short(str(n.value))!r} as {what}{detail}",
                                  *_pos(n.start_mark, line_offset)) from exc

    def build(n: yaml.Node | None, path: PathKey,
              positions: dict[PathKey, Position]) -> Any:
        if n is None:
            return None
        positions[path] = _pos(n.start_mark, line_offset)
        if isinstance(n, yaml.CollectionNode) and n.tag not in _COLLECTION_TAGS:
            raise YamlSyntaxError(f"unknown tag {_short(n.tag, 80)!r}; only plain YAML values are read",
                                  *_pos(n.start_mark, line_offset))
        if isinstance(n, yaml.MappingNode):
            loader.flatten_mapping(n)
            out: dict[Any, Any] = {}
            for key_node, value_node in n.value:
                if isinstance(key_node, yaml.ScalarNode):
                    key = scalar(key_node)
                else:
                    key = build(key_node, (), unrecorded)
                if not isinstance(key, str | int | float | bool) and key is not None:
                    key = str(key)
                child: PathKey = (*path, key if isinstance(key, str | int) else str(key))
                if key in out:
                    duplicates.append((child, _pos(key_node.start_mark, line_offset)))
                if positions is values:
                    keys[child] = _pos(key_node.start_mark, line_offset)
                out[key] = build(value_node, child, positions)
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(item, (*path, i), positions) for i, item in enumerate(n.value)]
        return scalar(n)

    try:
        node = loader.get_single_node()
        value = build(node, (), values)
    finally:
        loader.dispose()
    return Located(value, SourceMap(values, keys), tuple(duplicates))


def format_path(path: PathKey) -> str:
    """``('steps', 1, 'needs')`` -> ``steps[1].needs``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<document>"
