"""``skillgrove groups suggest``: draft groups worth approving, from runs, history, or skills
that name each other.

Sources, in order: the rows given (the run log, read by :func:`graph.learning.rows_from_runs`,
or a history file in the benchmark format), then co-references between instruction-only skills
(a skill whose instructions name other skills of the library). A draft

- carries the edges the rows show (``needs``) and the bindings they used (``with:``), the rest
  inferred from the members' input/output contracts (see :func:`graph.learning.draft_to_yaml`);
- has the rows' requests as examples and a description made from its members';
- never has the member set of an existing group (or draft): a row that did what a group does
  is counted for that group instead;
- is checked like any group; the errors that remain are returned with it.

Drafts are written to ``<library>/groups/drafts/``, which ``check`` reads and reports as drafts
(see :mod:`groups.authoring`). With no draft, :attr:`Suggestions.reason` says why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillgrove.graph.learning import (
    GROUP_MEMBER,
    Contract,
    DraftGroup,
    HistoryRow,
    acyclic_edges,
    draft_support,
    draft_to_yaml,
    mine_groups,
    topological_order,
    unique_id,
)
from skillgrove.groups.authoring import member_set
from skillgrove.groups.library import Library
from skillgrove.groups.loader import load_group_text
from skillgrove.groups.model import Group
from skillgrove.groups.validate import validate_group
from skillgrove.skills.diagnostics import Diagnostic


@dataclass(frozen=True)
class SuggestedDraft:
    draft: DraftGroup
    text: str
    """The group file, ready to write."""
    errors: tuple[Diagnostic, ...]
    """What ``check`` would still report as errors (none for a draft that passes)."""
    source: str
    """``runs``, ``history`` or ``co-references``."""


@dataclass(frozen=True)
class Suggestions:
    drafts: tuple[SuggestedDraft, ...]
    rows: int
    """How many rows (tasks) were read."""
    covered: Mapping[str, int]
    """Rows that did exactly what an existing group does, by group id."""
    rare: int
    """Skill combinations seen, but fewer than ``min_support`` times."""
    reason: str | None
    """Why there is no draft (None when there is one)."""


def suggest(library: Library, rows: Sequence[HistoryRow], *, source: str = "runs",
            min_support: int | None = None, folder: Path | None = None,
            co_references: bool = True) -> Suggestions:
    """Draft groups for ``library`` from ``rows`` (members by skill name, id, or
    ``group:<id>``), each checked against the library as if saved in ``folder``.
    ``min_support``: how often a set must occur (None: ``learning.draft_support`` of the
    number of rows, twice or, in a short history, once)."""
    if min_support is None:
        min_support = draft_support(len(rows))
    by_id = library.catalog.by_id()
    rows = [_by_name(row, by_id) for row in rows]
    parsed = _all_groups(library)
    known = {member_set(g): g.id for g in parsed.values()}
    flat_known = {_flatten(member_set(g), parsed): g.id for g in parsed.values()}
    covered: Counter[str] = Counter()
    fresh: list[HistoryRow] = []
    for row in rows:
        members = frozenset(row.skills)
        if not row.succeeded or not members:
            continue
        existing = known.get(members) or flat_known.get(_flatten(members, parsed))
        if existing is not None:
            covered[existing] += 1
        else:
            fresh.append(row)
    counts = Counter(frozenset(r.skills) for r in fresh)
    rare = sum(1 for n in counts.values() if n < min_support)
    skills = library.catalog.skills
    names = {s.name: s.name for s in skills} | {GROUP_MEMBER + g: g for g in parsed}
    descriptions = {s.name: s.description for s in skills}
    drafts = mine_groups(fresh, min_support=min_support, names=names,
                         used_ids=set(parsed) | set(library.skills),
                         prerequisites={s.name: s.depends_on for s in skills})
    mined = [(d, source) for d in drafts]
    if co_references:
        taken = set(parsed) | {d.id for d, _ in mined}
        seen = set(known) | {frozenset(d.members) for d, _ in mined}
        mined += [(d, "co-references") for d in _co_reference_drafts(library, taken, seen)]
    contracts = _contracts(library, parsed)
    out = []
    for draft, origin in mined:
        draft = replace(draft, description=describe(draft, descriptions, parsed, origin))
        header = _header(draft, origin)
        text = draft_to_yaml(draft, contracts=contracts, header=header)
        out.append(SuggestedDraft(draft, text, _check(text, draft, library, parsed, folder),
                                  origin))
    reason = None if out else _reason(library, rows, covered, rare, min_support, source)
    return Suggestions(tuple(out), len(rows), dict(covered), rare, reason)


def _by_name(row: HistoryRow, by_id: Mapping[str, Any]) -> HistoryRow:
    """The row with skill ids replaced by the skills' names (steps call skills by name)."""
    def name(member: str) -> str:
        skill = by_id.get(member)
        return str(skill.name) if skill is not None else member

    return replace(row, skills=tuple(name(s) for s in row.skills),
                   edges=tuple((name(a), name(b)) for a, b in row.edges),
                   bindings=tuple(replace(b, member=name(b.member),
                                          source=name(b.source) if b.source else "")
                                  for b in row.bindings))


def _all_groups(library: Library) -> dict[str, Group]:
    """Every group that parsed, valid or not, drafts included."""
    found: dict[str, Group] = {}
    for load in library.group_loads:
        if load.group is not None:
            found.setdefault(load.group.id, load.group)
    return found


def _flatten(members: frozenset[str], groups: Mapping[str, Group]) -> frozenset[str]:
    """Sub-groups replaced by their skills, all the way down."""
    out: set[str] = set()
    pending, entered = list(members), set()
    while pending:
        member = pending.pop()
        if not member.startswith(GROUP_MEMBER):
            out.add(member)
            continue
        gid = member[len(GROUP_MEMBER):]
        if gid in entered or gid not in groups:
            out.add(member)
            continue
        entered.add(gid)
        pending.extend(member_set(groups[gid]))
    return frozenset(out)


def _contracts(library: Library, groups: Mapping[str, Group]) -> dict[str, Contract]:
    """(inputs, outputs) JSON Schemas of every skill and of every group (``group:<id>``)."""
    contracts: dict[str, Contract] = {s.name: (s.inputs, s.outputs)
                                      for s in library.catalog.skills}
    for group in groups.values():
        properties = {spec.name: {"type": spec.type, "description": spec.description}
                      for spec in group.inputs}
        required = [spec.name for spec in group.inputs if spec.required and not spec.has_default]
        outputs: dict[str, Any] = {"properties": {str(k): {} for k in group.outputs}}
        contracts[GROUP_MEMBER + group.id] = ({"properties": properties, "required": required},
                                              outputs)
    return contracts


def describe(draft: DraftGroup, descriptions: Mapping[str, str],
             groups: Mapping[str, Group], origin: str) -> str:
    """What the draft does, one clause per member in order, and where it comes from.

    >>> describe(draft, {"pdf-to-text": "Extract the text of a PDF."}, {}, "runs")
    'Extract the text of a PDF, then convert Markdown to HTML. Learned from 3 runs.'
    """
    clauses: list[str] = []
    for member in draft.members:
        if member.startswith(GROUP_MEMBER):
            group = groups.get(member[len(GROUP_MEMBER):])
            text = group.description if group else member
        else:
            text = descriptions.get(member, member)
        clause = _first_clause(text) or member.removeprefix(GROUP_MEMBER)
        clauses.append(clause if not clauses else clause[:1].lower() + clause[1:])
    body = ", then ".join(clauses)
    if origin == "co-references":
        where = "Drafted from skills whose instructions name each other."
    else:
        where = (f"Learned from {draft.support} {'runs' if origin == 'runs' else 'history rows'}"
                 " that did these steps together.")
    return f"{body}{'' if body.endswith('…') else '.'} {where}"


_CLAUSE_END = re.compile(r"[.!?;](?:\s|$)|[。；：]| - | — ")


def _first_clause(text: str, limit: int = 90) -> str:
    """The first sentence or clause of a description, at most about ``limit`` characters
    (cut at a word)."""
    text = " ".join(text.split())
    match = _CLAUSE_END.search(text)
    clause = text[:match.start()] if match else text
    if len(clause) > limit:
        cut = clause[:limit].rsplit(" ", 1)[0] if " " in clause[:limit] else clause[:limit]
        clause = cut.rstrip(",;: ") + "…"
    return clause.strip()


def _header(draft: DraftGroup, origin: str) -> str:
    seen = "" if origin == "co-references" else (
        f"; seen {draft.support} time{'s' if draft.support != 1 else ''}")
    lines = [f"# Draft group (skillgrove groups suggest, from {origin}{seen})."]
    if not draft.examples:
        lines.append("# No request was recorded with these runs: add 'examples:' (requests a "
                     "user would type) before approving it.")
    lines.append("# Review it, then move it up into groups/ to approve it, or delete it.")
    return "\n".join(lines) + "\n"


def _check(text: str, draft: DraftGroup, library: Library, groups: Mapping[str, Group],
           folder: Path | None) -> tuple[Diagnostic, ...]:
    path = (folder or Path("groups/drafts")) / f"{draft.id}.yaml"
    load = load_group_text(text, path)
    problems = [*load.diagnostics]
    if load.group is not None:
        problems += validate_group(load.group, library.skills, {**groups, draft.id: load.group})
    return tuple(d for d in problems if d.is_error)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]")


def _co_reference_drafts(library: Library, taken: set[str],
                         seen: set[frozenset[str]]) -> list[DraftGroup]:
    """Instruction-only skills whose instructions name each other: one draft per connected
    set, a named skill before the one that names it (its guidance comes first)."""
    skills = {s.name: s for s in library.catalog.skills if not s.is_executable}
    names: dict[str, list[str]] = {}
    for name in sorted(skills):
        try:
            body = skills[name].body()
        except Exception:  # unreadable now: nothing to mine from it
            continue
        names[name] = [m for m in dict.fromkeys(_NAME.findall(body))
                       if m != name and m in skills and "-" in m]
    neighbours: dict[str, set[str]] = {n: set() for n in names}
    for name, named in names.items():
        for other in named:
            neighbours.setdefault(name, set()).add(other)
            neighbours.setdefault(other, set()).add(name)
    drafts, placed = [], set()
    for start in sorted(neighbours):
        if start in placed or not neighbours[start]:
            continue
        component, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node not in component:
                component.add(node)
                stack.extend(neighbours[node] - component)
        placed |= component
        members = frozenset(component)
        if members in seen:
            continue
        votes = {(other, name): 1 for name in component for other in names.get(name, ())}
        order = sorted(component, key=lambda n: (-len(neighbours[n]), n))
        edges = acyclic_edges(votes, votes, order)
        order_t = topological_order(order, edges)
        edges.sort(key=lambda e: (order_t.index(e[0]), order_t.index(e[1])))
        draft_id = unique_id(f"{order_t[-1]}-with-references", taken)
        drafts.append(DraftGroup(draft_id, order_t, tuple(edges), (), 1, ""))
    return drafts



def _reason(library: Library, rows: Sequence[HistoryRow], covered: Mapping[str, int],
            rare: int, min_support: int, source: str) -> str:
    executable = sum(1 for s in library.catalog.skills if s.is_executable)
    if not rows:
        if source == "runs":
            if library.catalog.skills and not executable:
                return ("no runs recorded, and none can be: the library holds only "
                        "instruction-only skills, which run nothing; no skill names another "
                        "either, so there are no co-references to draft from. Pass a history "
                        "file (--history FILE, see FORMAT.md) of past tasks")
            return ("no runs recorded: run groups or skills first (`skillgrove run`, "
                    "`skillgrove run-skill`, `skillgrove ask`), or pass a history file "
                    "(--history FILE)")
        return "the history file has no rows"
    parts = []
    if covered:
        ran = ", ".join(f"{gid} ({n})" for gid, n in sorted(covered.items(),
                                                             key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{sum(covered.values())} of {len(rows)} {_unit(source)} did exactly what "
                     f"an existing group does: {ran}")
    if rare:
        parts.append(f"{rare} other skill combination{'s were' if rare != 1 else ' was'} seen "
                     f"fewer than {min_support} times (lower --min-support to draft "
                     f"{'them' if rare != 1 else 'it'})")
    if not parts:
        parts.append(f"no {_unit(source)} succeeded")
    return "; ".join(parts) + (". A draft comes from tasks that combine skills no group holds: "
                               "a toolbox `ask` composed, skills run one after another on each "
                               "other's outputs, or a group's outputs fed into another run"
                               if covered else "")


def _unit(source: str) -> str:
    return "runs" if source == "runs" else "history rows"

