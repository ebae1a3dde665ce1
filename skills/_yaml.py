"""YAML with positions: every value and mapping key remembers where it stood in the file.

Parsing is always PyYAML's safe loader; positions come from the composed node tree, so a
diagnostic can point at ``steps[1].needs`` by line and column. Duplicate mapping keys, which
PyYAML silently lets the last one win, are reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

PathKey = tuple[str | int, ...]
Position = tuple[int, int]


@dataclass(frozen=True, slots=True)
class YamlSyntaxError(Exception):
    message: str
    line: int
    column: int


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


def _pos(mark: yaml.Mark, line_offset: int) -> Position:
    return (mark.line + 1 + line_offset, mark.column + 1)


def load_located(text: str, *, line_offset: int = 0) -> Located:
    """Parse one YAML document safely, recording positions.

    ``line_offset`` shifts reported lines, for YAML that starts below line 1 of its file
    (SKILL.md frontmatter starts on line 2).
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        values: dict[PathKey, Position] = {}
        keys: dict[PathKey, Position] = {}
        duplicates: list[tuple[PathKey, Position]] = []

        def build(n: yaml.Node | None, path: PathKey) -> Any:
            if n is None:
                return None
            values[path] = _pos(n.start_mark, line_offset)
            if isinstance(n, yaml.MappingNode):
                loader.flatten_mapping(n)
                out: dict[Any, Any] = {}
                for key_node, value_node in n.value:
                    key = loader.construct_object(key_node, deep=True)
                    if not isinstance(key, str | int | float | bool) and key is not None:
                        key = str(key)
                    child: PathKey = (*path, key if isinstance(key, str | int) else str(key))
                    if key in out:
                        duplicates.append((child, _pos(key_node.start_mark, line_offset)))
                    keys[child] = _pos(key_node.start_mark, line_offset)
                    out[key] = build(value_node, child)
                return out
            if isinstance(n, yaml.SequenceNode):
                return [build(item, (*path, i)) for i, item in enumerate(n.value)]
            return loader.construct_object(n, deep=True)

        value = build(node, ())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = _pos(mark, line_offset) if mark is not None else (1 + line_offset, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlSyntaxError(problem, line, column) from exc
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML raises marked errors in practice
        raise YamlSyntaxError(str(exc), 1 + line_offset, 1) from exc
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
