"""Records the stores hold: nodes (skills, groups) and typed edges between them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_T = TypeVar("_T")


class _computed_once(Generic[_T]):
    """A decorator: ``functools.cached_property`` without its lock (Python 3.11 takes one per first
    access, half the cost of a key): the value is computed on first access and kept in the
    instance's ``__dict__``, where later lookups find it before this descriptor."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self._compute = compute
        self._name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> _computed_once[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type) -> _T: ...

    def __get__(self, instance: object | None, owner: type) -> _T | _computed_once[_T]:
        if instance is None:
            return self
        value = instance.__dict__[self._name] = self._compute(instance)
        return value


class NodeKind(StrEnum):
    SKILL = "skill"
    GROUP = "group"
    EXAMPLE = "example"
    """A sample request a group serves (authored ``examples`` or mined from history); its data
    names the group. Matching a request against each example, not only the group text as a
    whole, is what lets paraphrases find their group."""


class EdgeKind(StrEnum):
    CONTAINS = "CONTAINS"
    """group -> skill; props: step (id), order (position in the group)."""
    FLOWS_TO = "FLOWS_TO"
    """skill -> skill: a step dependency inside a group (props: group, from_step, to_step), or
    a declared prerequisite (``depends_on``; props: declared = true, position = its place in
    the list, the first-named first)."""
    SIMILAR_TO = "SIMILAR_TO"
    """skill <-> skill and group <-> group (stored once per direction); weight: cosine."""
    CO_USED = "CO_USED"
    """skill <-> skill; weight: how often they were used together (groups, runs)."""


@dataclass(frozen=True)
class NodeRecord:
    id: str
    kind: NodeKind
    name: str
    text: str
    """What retrieval matches against (see :mod:`graph.documents`)."""
    content_hash: str
    """Changes whenever anything stored for the node changes; drives incremental sync."""
    data: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Description, tags, availability, members, inputs... (JSON-able)."""

    @_computed_once
    def digest(self) -> int:
        """A 128-bit hash of the id and content hash, the node's part of the index generation
        (``graph.indexer.generation`` adds them up); computed once per record."""
        return _digest(f"{self.id}\0{self.content_hash}")


@dataclass(frozen=True)
class Edge:
    kind: EdgeKind
    src: str
    dst: str
    weight: float = 1.0
    props: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @_computed_once
    def key(self) -> tuple[str, str, str, str]:
        """Identity of an edge: two FLOWS_TO edges differ by their group. Computed once per
        edge (a sync and the index generation key every edge: 36k at 10k skills, most of
        them the same objects from one re-index to the next)."""
        props = self.props
        return (_EDGE_KIND_VALUES[self.kind], self.src, self.dst,
                str(props.get("group", "")) if props else "")

    @_computed_once
    def digest(self) -> int:
        """A 128-bit hash of the key and weight (what a store keeps of the edge that the
        generation names), computed once per edge."""
        kind, src, dst, group = self.key
        return _digest(f"{kind}\0{src}\0{dst}\0{group}\0{self.weight}")


_EDGE_KIND_VALUES = {kind: kind.value for kind in EdgeKind}


def _digest(line: str) -> int:
    return int.from_bytes(hashlib.blake2b(line.encode("utf-8", "surrogatepass"),
                                          digest_size=16).digest(), "little")


def vector_digest(node_id: str, vector: npt.NDArray[np.float32]) -> int:
    """A 128-bit hash of a node's id and its vector's bytes (C-contiguous float32): what a
    store holds for the node's row. Sums of them name a set of vectors whatever their order,
    and change by a row's part when one row does (``graph.indexer.similar_key``).

    >>> import numpy as np
    >>> vector_digest("a", np.ones(2, np.float32)) == vector_digest("b", np.ones(2, np.float32))
    False
    """
    hasher = hashlib.sha256(node_id.encode("utf-8", "surrogatepass") + b"\0")
    hasher.update(vector.data)
    return int.from_bytes(hasher.digest()[:16], "little")


@dataclass(frozen=True)
class SyncReport:
    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    edges_added: int = 0
    edges_removed: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.edges_added
                    or self.edges_removed)


def _strings(record: NodeRecord, key: str) -> tuple[str, ...]:
    """The strings a node's ``data`` lists under ``key`` (none when absent)."""
    return tuple(str(item) for item in record.data.get(key, ()))


def _optional(record: NodeRecord, key: str) -> str | None:
    """The string a node's ``data`` holds under ``key``; None when absent or empty."""
    value = record.data.get(key)
    return str(value) if value else None


def _mapping(record: NodeRecord, key: str) -> Mapping[str, Any] | None:
    value = record.data.get(key)
    return value if isinstance(value, Mapping) else None


class SkillNode:
    """A stored skill node read by name rather than by string key (what
    ``graph.documents.skill_record`` writes into ``data``)::

        node = SkillNode(record)
        if node.available and node.shadowed_by is None: ...
    """

    __slots__ = ("record",)

    def __init__(self, record: NodeRecord) -> None:
        self.record = record

    @property
    def description(self) -> str:
        return str(self.record.data.get("description", ""))

    @property
    def available(self) -> bool:
        return bool(self.record.data.get("available", True))

    @property
    def path(self) -> str:
        """The skill's folder ("" when not stored)."""
        return str(self.record.data.get("path", ""))

    @property
    def root(self) -> str | None:
        """The library folder it was loaded from."""
        return _optional(self.record, "root")

    @property
    def tags(self) -> tuple[str, ...]:
        return _strings(self.record, "tags")

    @property
    def effects(self) -> tuple[str, ...]:
        return _strings(self.record, "effects")

    @property
    def executable(self) -> bool:
        return bool(self.record.data.get("executable"))

    @property
    def entrypoint(self) -> str | None:
        """The kind of its runnable entry point (``python``, ``bash``...), if it has one."""
        return _optional(self.record, "entrypoint")

    @property
    def unavailable_reasons(self) -> tuple[str, ...]:
        return _strings(self.record, "unavailable_reasons")

    @property
    def shadowed_by(self) -> str | None:
        """The id of the same-named skill that answers for this one's name, if any."""
        return _optional(self.record, "shadowed_by")

    @property
    def companions(self) -> tuple[Mapping[str, Any], ...]:
        """"Usually used with" read from the library itself (``graph.companions``), as stored:
        ``id``, ``name``, ``source``, ``reason``."""
        return tuple(self.record.data.get("companions", ()))

    @property
    def outputs(self) -> tuple[str, ...]:
        return _strings(self.record, "outputs")

    @property
    def required_inputs(self) -> tuple[str, ...]:
        return _strings(self.record, "required_inputs")

    @property
    def input_schema(self) -> Mapping[str, Any] | None:
        return self.record.data.get("input_schema")

    @property
    def output_schema(self) -> Mapping[str, Any] | None:
        return self.record.data.get("output_schema")


class GroupNode:
    """A stored group node read by name rather than by string key (what
    ``graph.documents.group_record`` writes into ``data``)."""

    __slots__ = ("record",)

    def __init__(self, record: NodeRecord) -> None:
        self.record = record

    @property
    def members(self) -> tuple[str, ...]:
        """The skill ids of its skill steps, in step order."""
        return _strings(self.record, "members")

    @property
    def member_names(self) -> tuple[str, ...]:
        return _strings(self.record, "member_names")

    @property
    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple((str(a), str(b)) for a, b in self.record.data.get("edges", ()))

    @property
    def steps(self) -> tuple[Mapping[str, Any], ...]:
        """Each step as stored: ``id``, ``kind`` (``skill`` or ``group``), ``needs``..."""
        return tuple(self.record.data.get("steps", ()))

    @property
    def examples(self) -> tuple[str, ...]:
        return _strings(self.record, "examples")

    @property
    def inputs(self) -> tuple[Mapping[str, Any], ...]:
        """Its declared inputs: ``name``, ``required``, ``has_default``."""
        return tuple(self.record.data.get("inputs", ()))


def members_of(record: NodeRecord | None) -> tuple[str, ...]:
    """A group record's member skill ids; none for a missing record."""
    return GroupNode(record).members if record is not None else ()


def group_of(record: NodeRecord | None) -> str:
    """The group id an example record belongs to ("" for anything else)."""
    return str(record.data.get("group", "")) if record is not None else ""


def path_of(record: NodeRecord) -> str | None:
    """Where a skill (its folder) or a group (its YAML file) node came from, if stored."""
    return _optional(record, "path")


def demotion(record: NodeRecord) -> str | None:
    """OpenSpace's quality rule, for a skill or a group with run statistics (``stats``):
    selected at least twice and never succeeded, or mostly fell back."""
    stats = _mapping(record, "stats")
    if stats is None:
        return None
    selected = int(stats.get("selected", 0))
    succeeded = int(stats.get("succeeded", 0))
    fallbacks = int(stats.get("fallbacks", 0))
    if selected >= 2 and succeeded == 0:
        return f"selected {selected} times, never succeeded"
    if selected and fallbacks / selected > 0.5:
        return f"fell back in {fallbacks} of {selected} selections"
    return None
