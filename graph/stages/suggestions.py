"""Stage 4, suggestions ("usually used with ..."): companions of what the answer selects.

Rule: a skill is suggested by how it goes with the first three selected skills: used with one
in past runs (CO_USED, by its count), running before or after one (FLOWS_TO), sharing a group
with one (CONTAINS), or named by the library itself (a skill's text naming another, declared
prerequisites, contracts, the same package); SIMILAR_TO joins substitutes, not companions, so it
is not followed. Each suggestion says where it came from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

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


LIBRARY_WEIGHT = 0.25
"""What a companion the library names counts: less than a group or a run, which were seen."""
GROUP_WEIGHT = 0.5
"""What sharing a group with a selected skill counts."""


def suggest(reads: Reads, anchors: Sequence[str], exclude: set[str],
            settings: SuggestionSettings) -> list[Suggestion]:
    """The companions of ``anchors`` (the first three count), leaving out ``exclude``."""
    weights: dict[str, float] = {}
    # Reasons are kept as parts and worded only for the suggestions that are shown.
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
    ranked = sorted(weights.items(), key=lambda kv: (-kv[1], names[kv[0]]))
    return [Suggestion(sid, names[sid], round(w, 3),
                       "; ".join(list(dict.fromkeys(worded(r) for r in reasons[sid]))[:3]))
            for sid, w in ranked[: settings.count]]


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
