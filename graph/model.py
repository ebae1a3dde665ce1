"""Records the stores hold: nodes (skills, groups) and typed edges between them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


@dataclass(frozen=True)
class Edge:
    kind: EdgeKind
    src: str
    dst: str
    weight: float = 1.0
    props: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Identity of an edge: two FLOWS_TO edges differ by their group."""
        return (self.kind.value, self.src, self.dst, str(self.props.get("group", "")))


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
