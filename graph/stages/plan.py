"""Stage 3, the toolbox planner: a group when it covers the request, the group adapted when it
nearly does, else a toolbox composed from the candidate skills; then the order its skills run
in (``graph/planner.py``) and their declared prerequisites.

Rule: each task the request states ("A, then B"; "A, B and C") needs a skill, and a group
answers only when it covers enough of them; what no group covers is composed, in the order the
request states, data flow, past runs and declared prerequisites give."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanSettings:
    parts: bool = True
    """Whether a request that asks for several things ("A, B and C", "A, then B") is answered
    part by part (``Retriever._several_tasks``); off, the whole request's ranking is cut once
    by the selection."""
    part_ratio: float = 0.5
    """A part of the request gets a skill of its own only when that skill's evidence reaches
    this share of the best part's: a part that matches nothing well is a detail of another."""
    part_whole_depth: int = 10
    """A part of a list (not one added with "then", "also", "after that") gets a skill of its
    own only when the whole request ranks that skill among this many: a clause that is a
    detail of the task ("... with version 2.3") finds a skill the request as a whole does not
    want."""
    partner_boost: float | None = 0.1
    """How much more a part's candidate counts when it is known to run after a skill chosen
    for an earlier part (FLOWS_TO from it); None: off."""
    task_cover: float | None = 0.5
    """A request that states tasks in turn ("..., then ...") gets a group only when the group
    covers at least this share of them, and the first of them (``first_task``;
    ``Retriever._with_task_cover``:
    the later tasks act on what the first makes, so a group that ends alike but starts
    elsewhere is another workflow: "convert markdown to PDF then email it to my team" is not
    the report group that ends with the mail); otherwise a toolbox composed for the tasks
    answers (None: off)."""
    first_task: bool = True
    """Whether a group must also cover the first of the tasks a request states in turn (see
    ``task_cover``); fitted on history, which turns it off where held-out rows answer better
    without it."""
    extend_groups: bool = True
    """Whether a task the chosen group does not serve adds its own best skill beside the group
    (fitted on history: kept only where it helps)."""
    near_miss: float | None = None
    """A runner-up group that differs from the chosen one by one or two skills replaces it
    when the request's evidence for those skills gains more than this (None: never, the
    default; fitted on history)."""
    near_miss_min_belief: float = 0.02
    """...and the router gives the runner-up at least this belief."""
    stand_in: float | None = None
    """A skill named like one of the chosen group's final steps but for another part (its
    sibling: `ebay-delete-item-from-cart` for `amazon-delete-item-from-cart`), which no
    candidate group ends with, takes that step's place when the request's words match its
    part better by more than this; the members named with the old part take the new one where
    such a skill exists, and the answer is a composed toolbox. None: never (the default;
    fitted on history, where held-out rows whose set no group covers are the case it is
    for)."""
    order: bool = True
    """Whether the planner orders a composed toolbox and turns a group's edge round when the
    request states the other order; off, a composed toolbox keeps only declared prerequisites
    and a group its learned order."""
    closure: int | None = 12
    """At most this many declared prerequisites join a selection (its dependency closure);
    None: off."""
    companions_max: int = 4
    """At most this many companions of the closure's prerequisites are ranked after it."""
    companion_min: float = 0.6
    """...each at least this near (cosine) the prerequisite it accompanies."""
