"""Stage 3, the toolbox planner: a group when it covers the request, the group adapted when it
nearly does, else a toolbox composed from the candidate skills; then the order its skills run
in (``graph/planner.py``) and their declared prerequisites.

Rule: each task the request states ("A, then B"; "A, B and C") needs a skill, and a group
answers only when it covers enough of them; what no group covers is composed, in the order the
request states, data flow, past runs and declared prerequisites give."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from skillgrove.graph.glossary import english_gloss
from skillgrove.graph.model import EdgeKind, NodeRecord, SkillNode
from skillgrove.graph.planner import (
    Join,
    Part,
    data_flow_edges,
    next_answered,
    plan_edges,
    request_parts,
    sequenced,
    stated_order,
)
from skillgrove.graph.text import cjk_share
from skillgrove.graph.toolbox import GroupChoice, RequestContext, ScoredSkill, SkillExplanation

if TYPE_CHECKING:
    from skillgrove.graph.embeddings import Encoder
    from skillgrove.graph.retrieval import _Reads
    from skillgrove.graph.stages import Settings


@dataclass(frozen=True)
class PlanSettings:
    parts: bool = True
    """Whether a request that asks for several things ("A, B and C", "A, then B") is answered
    part by part (``PlanRules._several_tasks``); off, the whole request's ranking is cut once
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
    ``PlanRules._with_task_cover``:
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
    referenced: bool = False
    """Whether a part of the request is joined to the part before it only when it refers back
    to an earlier result ("..., then email it", "for the same location", "the ID obtained
    from the previous response"): where a library's runs record as edges only the data one
    step takes from another, a task merely written after another runs on its own. Fitted on
    history (``calibrate_order``); off, the order written joins them."""
    closure: int | None = 12
    """At most this many declared prerequisites join a selection (its dependency closure);
    None: off."""
    companions_max: int = 4
    """At most this many companions of the closure's prerequisites are ranked after it."""
    companion_min: float = 0.6
    """...each at least this near (cosine) the prerequisite it accompanies."""


def _join_words(words: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def contract_of(record: NodeRecord) -> tuple[dict[str, str], dict[str, str]]:
    """A skill's (declared outputs, required inputs), each a name -> JSON type ("" when the
    schema gives none), from its indexed record."""

    def typed(schema: Any, names: Iterable[str]) -> dict[str, str]:
        properties = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        out = {}
        for name in names:
            spec = properties.get(name) if isinstance(properties, Mapping) else None
            kind = spec.get("type") if isinstance(spec, Mapping) else None
            out[str(name)] = kind if isinstance(kind, str) else ""
        return out

    node = SkillNode(record)
    return (typed(node.output_schema, node.outputs),
            typed(node.input_schema, node.required_inputs))


def task_segments(parts: Sequence[Part]) -> list[list[int]]:
    """The tasks of a request as lists of its parts' indexes: a part added with a sequencing
    word ("then", "also", "after that") starts a task, and the list clauses after it belong
    to it."""
    segments: list[list[int]] = []
    for index, part in enumerate(parts):
        if not segments or part.join is Join.SEQUENCE:
            segments.append([index])
        else:
            segments[-1].append(index)
    return segments


EVIDENCE_WORDS = {"declared": "declared prerequisites", "stated": "the order the request states",
                  "data flow": "data flow (an output feeds an input)",
                  "observed": "the order past runs took",
                  "listed": "the order the request lists them"}
"""How a composed toolbox's reason names what ordered it (``graph/planner.py``'s evidence)."""


PART_COVER_DEPTH = 3
"""A part of a request is answered by a skill already chosen when its own ranking holds that
skill among its first three: "give me the mean and median of each column" is one task whose
halves both rank the statistics skill."""


PARTNER_DEPTH = 10


class PlanRules:
    """The planner's rules, as methods of :class:`graph.retrieval.Retriever` (whose store
    reads, settings and skill ranking they use): a request's parts and tasks, the skill each
    gets, the order a composed toolbox runs in, and its declared prerequisites."""

    if TYPE_CHECKING:
        # What these rules read of the retriever they are part of (``graph.retrieval.Retriever``).
        settings: Settings
        encoder: Encoder

        @property
        def _reads(self) -> _Reads: ...

        def fits(self, skill: ScoredSkill) -> bool: ...

        def select(self, skills: Sequence[ScoredSkill]) -> list[str]: ...

        def _answering_of(self, ids: Sequence[str]) -> dict[str, str]: ...

        def _atomic_tier(self, query: str, vector: Any, context: RequestContext, k: int,
                         weight: float | None = None, glossed: tuple[str, Any] | None = None,
                         ) -> list[ScoredSkill]: ...

    def _part_rankings(self, request: str, context: RequestContext, k: int,
                       weight: float | None) -> list[list[ScoredSkill]]:
        """The skill ranking of each part of a request that asks for several things (see
        ``planner.request_parts``); empty for a request of one part. A part mostly in CJK
        script is matched as such a request is, its English gloss too. Remembered for the
        search: the group and the composed toolbox both read them."""
        parts = request_parts(request)
        if len(parts) < 2:
            return []
        key = ("parts", request, k, weight, context.recent_skills)
        reads = self._reads
        if key not in reads.derived:
            texts = [p.text for p in parts]
            glosses: dict[int, tuple[str, str]] = {}
            for index, text in enumerate(texts):
                if weight is not None and self.settings.skills.gloss and cjk_share(text) > 0.3:
                    gloss = english_gloss(text)
                    if gloss:
                        glosses[index] = (gloss, english_gloss(text, kept=1) or gloss)
            plain = [glosses[i][1] for i in sorted(glosses)]
            vectors = self.encoder.encode([*texts, *plain])
            extra = dict(zip(sorted(glosses), vectors[len(texts):], strict=True))
            rankings = []
            for index, (text, vector) in enumerate(zip(texts, vectors, strict=False)):
                glossed = (glosses[index][0], extra[index]) if index in glosses else None
                own = self.settings.skills.cjk_vector_weight if cjk_share(text) > 0.3 else None
                rankings.append(self._atomic_tier(text, vector, context, k, own, glossed))
            reads.derived[key] = rankings
        return list(reads.derived[key])

    def _with_task_cover(self, request: str, group: GroupChoice, context: RequestContext,
                         k: int, weight: float | None) -> GroupChoice:
        """``group`` with ``tasks_covered`` in its explanation, (how many, of how many), and
        ``first_task_covered``, when the request states tasks in turn: a task is covered when
        its best skill is one of the group's steps (``unsupported`` reads them)."""
        segments = task_segments(request_parts(request))
        if len(segments) < 2:
            return group
        rankings = self._part_rankings(request, context, k, weight)
        members = set(group.members)
        hits = [bool(ranking) and ranking[0].id in members for ranking in
                self._segment_rankings(request, segments, rankings, context, k, weight)]
        return replace(group, explanation=replace(
            group.explanation, tasks_covered=(sum(hits), len(segments)),
            first_task_covered=hits[0]))

    def _segment_rankings(self, request: str, segments: Sequence[Sequence[int]],
                          rankings: Sequence[list[ScoredSkill]], context: RequestContext,
                          k: int, weight: float | None) -> list[list[ScoredSkill]]:
        """The skill ranking of each task of a request (a part added with a sequencing word,
        with the list that follows it): a one-part task reuses its part's ranking, a longer
        one is ranked as a request of its own."""
        parts = request_parts(request)
        key = ("segments", request, k, weight, context.recent_skills)
        reads = self._reads
        if key not in reads.derived:
            texts = {i: ", ".join(parts[p].text for p in segment)
                     for i, segment in enumerate(segments) if len(segment) > 1}
            vectors = dict(zip(texts, self.encoder.encode(list(texts.values())), strict=True)) \
                if texts else {}
            out = []
            for i, segment in enumerate(segments):
                if i not in texts:
                    out.append(list(rankings[segment[0]]))
                    continue
                own = self.settings.skills.cjk_vector_weight if cjk_share(texts[i]) > 0.3 else weight
                out.append(self._atomic_tier(texts[i], vectors[i], context, k, own, None))
            reads.derived[key] = out
        return list(reads.derived[key])

    def _several_tasks(self, request: str, context: RequestContext, k: int,
                       weight: float | None, whole: Sequence[ScoredSkill],
                       ) -> tuple[list[ScoredSkill], tuple[str, ...], int, int] | None:
        """A request that asks for several things ("get the quote, then create the admin";
        "the forecast, the current weather and the time zone") answered part by part, as
        (the ranking, the skills chosen for the parts in the order asked, the number of
        parts, the number of tasks no skill fits); None unless two parts need skills of
        their own.

        Each task the request adds with a sequencing word gets its best skill (when that
        clears ``select_min``); a request without one keeps what its whole ranking selects.
        A clause of a list that none of those answers (none among its first
        ``PART_COVER_DEPTH``) adds its own best skill when that clears ``select_min`` and
        ``part_ratio`` of the best part's, and the whole request ranks it among its first
        ``part_whole_depth`` and it fits the whole request (``fits``)."""
        rankings = self._part_rankings(request, context, k, weight)
        if not rankings:
            return None
        best_part = max((r[0].score for r in rankings if r), default=0.0)
        floor = self.settings.plan.part_ratio * best_part
        parts = request_parts(request)
        # Tasks are what the request adds with "then", "also", "after that": each such
        # segment (its part and the list after it) gets its best skill, as a request of its
        # own would. A request with no sequencing word is one task: what the whole request
        # selects stays, each skill answering the part that ranks it highest.
        segments = task_segments(parts)
        chosen: dict[str, int] = {}  # skill id -> the part it answers (0-based)
        missing = 0  # tasks no skill fits
        agreed = {s.id: s for s in whole[:self.settings.plan.part_whole_depth]}
        segment_rankings: list[Sequence[ScoredSkill]] = []
        if len(segments) > 1:
            segment_rankings = list(self._segment_rankings(
                request, segments, rankings, context, k, weight))
            for segment, ranking in zip(segments, segment_rankings, strict=True):
                found = self._with_known_partner(ranking, list(chosen))
                # A task no skill fits ("then translate it" where nothing translates) gets
                # none: a skill matched by the task's few words alone is no answer to it.
                if found is None or found[1] < self.settings.skills.minimum \
                        or not self.fits(found[0]):
                    missing += 1
                elif found[0].id not in chosen:
                    chosen[found[0].id] = segment[0]
        else:
            for sid in self.select(list(whole)):
                ranks = [(next((d for d, s in enumerate(ranking) if s.id == sid), k), index)
                         for index, ranking in enumerate(rankings)]
                depth, index = min(ranks)
                ranking = rankings[index]
                # The whole request's pick answers the part that ranks it highest; where that
                # part ranks another skill first, which fits the whole request, the part's own
                # first answers it ("plot monthly revenue trends": a plotting library, not the
                # fiscal data set whose words match "revenue").
                if depth > 0 and ranking and ranking[0].id not in chosen and \
                        ranking[0].id in agreed and self.fits(agreed[ranking[0].id]):
                    sid = ranking[0].id
                chosen.setdefault(sid, index)
        # Then the clauses of a list ("the forecast, the current weather and the time zone")
        # that no chosen skill answers (none among their first ``PART_COVER_DEPTH``).
        heads = {segment[0] for segment in segments}
        for index, ranking in enumerate(rankings):
            if index in heads and len(segments) > 1:
                continue
            near = [s.id for s in ranking[:PART_COVER_DEPTH]]
            if any(sid in chosen for sid in near):
                continue
            found = self._with_known_partner(ranking, list(chosen))
            if found is None:
                continue
            best, evidence = found
            # A part is short: its words and embedding come near many skills, so its skill
            # must fit by the hybrid score (``select_min``), and a clause may be a detail of
            # the task ("... and version 2.3"): the skill must also be among the whole
            # request's first and fit it ("its time zone" alone comes near a transcript
            # parser; the request about the weather does not).
            if evidence >= max(floor, self.settings.skills.minimum) and best.id not in chosen \
                    and best.id in agreed and self.fits(agreed[best.id]):
                chosen[best.id] = index
        # A part's best may be a same-named copy: what it selects is what the name runs.
        answering: dict[str, int] = {}
        for sid, winner in self._answering_of(list(chosen)).items():
            answering.setdefault(winner, chosen[sid])
        chosen = answering
        # Tasks stated in turn of which one alone found a skill ("extract the text from this
        # pdf, then translate it" where nothing translates) get that skill alone: the whole
        # request's cut would add the first task's look-alikes, not the missing task.
        if len(chosen) < 2 and not (len(segments) > 1 and chosen):
            return None
        tops = tuple(sorted(chosen, key=lambda sid: chosen[sid]))
        by_id = {s.id: s for s in whole}
        # A task of several parts is ranked as one text: its pick may be in no part's list.
        for ranking in [*rankings, *segment_rankings]:
            for item in ranking:
                by_id.setdefault(item.id, item)
        if any(sid not in by_id for sid in tops):
            for sid, item in self._answering_items([*by_id.values()]).items():
                by_id.setdefault(sid, item)
        tops = tuple(sid for sid in tops if sid in by_id)
        woven: dict[str, ScoredSkill] = {}
        for sid in tops:
            item = by_id[sid]
            woven[sid] = replace(item, explanation=replace(item.explanation,
                                                           task=chosen[sid] + 1))
        every: list[Sequence[ScoredSkill]] = [whole, *rankings]
        for depth in range(k):
            for listed in every:
                if depth < len(listed) and listed[depth].id not in woven:
                    woven[listed[depth].id] = listed[depth]
        return list(woven.values()), tops, len(rankings), missing

    def _answering_items(self, items: Sequence[ScoredSkill]) -> dict[str, ScoredSkill]:
        """For each shadowed skill among ``items`` (a same-named copy), the skill that answers
        for its name, ranked in its place: the selection names what the name runs, which
        may be ranked nowhere itself."""
        answering = self._answering_of([item.id for item in items])
        reads = self._reads
        out: dict[str, ScoredSkill] = {}
        for item in items:
            winner = answering[item.id]
            record = reads.node(winner) if winner != item.id else None
            if record is not None and record.id not in out:
                node = SkillNode(record)
                out[record.id] = replace(item, id=record.id, name=record.name,
                                         description=node.description,
                                         available=node.available)
        return out

    def _with_known_partner(self, ranking: Sequence[ScoredSkill], chosen: Sequence[str],
                            ) -> tuple[ScoredSkill, float] | None:
        """The skill a part of the request gets, and its evidence: its best-ranked one,
        unless one of its first ``PARTNER_DEPTH`` is known to run after a skill chosen for
        an earlier part (FLOWS_TO from it: a group's step or a declared prerequisite),
        which counts ``partner_boost`` more ("zip these files and email them to Bob": the
        mail skill a group sends archives with)."""
        if not ranking:
            return None
        partners: set[str] = set()
        boost = self.settings.plan.partner_boost
        if chosen and boost:
            reads = self._reads
            reads.fetch(neighbors=chosen)
            partners = {edge.dst for sid in chosen
                        for edge, _ in reads.neighbors(sid, [EdgeKind.FLOWS_TO])
                        if edge.src == sid}
        scored = [(s.score + (boost if boost and s.id in partners else 0.0), s)
                  for s in ranking[:PARTNER_DEPTH]]
        evidence, best = max(scored, key=lambda t: t[0])
        return best, evidence

    def _extra_tasks(self, request: str, group: GroupChoice, context: RequestContext, k: int,
                     weight: float | None) -> list[ScoredSkill]:
        """Skills the group lacks for a part of a request that asks for several things ("...
        and email it. Also zip the PDF"), by the rule of :meth:`_several_tasks`: a part that
        ranks one of the group's steps among its first ``PART_COVER_DEPTH`` is the group's;
        another gets its best skill when that fits on its own and reaches ``part_ratio`` of
        the best part's. The group then stays as it is, with these beside it (a group
        adjusted: ``shape == "composed"``)."""
        members = set(group.members)
        extras: dict[str, ScoredSkill] = {}
        rankings = self._part_rankings(request, context, k, weight)
        floor = self.settings.plan.part_ratio * max((r[0].score for r in rankings if r), default=0.0)
        parts = request_parts(request)
        for index, ranking in enumerate(rankings, 1):
            if parts[index - 1].join is not Join.SEQUENCE:
                # A group chosen for the request covers its lists ("finalize my cart and have
                # it delivered"); only a task the request adds with "then", "after that" or
                # "also" goes beside it.
                continue
            if not ranking or not self.fits(ranking[0]) or ranking[0].score < floor:
                continue
            if members & {s.id for s in ranking[:PART_COVER_DEPTH]}:
                continue
            top = ranking[0]
            if top.id in extras:
                continue
            extras[top.id] = replace(top, explanation=replace(top.explanation, task=index,
                                                              beside_group=group.name))
        return list(extras.values())

    def _planned(self, request: str, selected: Sequence[str], skills: Sequence[ScoredSkill],
                 declared: tuple[tuple[str, str], ...],
                 ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], str]:
        """The selected skills ordered by the planner (``graph/planner.py``): declared
        prerequisites, the order the request states, data flow between their contracts and
        the transitions runs took; (order, edges, a sentence saying what ordered them)."""
        reads = self._reads
        reads.fetch(nodes=selected, neighbors=selected)
        parts = request_parts(request)
        part_of = {s.id: s.explanation.task - 1 for s in skills
                   if s.id in selected and s.explanation.task is not None}
        contracts = {sid: contract_of(record) for sid in selected
                     if (record := reads.node(sid)) is not None}
        observed: dict[tuple[str, str], float] = {}
        inside = set(selected)
        for sid in selected:
            for edge, other in reads.neighbors(sid, [EdgeKind.CO_USED]):
                if other.id not in inside or not edge.props:
                    continue
                forward, backward = edge.props.get("forward"), edge.props.get("backward")
                if forward:
                    observed[(edge.src, edge.dst)] = float(forward)
                if backward:
                    observed[(edge.dst, edge.src)] = float(backward)
        plan = plan_edges(selected, part_of=part_of if len(parts) > 1 else None, parts=parts,
                          declared=declared, data_flow=data_flow_edges(contracts),
                          observed=observed, referenced=self.settings.plan.referenced)
        if not plan.edges:
            return tuple(selected), (), ""
        kinds = list(dict.fromkeys(EVIDENCE_WORDS[plan.why[e]] for e in plan.edges))
        joined = {sid for edge in plan.edges for sid in edge}

        def named(ids: Iterable[str]) -> list[str]:
            return [record.name for sid in ids if (record := reads.node(sid)) is not None]

        # A skill no edge joins runs on its own: the arrows say so only of those that wait.
        alone = named(sid for sid in plan.order if sid not in joined)
        apart = (f", with {_join_words(alone)} on {'its' if len(alone) == 1 else 'their'} own"
                 if alone else "")
        return plan.order, plan.edges, (
            f"composed: {' -> '.join(named(s for s in plan.order if s in joined))}{apart}, "
            f"ordered by {_join_words(kinds)}")

    def _in_stated_order(self, request: str, group: GroupChoice, context: RequestContext,
                         k: int, weight: float | None) -> GroupChoice:
        """``group`` with an edge between two of its steps turned round when the request
        states the other order ("change my Monday alarm, then set a new one"): each part's
        best-ranked member answers that part, and a sequencing word between two parts puts
        the earlier part's member first. A group run in two orders in history keeps only
        the commoner; the request knows which one it wants."""
        parts = request_parts(request)
        if not stated_order(parts) or not group.edges:
            return group
        members = set(group.members)
        part_of: dict[str, int] = {}
        for index, ranking in enumerate(self._part_rankings(request, context, k, weight)):
            best = next((s for s in ranking if s.id in members), None)
            if best is not None and best.id not in part_of:
                part_of[best.id] = index
        names = dict(zip(group.members, group.member_names, strict=False))
        by_name = {name: sid for sid, name in names.items()}
        turned = []
        changed = False
        after = next_answered(part_of.values())
        for a, b in group.edges:
            ia, ib = part_of.get(by_name.get(a, a)), part_of.get(by_name.get(b, b))
            if ia is not None and ib is not None and after.get(ib) == ia \
                    and sequenced(parts, ib, ia):
                turned.append((b, a))
                changed = True
            else:
                turned.append((a, b))
        if not changed:
            return group
        return replace(group, edges=tuple(turned), explanation=replace(
            group.explanation, order="as the request states it"))

    def _with_prerequisites(self, selected: Sequence[str], skills: list[ScoredSkill],
                            ) -> tuple[tuple[str, ...], list[ScoredSkill],
                                       tuple[tuple[str, str], ...]]:
        """The dependency closure of the selected skills: their declared prerequisites (and
        theirs), at most ``closure_max`` of them, each placed before the skill that needs it
        in the selection, with its reason. In the ranking each selected skill is followed by
        its own closure (and the companions of its prerequisites, see ``_companions``)
        before the next selected skill.

        A toolbox that gained prerequisites is *composed*: its ``edges`` say which result
        feeds which skill."""
        from skillgrove.graph.learning import acyclic_edges, topological_order

        budget = self.settings.plan.closure
        if budget is None or budget <= 0:
            return tuple(selected), skills, ()
        chosen = set(selected)
        records: dict[str, NodeRecord] = {}
        needed_by: dict[str, str] = {}
        # Breadth first, each skill's prerequisites in the order its author listed them: the
        # nearest and first-named prerequisites are the likeliest needed, and they are the
        # ones kept when the budget runs out.
        found: list[tuple[str, str, int]] = []  # (prerequisite, dependent, depth)
        blocks: list[tuple[str, list[str]]] = []
        self._reads.fetch(nodes=selected, neighbors=selected)
        for sid in selected:
            record = self._reads.node(sid)
            if record is None:
                continue
            records[sid] = record
            own: list[str] = []
            frontier = [sid]
            depth = 0
            while frontier:
                depth += 1
                self._reads.fetch(neighbors=frontier)
                following: list[str] = []
                for node in frontier:
                    for other in self._prerequisites(node):
                        if other.id not in chosen and len(needed_by) >= budget:
                            continue
                        found.append((other.id, node, depth))
                        if other.id in chosen:
                            continue
                        chosen.add(other.id)
                        records[other.id] = other
                        needed_by[other.id] = records[node].name
                        own.append(other.id)
                        following.append(other.id)
                frontier = following
            blocks.append((sid, own))
        if not needed_by:
            return tuple(selected), skills, ()
        # Declared dependencies may loop (a getter and its setter naming each other): the
        # nearer edge wins, and the toolbox stays a DAG.
        nearest: dict[tuple[str, str], int] = {}
        for a, b, depth in found:
            nearest[(a, b)] = min(depth, nearest.get((a, b), depth))
        edges = acyclic_edges(nearest, {e: -d for e, d in nearest.items()}, list(chosen))
        deepest_first = [pid for _, own in blocks for pid in reversed(own)]
        order = topological_order([*deepest_first, *selected], edges)
        by_id = {s.id: s for s in skills}
        top = skills[0].score if skills else 0.0

        def scored(pid: str) -> ScoredSkill:
            record = records[pid]
            old = by_id.get(pid)
            notes = replace(old.explanation if old else SkillExplanation(),
                            prerequisite_of=needed_by[pid])
            return ScoredSkill(pid, record.name, old.score if old else top,
                               SkillNode(record).description,
                               SkillNode(record).available, notes)

        companions = self._companions(list(needed_by), chosen, top, records)
        after: dict[str, list[ScoredSkill]] = {}
        for companion in companions:
            after.setdefault(str(companion.explanation.companion_of_id), []).append(
                companion)
        woven: list[ScoredSkill] = []
        for sid, own in blocks:
            if sid in by_id:
                woven.append(by_id[sid])
            for pid in own:  # each companion right after the prerequisite it acts on
                woven.append(scored(pid))
                woven.extend(after.get(pid, ()))
        placed = {s.id for s in woven}
        rest = [s for s in skills if s.id not in placed]
        return order, woven + rest, tuple(dict.fromkeys(edges))

    def _prerequisites(self, sid: str) -> list[NodeRecord]:
        """The skills ``sid`` declares it depends on, in the order it names them."""
        found = [(int(edge.props.get("position", 0)), other.name, other)
                 for edge, other in self._reads.neighbors(sid, [EdgeKind.FLOWS_TO])
                 if edge.dst == sid and edge.props.get("declared")]
        return [other for _, _, other in sorted(found, key=lambda t: (t[0], t[1]))]

    def _companions(self, prerequisites: Sequence[str], chosen: set[str], score: float,
                    records: Mapping[str, NodeRecord]) -> list[ScoredSkill]:
        """Skills that act on what a prerequisite of the toolbox reads: a declared dependent
        of it, the one most like it (cosine of their texts, at least ``companion_min``),
        whose own prerequisites are all in the toolbox (the setter of a status its getter
        reads). They are ranked right after the toolbox, not selected: likely next steps."""
        reads = self._reads
        reads.fetch(vectors=prerequisites, neighbors=prerequisites)
        dependents = [other.id for pid in prerequisites
                      for edge, other in reads.neighbors(pid, [EdgeKind.FLOWS_TO])
                      if edge.src == pid and edge.props.get("declared") and other.id not in chosen]
        reads.fetch(vectors=dependents, neighbors=dependents)
        found: dict[str, tuple[float, NodeRecord, str]] = {}
        for pid in prerequisites:
            base = self._reads.vector(pid)
            if base is None:
                continue
            scored: list[tuple[float, NodeRecord]] = []
            for edge, other in self._reads.neighbors(pid, [EdgeKind.FLOWS_TO]):
                if edge.src != pid or not edge.props.get("declared") or other.id in chosen:
                    continue
                vector = self._reads.vector(other.id)
                if vector is not None:
                    scored.append((float(np.dot(base, vector)), other))
            scored.sort(key=lambda t: (-t[0], t[1].name))
            for cosine, other in scored[:3]:
                if cosine < self.settings.plan.companion_min:
                    break
                needs = {e.src for e, _ in self._reads.neighbors(other.id, [EdgeKind.FLOWS_TO])
                         if e.dst == other.id and e.props.get("declared")}
                if needs <= chosen:
                    if cosine > found.get(other.id, (0.0,))[0]:
                        found[other.id] = (cosine, other, pid)
                    break
        ranked = sorted(found.values(), key=lambda t: (-t[0], t[1].name))
        return [ScoredSkill(record.id, record.name, score,
                            SkillNode(record).description,
                            SkillNode(record).available,
                            SkillExplanation(companion_of=records[pid].name,
                                             companion_of_id=pid, similar=round(weight, 4)))
                for weight, record, pid in ranked[: self.settings.plan.companions_max]]
