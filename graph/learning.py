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
    bindings: tuple[Binding, ...] = ()
    """How inputs got their values in this row, where the run log shows it."""


@dataclass(frozen=True)
class Binding:
    """Step ``member`` read its input ``name`` from output ``output`` of ``source`` (a member
    upstream), or from the group input ``output`` when ``source`` is empty."""

    member: str
    name: str
    source: str
    output: str


GROUP_MEMBER = "group:"
"""Prefix of a member that is a group (a sub-group step), not a skill."""


@dataclass(frozen=True)
class DraftGroup:
    id: str
    members: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    examples: tuple[str, ...]
    support: int
    description: str
    all_requests: tuple[str, ...] = field(default=(), repr=False)
    bindings: tuple[Binding, ...] = ()
    """The bindings most of the supporting rows used (at most one per member and input)."""


def read_jsonl(path: Path, required: Mapping[str, type | tuple[type, ...]]) -> list[dict[str, Any]]:
    """Read a JSON-lines file, checking each object's required keys and their types."""
    rows: list[dict[str, Any]] = []
    try:
        # utf-8-sig: a byte-order mark (a file saved by Notepad or Excel) is read as nothing.
        handle = path.open(encoding="utf-8-sig")
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


def recurring_sets(rows: Iterable[HistoryRow]) -> dict[frozenset[str], list[HistoryRow]]:
    """The succeeded rows by the set of skills they used."""
    by_set: dict[frozenset[str], list[HistoryRow]] = defaultdict(list)
    for row in rows:
        if row.skills and row.succeeded:
            by_set[frozenset(row.skills)].append(row)
    return by_set


SHORT_HISTORY = 300
"""A history of fewer rows drafts a group from a skill set seen once: each of its rows is all it
knows of that task, and waiting for a set to recur leaves most of them unused (the history is
also too short to hold a tenth out for calibration). On a seeded cut of each dev set to 250
rows (the first 300 queries), drafting sets seen once took ToolLens from 30.3 to 37.9 set F1
and ToolLinkOS from 79.3 / 69.6 to 82.7 / 71.2, and cost Sealtools-in (no test set in its
history) 0.8; at 50 rows, 24.8 to 29.5, 78.4 / 70.8 to 79.7 / 70.0, and 0.2."""


def draft_support(rows: int) -> int:
    """How often a skill set must occur in a history of ``rows`` rows to be drafted as a group:
    twice, or once in a short history (``SHORT_HISTORY``)."""
    return 1 if rows < SHORT_HISTORY else 2


def mine_groups(rows: Iterable[HistoryRow], *, min_support: int = 2, max_examples: int = 8,
                names: Mapping[str, str] | None = None,
                descriptions: Mapping[str, str] | None = None,
                exclude: Iterable[frozenset[str]] = (),
                used_ids: Iterable[str] = (),
                prerequisites: Mapping[str, Sequence[str]] | None = None) -> list[DraftGroup]:
    """Recurring skill sets in ``rows`` as draft groups, most frequent first.

    A set in ``exclude`` (the member sets of existing groups) is never drafted again; draft
    ids avoid ``used_ids``. A set none of whose rows records edges (an unordered set, as a
    history may give it) takes its members' declared ``prerequisites`` (skill -> the skills
    it needs first, as the rows name them) among themselves as its edges: a prerequisite's
    result feeds the skill that declares it."""
    by_set = recurring_sets(rows)
    names = names or {}
    descriptions = descriptions or {}
    excluded = set(exclude)
    drafts: list[DraftGroup] = []
    taken: set[str] = set(used_ids)
    for members, support_rows in sorted(by_set.items(),
                                        key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
        if len(support_rows) < min_support or members in excluded:
            continue
        order = _call_order(support_rows, members)
        edge_votes = Counter(e for row in support_rows for e in set(row.edges)
                             if e[0] in members and e[1] in members and e[0] != e[1])
        # An edge seen in at least half of the rows that declare edges is part of the group,
        # unless it would close a cycle with edges seen more often (runs that called the same
        # skills in different orders): a draft is always a valid DAG.
        declaring = sum(1 for row in support_rows if row.edges)
        candidates = [e for e, n in edge_votes.items() if n * 2 >= declaring]
        if not declaring and prerequisites:
            candidates = [(needed, m) for m in sorted(members)
                          for needed in prerequisites.get(m, ()) if needed in members
                          and needed != m]
            edge_votes = Counter(candidates)
        kept = acyclic_edges(candidates, edge_votes, order)
        order = topological_order(order, kept)
        edges = tuple(sorted(kept, key=lambda e: (order.index(e[0]), order.index(e[1]))))
        requests = tuple(dict.fromkeys(r.request for r in support_rows))
        labels = [names.get(m, m) for m in order]
        group_id = unique_id("-".join(_slug(label) for label in labels)[:60] or "group",
                              taken)
        described = "; ".join(f"{names.get(m, m)}: {descriptions[m]}" if m in descriptions
                              else names.get(m, m) for m in order)
        description = (f"Learned from {len(support_rows)} runs that used "
                       f"{_join(labels)} together. {described}")
        requests = tuple(r for r in requests if r.strip())
        drafts.append(DraftGroup(group_id, order, edges, requests[:max_examples],
                                 len(support_rows), description, requests,
                                 _voted_bindings(support_rows, members, kept)))
    return drafts


def _voted_bindings(rows: Sequence[HistoryRow], members: frozenset[str],
                    edges: Sequence[tuple[str, str]]) -> tuple[Binding, ...]:
    """Per (member, input), the binding most rows used, if its source is upstream of the
    member along ``edges`` (or a group input)."""
    ancestors = _ancestors(edges)
    votes: Counter[Binding] = Counter(b for row in rows for b in set(row.bindings)
                                      if b.member in members)
    chosen: dict[tuple[str, str], Binding] = {}
    for binding, _ in sorted(votes.items(), key=lambda kv: (-kv[1], kv[0].source == "",
                                                             kv[0].source, kv[0].output)):
        key = (binding.member, binding.name)
        if key in chosen:
            continue
        if binding.source and binding.source not in ancestors.get(binding.member, set()):
            continue
        chosen[key] = binding
    return tuple(chosen.values())


def _ancestors(edges: Sequence[tuple[str, str]]) -> dict[str, set[str]]:
    parents: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        parents[dst].add(src)
    found: dict[str, set[str]] = {}
    for node in list(parents):
        seen: set[str] = set()
        stack = list(parents[node])
        while stack:
            up = stack.pop()
            if up not in seen:
                seen.add(up)
                stack.extend(parents.get(up, ()))
        found[node] = seen
    return found


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def unique_id(base: str, used: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... whichever is not in ``used`` (then added to it)."""
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


@dataclass
class _Unit:
    """One thing a run did that a draft can hold as a step: a skill, or a whole group."""

    member: str
    run: int
    started: float
    finished: float
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]


CHAIN_WINDOW = 3600.0
"""Seconds between the end of a run and the start of a later one that reads its outputs, for
the two to count as one task."""


def rows_from_runs(runs: Sequence[Mapping[str, Any]], groups: Iterable[str], *,
                   skill_run_prefix: str = "skill:",
                   window: float = CHAIN_WINDOW) -> list[HistoryRow]:
    """Run records as history rows with the edges and bindings their data shows.

    A run of a group in ``groups`` (the library's) is one unit, ``group:<id>``; a single-skill
    run (group ``skill:<name>``) is that skill; any other run (a composed toolbox, a group that
    is gone) is its steps. Within a run, a step that read a value equal to an earlier step's
    output needs that step and reads that output; a later run that read a value equal to an
    output of a run that ended at most ``window`` seconds before continues the same task: the
    runs become one row. Only succeeded runs count.

    >>> rows = rows_from_runs([run_a, run_b_reading_a], groups=["report-analysis"])
    >>> rows[0].skills, rows[0].edges
    (('group:report-analysis', 'markdown-to-html'), (('group:report-analysis', 'markdown-to-html'),))
    """
    library_groups = set(groups)
    ordered = sorted((r for r in runs if r.get("status") == "success"),
                     key=lambda r: float(r.get("started_at") or 0.0))
    units: list[_Unit] = []
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges: list[tuple[int, int]] = []
    bindings: list[tuple[int, str, int | None, str]] = []
    """(unit, input, source unit or None for a group input, output or input name)"""
    for index, run in enumerate(ordered):
        started = float(run.get("started_at") or 0.0)
        finished = started + float(run.get("seconds") or 0.0)
        group = str(run.get("group") or "")
        inputs = _as_mapping(run.get("inputs"))
        if group in library_groups:
            units.append(_Unit(GROUP_MEMBER + group, index, started, finished, inputs,
                               _as_mapping(run.get("outputs"))))
            own = [len(units) - 1]
        else:
            own = []
            for step in run.get("steps", ()):
                if step.get("status") != "success" or step.get("kind") not in ("skill", "group"):
                    continue
                target = str(step.get("target"))
                begun = float(step.get("started_at") or started)
                units.append(_Unit(target if step.get("kind") == "skill" or
                                   group.startswith(skill_run_prefix) else GROUP_MEMBER + target,
                                   index, begun, begun + float(step.get("seconds") or 0.0),
                                   _as_mapping(step.get("inputs")),
                                   _as_mapping(step.get("outputs"))))
                own.append(len(units) - 1)
        whole_run = group in library_groups or group.startswith(skill_run_prefix)
        earlier = [u for u in range(len(units) - len(own))
                   if 0 <= started - units[u].finished <= window]
        for u in own:
            unit = units[u]
            inside = [v for v in own if v != u and units[v].finished <= unit.started + 1e-6]
            for name, value in unit.inputs.items():
                found = _source_of(str(name), value, inside, units)
                if found is None:
                    found = _source_of(str(name), value, earlier, units)
                    if found is not None:
                        parent[root(index)] = root(units[found[0]].run)
                if found is not None:
                    edges.append((found[0], u))
                    bindings.append((u, str(name), found[0], found[1]))
                elif whole_run:
                    bindings.append((u, str(name), None, str(name)))
                else:
                    given = _run_input_named(str(name), value, inputs)
                    if given is not None:
                        bindings.append((u, str(name), None, given))
            for v in inside:  # a text made from an output (a template) still depends on it
                if (v, u) not in edges and _contains(unit.inputs, units[v].outputs):
                    edges.append((v, u))
    rows: list[HistoryRow] = []
    by_task: dict[int, list[int]] = defaultdict(list)
    for u, unit in enumerate(units):
        by_task[root(unit.run)].append(u)
    for _, members in sorted(by_task.items()):
        members.sort(key=lambda u: (units[u].started, u))
        names = [units[u].member for u in members]
        chosen = set(members)
        row_edges = tuple(dict.fromkeys((units[a].member, units[b].member) for a, b in edges
                                        if a in chosen and b in chosen))
        row_bindings = tuple(dict.fromkeys(
            Binding(units[u].member, name, units[src].member if src is not None else "", out)
            for u, name, src, out in bindings if u in chosen))
        runs_here = sorted({units[u].run for u in members})
        request = next((str(ordered[i].get("request")) for i in runs_here
                        if ordered[i].get("request")), "")
        rows.append(HistoryRow("+".join(str(ordered[i].get("id")) for i in runs_here), request,
                               tuple(names), row_edges, True, row_bindings))
    return rows


def _as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _telling(value: Any) -> bool:
    """A value distinctive enough that equal values mean data flowed (not ``""``, ``0``,
    ``true``, or a one-letter word)."""
    if isinstance(value, str):
        return len(value.strip()) >= 3
    if isinstance(value, list | dict):
        return bool(value)
    return False


def _source_of(name: str, value: Any, candidates: Sequence[int],
               units: Sequence[_Unit]) -> tuple[int, str] | None:
    """The unit and output whose value ``value`` is: an output of the same name first, then
    the latest to finish."""
    if not _telling(value):
        return None
    matches = [(u, key) for u in candidates for key, out in units[u].outputs.items()
               if out == value]
    if not matches:
        return None
    matches.sort(key=lambda m: (m[1] != name, -units[m[0]].finished, m[0]))
    return matches[0][0], str(matches[0][1])


def _run_input_named(name: str, value: Any, inputs: Mapping[str, Any]) -> str | None:
    """The run input a step's input came from: one of the same name and value, else the only
    one with that value."""
    if name in inputs and inputs[name] == value:
        return name
    if not _telling(value):
        return None
    same = [str(k) for k, v in inputs.items() if v == value]
    return same[0] if len(same) == 1 else None


def _contains(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> bool:
    texts = [v for v in inputs.values() if isinstance(v, str)]
    texts += [json.dumps(v, ensure_ascii=False, default=str) for v in inputs.values()
              if isinstance(v, list | dict)]
    pieces = [v for v in outputs.values() if isinstance(v, str) and len(v.strip()) >= 16]
    return any(piece in text for piece in pieces for text in texts)


def co_use_weights(rows: Iterable[HistoryRow]) -> dict[tuple[str, str], float]:
    """How often each pair of skills was used in the same run (pairs sorted)."""
    weights: Counter[tuple[str, str]] = Counter()
    for row in rows:
        for a, b in combinations(sorted(set(row.skills)), 2):
            weights[(a, b)] += 1
    return {pair: float(n) for pair, n in weights.items()}


def transition_counts(rows: Iterable[HistoryRow]) -> dict[tuple[str, str], float]:
    """How often each directed edge (a result of ``a`` feeding ``b``) was taken, once per run:
    the order history ran two skills in, sets seen once included. Rows without edges are
    unordered and count for nothing here.

    >>> transition_counts([HistoryRow("1", "x", ("a", "b"), (("a", "b"),))])
    {('a', 'b'): 1.0}
    """
    counts: Counter[tuple[str, str]] = Counter()
    for row in rows:
        for a, b in set(row.edges):
            if a != b:
                counts[(a, b)] += 1
    return {pair: float(n) for pair, n in counts.items()}


Contract = tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]
"""A skill's declared (inputs, outputs) JSON Schemas."""

_GROUP_INPUT_TYPES = ("string", "integer", "number", "boolean", "array", "object")


def draft_to_yaml(draft: DraftGroup, names: Mapping[str, str] | None = None,
                  all_examples: bool = False,
                  contracts: Mapping[str, Contract] | None = None,
                  header: str | None = None) -> str:
    """The draft as an ordinary group file (steps call skills by name) that validates.

    Each step reads what the runs show it read (``draft.bindings``); with the members'
    contracts (``contracts``, by member), every other required input is bound too: to an
    upstream output of the same name (nearest first), else to the only output of a step it
    needs whose type fits, else to a group input of that name (declared with the input's
    type), so the draft passes ``skillgrove check``. A member ``group:<id>`` is a sub-group
    step."""
    names = names or {}
    contracts = contracts or {}
    step_ids: dict[str, str] = {}
    for i, member in enumerate(draft.members):
        step_ids[member] = unique_id(_step_id(_label(member, names), i), set(step_ids.values()))
    ancestors = _ancestors(list(draft.edges))
    by_input = {(b.member, b.name): b for b in draft.bindings}
    steps = []
    group_inputs: dict[str, dict[str, Any]] = {}
    for member in draft.members:
        upstream = [a for a, b in draft.edges if b == member]
        before = sorted(ancestors.get(member, set()), key=lambda m: -draft.members.index(m))
        step: dict[str, Any] = {"id": step_ids[member]}
        if member.startswith(GROUP_MEMBER):
            step["group"] = member[len(GROUP_MEMBER):]
        else:
            step["skill"] = names.get(member, member)
        if upstream:
            step["needs"] = [step_ids[a] for a in upstream]
        inputs, _ = contracts.get(member, (None, None))
        declared_inputs = _properties_of(inputs)
        required = dict(_required_properties(inputs))
        bindings: dict[str, Any] = {}
        for (target, key), binding in by_input.items():
            if target != member or (inputs is not None and key not in declared_inputs):
                continue
            if binding.source and binding.source in step_ids:
                bindings[key] = (f"${{{{ steps.{step_ids[binding.source]}.outputs."
                                 f"{binding.output} }}}}")
            elif not binding.source and (inputs is None or key in required):
                bindings[key] = _group_input(group_inputs, binding.output,
                                             declared_inputs.get(key))
        for key, spec in required.items():
            if key in bindings:
                continue
            source = _output_for(key, spec, before, upstream, contracts)
            if source is not None:
                bindings[key] = f"${{{{ steps.{step_ids[source[0]]}.outputs.{source[1]} }}}}"
            else:
                bindings[key] = _group_input(group_inputs, key, spec)
        # A file an upstream step made goes where this step takes files, when that is an
        # optional input no one set ("zip these files and email them": the archive is the
        # attachment, not the subject).
        read = {str(v) for v in bindings.values()}
        made = [f"${{{{ steps.{step_ids[source]}.outputs.{name} }}}}" for source in upstream
                for name, out in _properties_of(contracts.get(source, (None, None))[1]).items()
                if _is_path(out, str(name))]
        unread = [expression for expression in made if expression not in read]
        takes = [key for key, spec in declared_inputs.items()
                 if key not in bindings and key not in required and _is_path(spec, key)
                 and not key.endswith(_FOLDER_WORDS)]
        if len(unread) == 1 and len(takes) == 1:
            spec = declared_inputs[takes[0]]
            bindings[takes[0]] = [unread[0]] if "array" in _types_of(spec) else unread[0]
        if bindings:
            step["with"] = bindings
        steps.append(step)
    data: dict[str, Any] = {
        "id": draft.id,
        "name": "Draft: " + _join([_label(m, names) for m in draft.members]),
        "description": draft.description,
        "examples": list(draft.all_requests if all_examples else draft.examples),
    }
    if group_inputs:
        data["inputs"] = group_inputs
    data["steps"] = steps
    if header is None:
        header = (f"# Draft group mined from {draft.support} runs; review it, then keep it as "
                  "an ordinary group.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _group_input(group_inputs: dict[str, dict[str, Any]], name: str, spec: Any) -> str:
    """Declares the required group input ``name`` (typed like ``spec``); its expression."""
    entry: dict[str, Any] = {"required": True}
    kind = _input_type(spec)
    if kind:
        entry["type"] = kind
    if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
        entry["description"] = spec["description"]
    group_inputs.setdefault(name, entry)
    return f"${{{{ inputs.{name} }}}}"


def _label(member: str, names: Mapping[str, str]) -> str:
    return names.get(member, member.removeprefix(GROUP_MEMBER))


def _output_for(key: str, spec: Any, before: Sequence[str], upstream: Sequence[str],
                contracts: Mapping[str, Contract]) -> tuple[str, str] | None:
    """The upstream output a required input can read: one of the same name and a fitting
    type (nearest step first), else the only fitting output of the steps it needs."""
    wanted = _types_of(spec)
    for source in before:
        out = _properties_of(contracts.get(source, (None, None))[1])
        if key in out and _fits(_types_of(out[key]), wanted):
            return source, key
    if not wanted:
        return None
    fitting = [(source, str(name), out) for source in upstream
               for name, out in _properties_of(contracts.get(source, (None, None))[1]).items()
               if _types_of(out) and _fits(_types_of(out), wanted)]
    # The one output that fits, and a file's path only where a file is taken: an archive's
    # path is no mail's subject.
    if len(fitting) != 1 or _is_path(fitting[0][2], fitting[0][1]) != _is_path(spec, key):
        return None
    return fitting[0][0], fitting[0][1]


_FOLDER_WORDS = ("dir", "folder", "directory")
"""How an input that takes a folder, not a file, is named (``outbox_dir``)."""


def _is_path(spec: Any, name: str = "") -> bool:
    """Whether an input or output holds a file's path, or a list of them: declared so
    (``format: path``, as an input the sandbox mounts is), or named so (``path``,
    ``..._path``, ``paths``: what outputs are called, having nothing to mount)."""
    if name == "path" or name == "paths" or name.endswith(("_path", "_paths")):
        return True
    if not isinstance(spec, Mapping):
        return False
    items = spec.get("items")
    return spec.get("format") == "path" or (
        isinstance(items, Mapping) and items.get("format") == "path")


def _types_of(spec: Any) -> set[str]:
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return {k for k in (kind if isinstance(kind, list) else [kind]) if isinstance(k, str)}


def _fits(given: set[str], wanted: set[str]) -> bool:
    """An output of types ``given`` can feed an input of types ``wanted`` (unknown fits)."""
    if not given or not wanted:
        return True
    return bool(given & wanted) or ("integer" in given and "number" in wanted)


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
