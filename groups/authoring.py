"""Authoring warnings: what makes a valid group hard to find or hard to tell apart, and drafts.

Each warning says what to do about it:

- ``near-duplicate-group``: two groups with the same, or nearly the same, member set (skills
  and sub-groups). Retrieval has to pick one of them for a request that fits both.
- ``no-examples``: a group without example requests. Retrieval found a new group for 1 of 6
  requests without examples, and for 6 of 6 once it had one.
- ``draft-group``: a file under ``groups/drafts/`` (what ``skillgrove groups suggest`` writes)
  is checked like any group, then left out of the library until it is approved, i.e. moved
  up into ``groups/``.

Skill pairs whose descriptions overlap so much that retrieval cannot tell them apart need
the embeddings, so ``skillgrove index`` reports those (see ``graph.learning``'s callers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from pathlib import Path

from skillgrove.groups.model import Group
from skillgrove.skills.diagnostics import Diagnostic, Severity

DRAFTS_FOLDER = "drafts"
"""Drafts live in ``<library>/groups/drafts/``: read and checked, never indexed or run."""

NO_EXAMPLES_MESSAGE = ("no example requests: retrieval finds a group without examples far "
                       "less often (measured: 1 of 6 requests without examples, 6 of 6 with "
                       "one)")
NO_EXAMPLES_HINT = ("add 'examples:' with two or three requests a user would type for this "
                    "task, in their words")


def is_draft_file(path: Path) -> bool:
    """A group file in a ``drafts`` folder inside a ``groups`` folder."""
    parts = [p.lower() for p in path.parent.parts]
    return len(parts) >= 2 and parts[-1] == DRAFTS_FOLDER and "groups" in parts[:-1]


def member_set(group: Group) -> frozenset[str]:
    """What a group is made of: its skills by name and its sub-groups as ``group:<id>``."""
    return frozenset(s.skill if s.skill else f"group:{s.group}" for s in group.steps)


def is_near_duplicate(a: frozenset[str], b: frozenset[str]) -> bool:
    """The same members, or all but one or two of at least three shared, and those few at
    most a quarter of all.

    >>> is_near_duplicate(frozenset("abcdef"), frozenset("abcdeg"))
    True
    >>> is_near_duplicate(frozenset("ab"), frozenset("ac"))
    False
    """
    if a == b:
        return True
    shared, differ = len(a & b), len(a ^ b)
    return shared >= 3 and differ <= 2 and differ * 4 <= len(a | b) + 1


def near_duplicate_groups(groups: Sequence[Group],
                          drafts: Iterable[str] = ()) -> list[Diagnostic]:
    """One warning per pair of groups with the same or nearly the same member set, on the
    later file (a draft is always the later one)."""
    draft_ids = set(drafts)
    ordered = sorted(groups, key=lambda g: (g.id in draft_ids, str(g.path), g.id))
    found: list[Diagnostic] = []
    for first, second in combinations(ordered, 2):
        a, b = member_set(first), member_set(second)
        if not is_near_duplicate(a, b):
            continue
        if a == b:
            what = f"has the same {len(a)} members as group '{first.id}' ({first.path})"
        else:
            only_here = ", ".join(sorted(b - a)) or "nothing"
            only_there = ", ".join(sorted(a - b)) or "nothing"
            what = (f"has nearly the same members as group '{first.id}' ({first.path}): only "
                    f"{only_here} here, only {only_there} there")
        hint = ("a draft that repeats a group adds nothing: delete it, or add its examples to "
                f"'{first.id}'" if second.id in draft_ids else
                f"if it is the same task, keep one group and move the other's examples into "
                f"it; if not, say in the description and examples how it differs from "
                f"'{first.id}'")
        found.append(Diagnostic(Severity.WARNING, "near-duplicate-group",
                                f"group '{second.id}' {what}", second.path,
                                *second.source.value_at(("steps",)), hint=hint,
                                subject=second.id))
    return found


def example_warnings(diagnostics: Sequence[Diagnostic],
                     groups: Iterable[Group]) -> list[Diagnostic]:
    """``diagnostics`` with each missing-examples warning saying what it costs and what to
    do, plus one for a group whose ``examples`` list is empty."""
    out = [replace(d, message=NO_EXAMPLES_MESSAGE, hint=NO_EXAMPLES_HINT)
           if d.rule == "no-examples" else d for d in diagnostics]
    warned = {d.path for d in out if d.rule == "no-examples"}
    for group in groups:
        if not group.examples and group.path not in warned:
            out.append(Diagnostic(Severity.WARNING, "no-examples", NO_EXAMPLES_MESSAGE,
                                  group.path, *group.source.value_at(("examples",)),
                                  hint=NO_EXAMPLES_HINT, subject=group.id))
    return out


def draft_notes(drafts: Mapping[str, Group], diagnostics: Sequence[Diagnostic]
                ) -> list[Diagnostic]:
    """One note per draft: whether it passes ``check``, and how to approve it."""
    failing = {d.path for d in diagnostics if d.is_error}
    notes = []
    for group in drafts.values():
        if group.path in failing:
            message = (f"draft group '{group.id}' has errors (above); it is not loaded until "
                       "they are fixed and it is approved")
        else:
            message = f"draft group '{group.id}' passes check; it is not loaded until approved"
        notes.append(Diagnostic(Severity.INFO, "draft-group", message, group.path,
                                hint=f"review it, then move it to {group.path.parent.parent} "
                                     "to approve it (or delete it)", subject=group.id))
    return notes
