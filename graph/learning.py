"""Learning from use: draft groups mined from run history, co-use weights, quality statistics.

A run log is a list of :class:`HistoryRow` (the product's own run records, or a history file in
the benchmark format). Rows that used the same set of skills are one recurring task; a set seen at
least ``min_support`` times becomes a **draft group**: its members in their usual call order, its
edges (declared dependencies when the rows give them, else none — an unordered set), the requests
that led to it as examples, and a description generated from its members. Drafts are written as
ordinary group YAML (``skillgrove groups suggest``) for a person to review; an approved draft is
an ordinary group.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from skillgrove.skills.errors import SkillgroveError


class HistoryError(SkillgroveError):
    """A history or benchmark file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class HistoryRow:
    id: str
    request: str
    skills: tuple[str, ...]
    """Skill ids (or names) in call order; repeats allowed."""
    edges: tuple[tuple[str, str], ...] = ()
    succeeded: bool = True


@dataclass(frozen=True)
class DraftGroup:
    id: str
    members: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    examples: tuple[str, ...]
    support: int
    description: str
    all_requests: tuple[str, ...] = field(default=(), repr=False)


def read_jsonl(path: Path, required: Mapping[str, type | tuple[type, ...]]) -> list[dict[str, Any]]:
    """Read a JSON-lines file, checking each object's required keys and their types."""
    rows: list[dict[str, Any]] = []
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read: {exc.strerror}") from exc
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HistoryError(f"{path}:{number}:{exc.colno}: not valid JSON: {exc.msg}"
                                   ) from exc
            if not isinstance(data, dict):
                raise HistoryError(f"{path}:{number}: each line must be a JSON object")
            for key, kind in required.items():
                if key not in data:
                    raise HistoryError(f"{path}:{number}: missing key '{key}'")
                if not isinstance(data[key], kind):
                    names = kind.__name__ if isinstance(kind, type) else "/".join(
                        k.__name__ for k in kind)
                    raise HistoryError(f"{path}:{number}: '{key}' must be {names}, not "
                                       f"{type(data[key]).__name__}")
            rows.append(data)
    return rows


def read_history(path: Path) -> list[HistoryRow]:
    rows = read_jsonl(path, {"id": (str, int), "request": str, "skills": list})
    out = []
    for data in rows:
        edges = data.get("edges") or []
        if not all(isinstance(e, list) and len(e) == 2 for e in edges):
            raise HistoryError(f"{path}: row {data['id']}: 'edges' must be [src, dst] pairs")
        out.append(HistoryRow(str(data["id"]), data["request"],
                              tuple(str(s) for s in data["skills"]),
                              tuple((str(a), str(b)) for a, b in edges),
                              bool(data.get("succeeded", True))))
    return out


def _call_order(rows: Sequence[HistoryRow], members: frozenset[str]) -> tuple[str, ...]:
    """Members by their average first position in the rows (ties by id)."""
    positions: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        seen: dict[str, int] = {}
        for index, skill in enumerate(row.skills):
            seen.setdefault(skill, index)
        for skill, index in seen.items():
            positions[skill].append(index)
    return tuple(sorted(members, key=lambda s: (sum(positions[s]) / len(positions[s]), s)))


def acyclic_edges(edges: Iterable[tuple[str, str]], votes: Mapping[tuple[str, str], int],
                  order: Sequence[str]) -> list[tuple[str, str]]:
    """The edges, most voted first (then in call order), each kept only if it closes no cycle
    with those kept before it.

    >>> acyclic_edges([("a", "b"), ("b", "a")], {("a", "b"): 3, ("b", "a"): 2}, ["a", "b"])
    [('a', 'b')]
    """
    position = {m: i for i, m in enumerate(order)}
    after: dict[str, set[str]] = defaultdict(set)
    kept: list[tuple[str, str]] = []

    def reaches(start: str, goal: str) -> bool:
        stack, seen = [start], {start}
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            for nxt in after[node] - seen:
                seen.add(nxt)
                stack.append(nxt)
        return False

    ranked = sorted(set(edges), key=lambda e: (-votes.get(e, 0), position.get(e[0], 0),
                                               position.get(e[1], 0), e))
    for src, dst in ranked:
        if src == dst or reaches(dst, src):
            continue
        after[src].add(dst)
        kept.append((src, dst))
    return kept


def topological_order(order: Sequence[str], edges: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``order`` changed only as much as ``edges`` (acyclic) require: each member as early as
    its call position allows once everything it needs is placed."""
    needs: dict[str, set[str]] = {m: set() for m in order}
    for src, dst in edges:
        needs[dst].add(src)
    placed: list[str] = []
    remaining = list(order)
    while remaining:
        ready = next(m for m in remaining if needs[m] <= set(placed))
        placed.append(ready)
        remaining.remove(ready)
    return tuple(placed)


def mine_groups(rows: Iterable[HistoryRow], *, min_support: int = 2, max_examples: int = 8,
                names: Mapping[str, str] | None = None,
                descriptions: Mapping[str, str] | None = None) -> list[DraftGroup]:
    """Recurring skill sets in ``rows`` as draft groups, most frequent first."""
    by_set: dict[frozenset[str], list[HistoryRow]] = defaultdict(list)
    for row in rows:
        if row.skills and row.succeeded:
            by_set[frozenset(row.skills)].append(row)
    names = names or {}
    descriptions = descriptions or {}
    drafts: list[DraftGroup] = []
    used_ids: set[str] = set()
    for members, support_rows in sorted(by_set.items(),
                                        key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
        if len(support_rows) < min_support:
            continue
        order = _call_order(support_rows, members)
        edge_votes = Counter(e for row in support_rows for e in set(row.edges)
                             if e[0] in members and e[1] in members and e[0] != e[1])
        # An edge seen in at least half of the rows that declare edges is part of the group,
        # unless it would close a cycle with edges seen more often (runs that called the same
        # skills in different orders): a draft is always a valid DAG.
        declaring = sum(1 for row in support_rows if row.edges)
        candidates = [e for e, n in edge_votes.items() if n * 2 >= declaring]
        kept = acyclic_edges(candidates, edge_votes, order)
        order = topological_order(order, kept)
        edges = tuple(sorted(kept, key=lambda e: (order.index(e[0]), order.index(e[1]))))
        requests = tuple(dict.fromkeys(r.request for r in support_rows))
        labels = [names.get(m, m) for m in order]
        group_id = _unique_id("-".join(_slug(label) for label in labels)[:60] or "group",
                              used_ids)
        described = "; ".join(f"{names.get(m, m)}: {descriptions[m]}" if m in descriptions
                              else names.get(m, m) for m in order)
        description = (f"Learned from {len(support_rows)} runs that used "
                       f"{_join(labels)} together. {described}")
        drafts.append(DraftGroup(group_id, order, edges, requests[:max_examples],
                                 len(support_rows), description, requests))
    return drafts


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _unique_id(base: str, used: set[str]) -> str:
    candidate, n = base, 2
    while candidate in used:
        candidate, n = f"{base}-{n}", n + 1
    used.add(candidate)
    return candidate


def runs_as_history(runs: Iterable[Mapping[str, Any]], ids_by_name: Mapping[str, str],
                    ) -> list[HistoryRow]:
    """Run records as history rows: the skills each run really ran (by id), in start order."""
    rows = []
    for run in runs:
        steps = [s for s in run.get("steps", ()) if s.get("kind") == "skill"
                 and s.get("status") == "success" and s.get("target") in ids_by_name]
        steps.sort(key=lambda s: s.get("started_at") or 0.0)
        rows.append(HistoryRow(str(run.get("id")), str(run.get("request") or ""),
                               tuple(ids_by_name[s["target"]] for s in steps),
                               succeeded=run.get("status") == "success"))
    return rows


def co_use_weights(rows: Iterable[HistoryRow]) -> dict[tuple[str, str], float]:
    """How often each pair of skills was used in the same run (pairs sorted)."""
    weights: Counter[tuple[str, str]] = Counter()
    for row in rows:
        for a, b in combinations(sorted(set(row.skills)), 2):
            weights[(a, b)] += 1
    return {pair: float(n) for pair, n in weights.items()}


Contract = tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]
"""A skill's declared (inputs, outputs) JSON Schemas."""

_GROUP_INPUT_TYPES = ("string", "integer", "number", "boolean", "array", "object")


def draft_to_yaml(draft: DraftGroup, names: Mapping[str, str] | None = None,
                  all_examples: bool = False,
                  contracts: Mapping[str, Contract] | None = None) -> str:
    """The draft as an ordinary group file (steps call skills by name) that validates.

    With the members' contracts (``contracts``, by member id), every required input of a step
    is bound: to the output of the same name of a step it needs, else to a group input of
    that name (declared with the skill's type), so the draft passes ``skillgrove check``."""
    names = names or {}
    contracts = contracts or {}
    step_ids = {m: _step_id(names.get(m, m), i) for i, m in enumerate(draft.members)}
    steps = []
    group_inputs: dict[str, dict[str, Any]] = {}
    for member in draft.members:
        upstream = [a for a, b in draft.edges if b == member]
        needs = [step_ids[a] for a in upstream]
        step: dict[str, Any] = {"id": step_ids[member], "skill": names.get(member, member)}
        if needs:
            step["needs"] = needs
        inputs, _ = contracts.get(member, (None, None))
        bindings: dict[str, str] = {}
        for key, spec in _required_properties(inputs):
            source = next((a for a in upstream
                           if key in _properties_of(contracts.get(a, (None, None))[1])), None)
            if source is not None:
                bindings[key] = f"${{{{ steps.{step_ids[source]}.outputs.{key} }}}}"
                continue
            declared: dict[str, Any] = {"required": True}
            kind = _input_type(spec)
            if kind:
                declared["type"] = kind
            if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
                declared["description"] = spec["description"]
            group_inputs.setdefault(key, declared)
            bindings[key] = f"${{{{ inputs.{key} }}}}"
        if bindings:
            step["with"] = bindings
        steps.append(step)
    data: dict[str, Any] = {
        "id": draft.id,
        "name": "Draft: " + _join([names.get(m, m) for m in draft.members]),
        "description": draft.description,
        "examples": list(draft.all_requests if all_examples else draft.examples),
    }
    if group_inputs:
        data["inputs"] = group_inputs
    data["steps"] = steps
    header = (f"# Draft group mined from {draft.support} runs; review it, then keep it as an "
              "ordinary group.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _properties_of(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    props = (schema or {}).get("properties")
    return props if isinstance(props, Mapping) else {}


def _required_properties(schema: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    props = _properties_of(schema)
    required = (schema or {}).get("required") or []
    return [(str(k), props.get(k)) for k in required if isinstance(k, str)]


def _input_type(spec: Any) -> str | None:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    options = kind if isinstance(kind, list) else [kind]
    return next((k for k in options if k in _GROUP_INPUT_TYPES), None)


def _step_id(name: str, index: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or f"step{index}"
    return slug if slug[0].isalpha() or slug[0] == "_" else f"s_{slug}"


@dataclass(frozen=True)
class QualityStats:
    selected: int = 0
    succeeded: int = 0
    failed: int = 0
    fallbacks: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"selected": self.selected, "succeeded": self.succeeded, "failed": self.failed,
                "fallbacks": self.fallbacks}


def quality_from_runs(runs: Iterable[Mapping[str, Any]]) -> dict[str, QualityStats]:
    """Per skill name and per ``group:<id>``: how often it was selected, succeeded, failed.

    ``runs`` are run-record dicts (``graph.runlog.RunRecord.to_dict()``); a run with
    ``fallback: true`` counts as a fallback for its group.
    """
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        group_key = "group:" + str(run.get("group"))
        counts[group_key]["selected"] += 1
        counts[group_key]["succeeded" if run.get("status") == "success" else "failed"] += 1
        if run.get("fallback"):
            counts[group_key]["fallbacks"] += 1
        for step in run.get("steps", ()):
            if step.get("kind") != "skill" or step.get("status") in ("skipped", "pending"):
                continue
            key = str(step.get("target"))
            counts[key]["selected"] += 1
            counts[key]["succeeded" if step.get("status") == "success" else "failed"] += 1
    return {key: QualityStats(c["selected"], c["succeeded"], c["failed"], c["fallbacks"])
            for key, c in counts.items()}
