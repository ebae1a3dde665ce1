"""Stage 4, suggestions ("usually used with ..."): companions of what the answer selects.

Rule: a skill is suggested by how it goes with the first three selected skills: used with one
in past runs (CO_USED, by its count), running before or after one (FLOWS_TO), sharing a group
with one (CONTAINS), or named by the library itself (a skill's text naming another, declared
prerequisites, contracts, the same package); SIMILAR_TO joins substitutes, not companions, so it
is not followed. Companions that go with the selection equally are ordered by how close each is
to the request. Each suggestion says where it came from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from skillgrove.graph.embeddings import Vectors
from skillgrove.graph.model import Edge, EdgeKind, GroupNode, NodeKind, NodeRecord, SkillNode
from skillgrove.graph.toolbox import Suggestion


@dataclass(frozen=True)
class SuggestionSettings:
    count: int = 5
    """At most this many suggestions."""


class Reads(Protocol):
    """The store as one search reads it (``graph.retrieval._Reads``)."""

    def fetch(self, nodes: Iterable[str] = (), vectors: Iterable[str] = (),
              neighbors: Iterable[str] = ()) -> None: ...

    def node(self, node_id: str) -> NodeRecord | None: ...

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]: ...

    def vector(self, node_id: str) -> Vectors | None: ...


LIBRARY_WEIGHT = 0.25
"""What a companion the library names counts: less than a group or a run, which were seen."""
GROUP_WEIGHT = 0.5
"""What sharing a group with a selected skill counts."""


@dataclass(frozen=True)
class Gathered:
    """What goes with a selection, before it is ordered: each companion's weight, name and
    reasons (kept as parts, worded only for the suggestions that are shown)."""

    weights: dict[str, float]
    names: dict[str, str]
    reasons: dict[str, list[tuple[str, str, str]]]


def suggest(reads: Reads, anchors: Sequence[str], exclude: set[str],
            settings: SuggestionSettings, request: Vectors | None = None) -> list[Suggestion]:
    """The companions of ``anchors`` (the first three count), leaving out ``exclude``, in
    :func:`ranked` order."""
    return ranked(reads, gather(reads, anchors, exclude), settings, request)


def ranked(reads: Reads, found: Gathered, settings: SuggestionSettings,
           request: Vectors | None = None) -> list[Suggestion]:
    """The heaviest companions first. Among companions of equal weight, each selected skill's
    closest to ``request`` (its vector) first, then each one's second closest, and so on, then
    by name: a library names a skill's companions in no order of its own (a package of a dozen
    skills listed by name would suggest ``algorithmic-art`` first for a web app), and one
    selected skill that names many must not hide the one companion another names."""
    weights, names, reasons = found.weights, found.names, found.reasons
    closeness = _closeness(reads, request, weights) if request is not None else {}
    turn: dict[str, int] = {}
    taken: Counter[tuple[float, str]] = Counter()
    for sid in sorted(weights, key=lambda c: (-closeness.get(c, 0.0), names[c])):
        anchor = (round(weights[sid], 6), reasons[sid][0][2])
        turn[sid] = taken[anchor]
        taken[anchor] += 1
    order = sorted(weights.items(), key=lambda kv: (
        -kv[1], turn[kv[0]], -closeness.get(kv[0], 0.0), names[kv[0]]))
    return [Suggestion(sid, names[sid], round(w, 3),
                       "; ".join(list(dict.fromkeys(worded(r) for r in reasons[sid]))[:3]))
            for sid, w in order[: settings.count]]


def gather(reads: Reads, anchors: Sequence[str], exclude: set[str]) -> Gathered:
    """The companions of ``anchors`` (the first three count), leaving out ``exclude``."""
    weights: dict[str, float] = {}
    reasons: dict[str, list[tuple[str, str, str]]] = {}
    names: dict[str, str] = {}
    reads.fetch(nodes=anchors[:3], neighbors=anchors[:3])
    reads.fetch(nodes=[str(m) for anchor in anchors[:3] for _, other in reads.neighbors(anchor)
                       if other.kind is NodeKind.GROUP for m in GroupNode(other).members])
    for anchor in anchors[:3]:
        anchor_record = reads.node(anchor)
        anchor_name = anchor_record.name if anchor_record else anchor
        # Companions read from the library itself (its texts, contracts, declarations and
        # folders): weaker than runs or groups, but a library without either has only these.
        for companion in SkillNode(anchor_record).companions if anchor_record else ():
            cid = str(companion.get("id", ""))
            if not cid or cid in exclude or cid == anchor:
                continue
            names[cid] = str(companion.get("name", cid))
            weights[cid] = weights.get(cid, 0.0) + LIBRARY_WEIGHT
            reasons.setdefault(cid, []).append(
                ("library", str(companion.get("reason", "")), anchor_name))
        for edge, other in reads.neighbors(anchor):
            if other.kind is NodeKind.GROUP:
                for member in GroupNode(other).members:
                    if member == anchor or member in exclude:
                        continue
                    if member not in names:
                        record = reads.node(member)
                        if record is None:
                            continue
                        names[member] = record.name
                    weights[member] = weights.get(member, 0.0) + GROUP_WEIGHT
                    reasons.setdefault(member, []).append(("group", other.name, anchor_name))
                continue
            if other.id in exclude or other.name == anchor_name:
                continue  # a same-named copy is an alternative, not a companion
            names[other.id] = other.name
            if edge.kind is EdgeKind.CO_USED:
                bump, why = 1.0 + edge.weight, ("co_used", f"{edge.weight:g}", anchor_name)
            elif edge.kind is EdgeKind.FLOWS_TO:
                arrow = "after" if edge.dst == other.id else "before"
                bump, why = 1.0, ("flows", arrow, anchor_name)
            else:
                continue  # SIMILAR_TO joins substitutes, not skills used together
            weights[other.id] = weights.get(other.id, 0.0) + bump
            reasons.setdefault(other.id, []).append(why)
    return Gathered(weights, names, reasons)


def _closeness(reads: Reads, request: Vectors, weights: dict[str, float]) -> dict[str, float]:
    """The cosine to the request of each companion that ties with another on weight."""
    tied = Counter(round(w, 6) for w in weights.values())
    wanted = [sid for sid, w in weights.items() if tied[round(w, 6)] > 1]
    reads.fetch(vectors=wanted)
    out = {}
    for sid in wanted:
        vector = reads.vector(sid)
        if vector is not None:
            out[sid] = float(np.dot(vector, request))
    return out


def worded(parts: tuple[str, str, str]) -> str:
    """A suggestion's reason as a user reads it."""
    kind, detail, anchor = parts
    if kind == "group":
        return f"in group '{detail}' with {anchor}"
    if kind == "co_used":
        return f"used with {anchor} {detail}x"
    if kind == "flows":
        return f"runs {detail} {anchor} in a group"
    if kind == "library":
        return f"{anchor}: {detail}"
    raise ValueError(f"no wording for a {kind} reason")
