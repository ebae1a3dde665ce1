"""Retrieval: the toolbox for a request, from the four stages of ``graph/stages`` run in turn.

1. **Candidate skills** (``stages.skills``): each skill scored by a hybrid of its embedding's
   cosine (all-MiniLM-L6-v2) and BM25 divided by the best score the request could reach (so it
   lies in 0..1 and means the same for every request); a request mostly in Chinese is also
   matched through its English gloss. Skills used recently get a small boost, and the quality
   filter demotes skills that keep failing.
2. **Candidate groups** (``stages.groups``): groups scored by the same hybrid over their text
   and past requests; with two or more groups a **router** (``graph/router.py``), a linear
   discriminant fitted on every example of every group, says *which* group, the similarity
   *whether* it fits (``GroupSettings.threshold``). A chosen group must have every member
   available, and required inputs the context does not hold are listed as ``missing_inputs``.
3. **The planner** (``stages.plan``, ``graph/planner.py``): the group when it covers the tasks
   the request states, the group adapted (a runner-up one or two skills away, a sibling for its
   final step, a task beside it) when it nearly does, else a toolbox composed from the skills
   that fit each task, ordered by the request, data flow, past runs and declared prerequisites.
4. **Suggestions** (``stages.suggestions``): "usually used with", from runs, groups, flows and
   the library's own texts.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from skillgrove.graph.documents import example_id
from skillgrove.graph.embeddings import Encoder, Vectors
from skillgrove.graph.glossary import english_gloss
from skillgrove.graph.indexer import GENERATION_KEY
from skillgrove.graph.model import (
    Edge,
    EdgeKind,
    GroupNode,
    NodeKind,
    NodeRecord,
    SkillNode,
    group_of,
    members_of,
)
from skillgrove.graph.planner import (
    Join,
    Part,
    data_flow_edges,
    plan_edges,
    request_parts,
    stated_order,
)
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, GroupRouter
from skillgrove.graph.stages import (
    DEFAULT_SETTINGS,
    FITTED_KEY,
    FinalSteps,
    GroupSettings,
    Settings,
    Siblings,
)
from skillgrove.graph.stages.skills import fits, selection_cut
from skillgrove.graph.stages.suggestions import suggest
from skillgrove.graph.store import GraphStore
from skillgrove.graph.text import as_matched, cjk_share
from skillgrove.graph.toolbox import (
    NO_GROUPS,
    ExampleMatch,
    GroupExplanation,
    RunnerUp,
    SiblingMatch,
    SkillExplanation,
)
from skillgrove.graph.toolbox import GroupChoice as GroupChoice
from skillgrove.graph.toolbox import RequestContext as RequestContext
from skillgrove.graph.toolbox import ScoredSkill as ScoredSkill
from skillgrove.graph.toolbox import Suggestion as Suggestion
from skillgrove.graph.toolbox import Toolbox as Toolbox


class Retriever:
    def __init__(self, store: GraphStore, encoder: Encoder,
                 settings: Settings | None = None) -> None:
        """``settings``: None, the ones ``skillgrove index`` fitted on the library's history
        and stored with the index (``stages.FITTED_KEY``), else the defaults."""
        self.store = store
        self.encoder = encoder
        self._given = settings
        self._use(settings or DEFAULT_SETTINGS)
        self._state = _IndexState()
        self._words = _WordVectors(encoder)

    def _use(self, settings: Settings) -> None:
        self.settings = settings
        # The group stage's settings where its helpers read them; whether the stage runs at
        # all is ``settings.groups is None``.
        self._groups = settings.groups or GroupSettings()

    def _refresh(self) -> _IndexState:
        """The router, the fitted settings and the memo of the index as it is now: one
        metadata read per search while the index is unchanged (``index_generation``), the
        router reloaded only when its digest changed. A store not written by
        ``index_library`` has no memo."""
        state = self._state
        generation = self.store.get_meta(GENERATION_KEY) or ""
        if generation and generation == state.generation:
            if state.memo is not None and len(state.memo) > 4096:
                state.memo.clear()
            return state
        if self._given is None:
            fitted = self.store.get_meta(FITTED_KEY) if generation else None
            self._use(_fitted(fitted))
        key = self.store.get_meta(ROUTER_DIGEST_KEY) or ""
        router = state.router
        if key != state.router_key:
            text = self.store.get_meta(ROUTER_KEY) if key else None
            router = GroupRouter.from_text(text) if text else None
        self._state = _IndexState(generation, key, router, {} if generation else None)
        return self._state

    def router(self) -> GroupRouter | None:
        """The index's group router (None with fewer than two groups)."""
        return self._refresh().router

    @property
    def _reads(self) -> _Reads:
        """The store as the current search reads it (each thing once; see :class:`_Reads`);
        outside one, a memo of its own."""
        reads = _SEARCH_READS.get()
        return reads if reads is not None and reads.store is self.store else _Reads(self.store)

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """The reads of one search (and the searches it makes), memoized together."""
        reads = _SEARCH_READS.get()
        if reads is not None and reads.store is self.store:
            yield
            return
        token = _SEARCH_READS.set(_Reads(self.store))
        try:
            yield
        finally:
            _SEARCH_READS.reset(token)

    def search(self, request: str, context: RequestContext | None = None, k: int = 10,
               ) -> Toolbox:
        """The toolbox for ``request``."""
        with self._reading():
            return self._search(request, context, k)

    def _search(self, request: str, context: RequestContext | None, k: int) -> Toolbox:
        started = time.perf_counter()
        context = context or RequestContext()
        # Skills are matched on the request with its addresses as their kinds (``as_matched``);
        # groups on its words as written, as the router learned them from past requests (on
        # ToolLens, routing the rewritten text cost a point of set F1).
        as_kinds = as_matched(request)
        stand_in: StandIn | None = None
        if context.conversation:
            # The conversation breaks ties; it never overrides a request that clearly names
            # its task (a group the router is sure of, or skills that fit on their own).
            alone = self.search(request, replace(context, conversation=()), k)
            router = (alone.group.explanation.router if alone.group.explanation.router
                      is not None else 1.0) if alone.group else 0.0
            if (alone.group is not None and router >= self._groups.clear_router) or (
                    alone.group is None and alone.selected):
                return replace(alone, latency_ms=(time.perf_counter() - started) * 1000)
        state = self._refresh()
        query, skill_query = request, as_kinds
        if context.conversation:
            recent = "\n" + " ".join(context.conversation[-2:])
            query, skill_query = query + recent, skill_query + recent
        fast = self._fast_route(query, context, state.router)
        group: GroupChoice | None
        reason: str | None = None
        if fast is not None:
            group, candidates = fast
            hits = {sid: (lexical, SkillExplanation(lexical=lexical)) for sid, lexical in
                    self._reads.text_search(NodeKind.SKILL, skill_query, k)}
            skills = self._rank_skills(hits, context, k)
        else:
            weight = self.settings.skills.cjk_vector_weight if cjk_share(request) > 0.3 else None
            gloss = english_gloss(request) if weight is not None and \
                self.settings.skills.gloss else None
            glossed: tuple[str, Any] | None = None
            if gloss:
                # The embedding reads a plainer sentence, one sense a word; BM25 gets two.
                plain = english_gloss(request, kept=1) or gloss
                vector, gloss_vector = self.encoder.encode([query, plain])
                glossed = (gloss, gloss_vector)
                skill_query, skill_vector = query, vector
            elif skill_query == query:
                vector = skill_vector = self.encoder.encode([query])[0]
            else:
                vector, skill_vector = self.encoder.encode([query, skill_query])
            self._search_all_kinds(query, vector, state.router)
            grouped = self.settings.groups is not None
            group, reason, candidates = self._group_tier(
                request, query, vector, context, state, weight) if grouped else (None, None, [])
            skills = self._atomic_tier(skill_query, skill_vector, context, k, weight, glossed)
            if group is None and glossed is not None and grouped:
                group, candidates, reason = self._glossed_group(
                    request, glossed, context, state, skills, group, candidates, reason)
            if group is not None and candidates:
                group = self._near_miss(group, candidates, query, vector, context, weight)
                if weight is None:
                    stand_in = self._stand_in(group, candidates, query, vector)
                    if stand_in is not None:
                        reason, group = stand_in.reason, None
            if group is not None:
                group = self._with_task_cover(request, group, context, k, weight)
                reason = self.one_skill_fits_better(group, skills, request) or self.unsupported(
                    group, skills, candidates)
                if reason is not None:
                    group = None
        if group is not None:
            skills = self._close_runner_ups_first(group, candidates, skills, k)
        tops: tuple[str, ...] = ()
        if stand_in is not None:
            tops = stand_in.members
            placed = set(stand_in.members)
            skills = [*self._scored(stand_in.members, skills, stand_in.notes),
                      *(s for s in skills if s.id not in placed)]
        elif group is None and fast is None and self.settings.plan.parts:
            several = self._several_tasks(as_kinds, context, k, weight, skills)
            if several is not None:
                skills, tops, parts = several
                answered = f"{len(tops)} skills answer them" if len(tops) > 1 else \
                    "only one skill here answers any of them"
                reason = (reason + "; " if reason else "") + (
                    f"the request asks for {parts} things; {answered}")
        selected: tuple[str, ...]
        if group is not None:
            selected = group.members
            if fast is None and self.settings.plan.extend_groups and self.settings.plan.parts:
                extras = self._extra_tasks(request, group, context, k, weight)
                if extras:
                    selected = group.members + tuple(e.id for e in extras)
                    listed = {e.id for e in extras}
                    skills = [*extras, *(s for s in skills if s.id not in listed)]
        else:
            selected = tops or tuple(self.select(skills))
        edges: tuple[tuple[str, str], ...] = ()
        if stand_in is not None:
            # What history ran, with the sibling's part: its own prerequisites are the ones
            # renamed, and a closure would add what those runs did without.
            edges = stand_in.edges
        elif group is None and selected:
            selected, skills, edges = self._with_prerequisites(selected, skills)
        elif group is None and skills:
            # Nothing fits well enough to select, but the best candidate is still shown with
            # what it would need.
            _, skills, _ = self._with_prerequisites((skills[0].id,), skills)
        if group is None and len(selected) > 1 and self.settings.plan.order:
            selected, edges, plan_notes = self._planned(as_kinds, selected, skills, edges)
            if plan_notes:
                reason = (reason + "; " if reason else "") + plan_notes
        elif group is not None and fast is None and self.settings.plan.order:
            group = self._in_stated_order(request, group, context, k, weight)
        anchors = list(group.members) if group is not None else list(selected)
        # Companions of what the answer selects, not the selection itself. A skill that also
        # ranks high stays a companion: the ranking is not the answer an agent reads (the
        # compact toolbox lists the selection), and the companion says why it goes along.
        key = ("suggest", tuple(anchors))
        if state.memo is not None and key in state.memo:
            suggestions = state.memo[key]
        else:
            suggestions = suggest(self._reads, anchors, set(anchors), self.settings.suggestions)
            if state.memo is not None:
                state.memo[key] = suggestions
        return Toolbox(request, group, reason, tuple(skills), tuple(selected),
                       tuple(suggestions), tuple(candidates),
                       (time.perf_counter() - started) * 1000, edges)

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
                       ) -> tuple[list[ScoredSkill], tuple[str, ...], int] | None:
        """A request that asks for several things ("get the quote, then create the admin";
        "the forecast, the current weather and the time zone") answered part by part, as
        (the ranking, the skills chosen for the parts in the order asked, the number of
        parts); None unless two parts need skills of their own.

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
        agreed = {s.id: s for s in whole[:self.settings.plan.part_whole_depth]}
        if len(segments) > 1:
            for segment, ranking in zip(segments, self._segment_rankings(
                    request, segments, rankings, context, k, weight), strict=True):
                found = self._with_known_partner(ranking, list(chosen))
                # A task no skill fits ("then translate it" where nothing translates) gets
                # none: a skill matched by the task's few words alone is no answer to it.
                if found is not None and found[1] >= self.settings.skills.minimum \
                        and found[0].id not in chosen and self.fits(found[0]):
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
        # Tasks stated in turn of which one alone found a skill ("extract the text from this
        # pdf, then translate it" where nothing translates) get that skill alone: the whole
        # request's cut would add the first task's look-alikes, not the missing task.
        if len(chosen) < 2 and not (len(segments) > 1 and chosen):
            return None
        tops = tuple(sorted(chosen, key=lambda sid: chosen[sid]))
        by_id = {s.id: s for s in whole}
        for ranking in rankings:
            for item in ranking:
                by_id.setdefault(item.id, item)
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
        return list(woven.values()), tops, len(rankings)

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

    def _near_miss(self, group: GroupChoice, candidates: Sequence[tuple[str, float]],
                   query: str, vector: Any, context: RequestContext,
                   weight: float | None) -> GroupChoice:
        """The chosen group, or a likely alternative that differs from it by one or two skills
        when the request's evidence for those skills says so.

        Learned toolboxes often differ by one skill (the same prerequisites, another target).
        For each runner-up the router gives at least ``near_miss_min_belief``, the gain is the
        evidence (single-skill score) of the skills it adds minus that of the skills it drops,
        each measured against the chosen group's mean member evidence; the best gain above
        ``near_miss_margin`` wins."""
        margin = self.settings.plan.near_miss
        if margin is None:
            return group
        skill_weight = self.settings.skills.vector_weight if weight is None else weight
        lexical = dict(self._reads.text_search(NodeKind.SKILL, query,
                                               self.settings.skills.candidates))
        memo: dict[str, float] = {}

        def evidence(sid: str) -> float:
            if sid not in memo:
                memo[sid] = self._hybrid_one(sid, vector, skill_weight,
                                             lexical.get(sid, 0.0))[0]
            return memo[sid]

        chosen = set(group.members)
        if not chosen:
            return group
        reads = self._reads
        reads.fetch(nodes=[gid for gid, _ in candidates[1:6]])
        reads.fetch(nodes=[m for gid, _ in candidates[1:6] for m in members_of(reads.node(gid))],
                    vectors=[*group.members, *(m for gid, _ in candidates[1:6]
                                               for m in members_of(reads.node(gid)))])
        level = sum(evidence(m) for m in chosen) / len(chosen)
        best: tuple[float, NodeRecord, float] | None = None
        for gid, belief in candidates[1:6]:
            if gid == group.id or belief < self.settings.plan.near_miss_min_belief:
                continue
            record = self._reads.node(gid)
            if record is None or _demotion(record) or self._unavailable_members(record):
                continue
            members = set(GroupNode(record).members)
            added, dropped = members - chosen, chosen - members
            if (not added and not dropped) or len(added) + len(dropped) > 2:
                continue
            gain = (sum(evidence(m) - level for m in added)
                    - sum(evidence(m) - level for m in dropped))
            if gain > margin and (best is None or gain > best[0]):
                best = (gain, record, belief)
        if best is None:
            return group
        gain, record, belief = best
        explanation = replace(group.explanation, near_miss_of=group.name,
                              near_miss_gain=round(gain, 4), router=round(belief, 4))
        return _choice(record, group.score, group.explanation.threshold or 0.0, explanation,
                       context)

    def _stand_in(self, group: GroupChoice, candidates: Sequence[tuple[str, float]],
                  query: str, vector: Any) -> StandIn | None:
        """The chosen group with a sibling in place of its target (the final step nearest the
        request), when the request names the sibling's part (a word at least
        ``STAND_IN_MIN_SIMILARITY`` like it) and no candidate group ends with it (see
        ``PlanSettings.stand_in``); None otherwise. Other final steps are left
        alone: a setter no step waits for is no target."""
        margin = self.settings.plan.stand_in
        if margin is None:
            return None
        reads = self._reads
        record = reads.node(group.id)
        finals = _final_members(record)
        reads.fetch(vectors=finals)
        nearness = {f: float(v @ vector) for f in finals if (v := reads.vector(f)) is not None}
        terms = request_terms(query)
        if not nearness or not terms:
            return None
        final = max(nearness, key=lambda f: (nearness[f], f))
        covered = {m for gid, _ in candidates for m in _final_members(reads.node(gid))}
        hits = [sid for sid, _ in reads.text_search(NodeKind.SKILL, query,
                                                    self.settings.skills.candidates)
                if sid not in group.members and sid not in covered]
        reads.fetch(nodes=[final, *hits])
        target = reads.node(final)
        if target is None:
            return None
        mine = name_words([target.name])
        pairs: list[tuple[str, str, str]] = []  # (sibling, the target's part, the sibling's)
        for sid in hits:
            record = reads.node(sid)
            theirs = name_words([record.name]) if record is not None else ()
            if overlap_of(mine, theirs) < STAND_IN_OVERLAP:
                continue
            old = " ".join(w for w in mine if w not in theirs)
            new = " ".join(w for w in theirs if w not in mine)
            if old and new:
                pairs.append((sid, old, new))
        if not pairs:
            return None
        nearest = self._words.nearest(
            terms, list(dict.fromkeys(p for _, old, new in pairs for p in (old, new))))
        gain, sibling, old, new = max((nearest[new][0] - nearest[old][0], sid, old, new)
                                      for sid, old, new in pairs)
        if gain <= margin or nearest[new][0] < STAND_IN_MIN_SIMILARITY:
            return None
        renamed = self._renamed(group.members, final, sibling, old.split(), new.split())
        members = tuple(renamed.get(m, m) for m in group.members)
        names = {m: reads.node(m).name for m in {*group.members, *members}  # type: ignore[union-attr]
                 if reads.node(m) is not None}
        by_name = {name: sid for sid, name in names.items()}
        edges = tuple((renamed.get(by_name.get(a, a), by_name.get(a, a)),
                       renamed.get(by_name.get(b, b), by_name.get(b, b))) for a, b in group.edges)
        word = nearest[new][1]
        replaced = ", ".join(f"'{names.get(n, n)}' for '{names.get(o, o)}'"
                             for o, n in renamed.items())
        reason = (f"no group does this: '{group.name}' with {replaced} (the request's "
                  f"'{word}' is nearer '{new}' than '{old}')")
        return StandIn(members, edges, reason, StandInNotes(group.name, word, new, old,
                                                            round(gain, 4)))

    def _renamed(self, members: Sequence[str], final: str, sibling: str, old: Sequence[str],
                 new: Sequence[str]) -> dict[str, str]:
        """Member id -> the id of the skill named like it with ``new`` words for ``old`` ones
        (the final step -> its sibling; `amazon-user-login` -> `ebay-user-login` where that
        skill exists)."""
        reads = self._reads
        out = {final: sibling}
        for member in members:
            record = reads.node(member)
            if member == final or record is None:
                continue
            words = list(name_words([record.name]))
            at = next((i for i in range(len(words) - len(old) + 1)
                       if words[i: i + len(old)] == list(old)), None)
            if at is None:
                continue
            wanted = tuple([*words[:at], *new, *words[at + len(old):]])
            found = reads.text_search(NodeKind.SKILL, " ".join(wanted), 5)
            reads.fetch(nodes=[sid for sid, _ in found])
            for sid, _ in found:
                other = reads.node(sid)
                if other is not None and name_words([other.name]) == wanted and sid not in members:
                    out[member] = sid
                    break
        return out

    def _scored(self, ids: Sequence[str], skills: Sequence[ScoredSkill],
                notes: StandInNotes) -> list[ScoredSkill]:
        """``ids`` as ranked skills: their scores in ``skills`` (else the best there), with
        ``notes`` added to their explanations."""
        by_id = {s.id: s for s in skills}
        top = skills[0].score if skills else 0.0
        out = []
        for sid in ids:
            record = self._reads.node(sid)
            if record is None:
                continue
            old = by_id.get(sid)
            out.append(ScoredSkill(sid, record.name, old.score if old else top,
                                   SkillNode(record).description,
                                   SkillNode(record).available,
                                   replace(old.explanation if old else SkillExplanation(),
                                           **asdict(notes))))
        return out

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
                          observed=observed)
        if not plan.edges:
            return tuple(selected), (), ""
        kinds = list(dict.fromkeys(EVIDENCE_WORDS[plan.why[e]] for e in plan.edges))
        names = [record.name for sid in plan.order if (record := reads.node(sid)) is not None]
        return plan.order, plan.edges, (f"composed: {' -> '.join(names)}, ordered by "
                                        f"{_join_words(kinds)}")

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
        for a, b in group.edges:
            ia, ib = part_of.get(by_name.get(a, a)), part_of.get(by_name.get(b, b))
            if ia is not None and ib is not None and ib + 1 == ia \
                    and parts[ia].join is Join.SEQUENCE:
                turned.append((b, a))
                changed = True
            else:
                turned.append((a, b))
        if not changed:
            return group
        return replace(group, edges=tuple(turned), explanation=replace(
            group.explanation, order="as the request states it"))

    def _glossed_group(self, request: str, glossed: tuple[str, Any], context: RequestContext,
                       state: _IndexState, skills: Sequence[ScoredSkill],
                       group: GroupChoice | None, candidates: list[tuple[str, float]],
                       reason: str | None,
                       ) -> tuple[GroupChoice | None, list[tuple[str, float]], str | None]:
        """For a request mostly in Chinese that no group fits as written: the group its
        English gloss fits, held to the English threshold, when the best skill for the
        request is one of its steps (a dictionary's senses are noisy: the skills must agree).
        Otherwise what the request as written gave."""
        text, vector = glossed
        found, _, found_candidates = self._group_tier(request, text, vector, context, state,
                                                      None)
        if found is None or not skills or skills[0].id not in found.members:
            return group, candidates, reason
        return replace(found, explanation=replace(found.explanation, gloss=text)), \
            found_candidates, None

    def unsupported(self, group: GroupChoice, skills: Sequence[ScoredSkill],
                    candidates: Sequence[tuple[str, float]] = ()) -> str | None:
        """Why ``group`` does not answer the request, or None.

        The skill that fits the request best (``fits``) must be in a group: when no candidate
        group holds it (``top_in_a_group``), no group covers the request, and a toolbox
        composed around that skill answers instead (a task history has not seen: the
        groups found share its prerequisites, not its target). And one of the group's steps
        must be among the first ``group_support_depth`` skills the request ranks: a group
        matched by the domain's words alone ("search a title, then fetch its details" for
        every request about films) is left for the skills the request names."""
        cover = group.explanation.tasks_covered
        if self.settings.plan.task_cover is not None and cover is not None:
            if cover[0] < self.settings.plan.task_cover * cover[1]:
                return (f"the group '{group.name}' covers {cover[0]} of the {cover[1]} tasks "
                        "the request states")
            if self.settings.plan.first_task \
                    and group.explanation.first_task_covered is False:
                # The later tasks act on what the first makes ("..., then email it"): a
                # group that does not do the first is another workflow that ends alike.
                return (f"the group '{group.name}' does not do the first of the {cover[1]} "
                        "tasks the request states")
        if not skills or not self.fits(skills[0]) or skills[0].explanation.gloss is not None:
            return None
        top = skills[0]
        lead = self._groups.top_lead
        if lead is not None and top.id not in group.members and group.score < top.score:
            reads = self._reads
            reads.fetch(nodes=[gid for gid, _ in candidates])
            held = {m for gid, _ in candidates for m in members_of(reads.node(gid))}
            steps = set(group.members)
            nearest = max((s.score for s in skills if s.id in steps), default=0.0)
            if top.id not in held and nearest < lead * top.score:
                return (f"no group holds '{top.name}', the skill that fits the request best; "
                        f"'{group.name}' shares other steps with it")
        depth = self._groups.support_depth
        if depth is None or set(group.members) & {s.id for s in skills[:depth]}:
            return None
        return (f"the group '{group.name}' fits the words, but none of its steps is among the "
                f"{depth} skills that fit the request best (first: '{top.name}')")

    def one_skill_fits_better(self, group: GroupChoice, skills: Sequence[ScoredSkill],
                               request: str = "") -> str | None:
        """Why the answer is one skill rather than ``group``, or None when the group stands.

        A group wins only when the request needs what the group does. It does not when the
        best single skill explains the request at least as well as the whole group does
        (``single_skill_margin``), nor when that skill is one of the group's steps, nearly as
        good as the group and far ahead of every other step (``single_step_lead``): either
        way the group's other steps are work nobody asked for. A request that states several
        tasks in turn ("check the invoice and add it to the ledger, then email finance") asks
        for more than one skill: there the group's cover of those tasks decides
        (``unsupported``), not this rule."""
        if not skills or not self.fits(skills[0]) or (request and stated_order(
                request_parts(request))):
            return None
        top = skills[0]
        if top.explanation.gloss is not None:
            # Matched through a dictionary's translation, against a group matched on the
            # request's own words: the translation ranks skills, it does not overrule.
            return None
        lead = single_step_lead(top, group, skills)
        inside = "one of its steps" if top.id in group.members else "not one of its steps"
        extra = len(group.members) - (1 if top.id in group.members else 0)
        margin, step_lead = self._groups.one_skill_margin, self._groups.step_lead
        if margin is not None and top.score >= group.score + margin:
            why = f"scores {top.score:.2f}, the group '{group.name}' {group.score:.2f}"
        elif (step_lead is not None and lead is not None and lead >= step_lead
              and top.score >= self._groups.step_ratio * group.score):
            why = (f"scores {top.score:.2f}, {lead:.2f} ahead of every other step of "
                   f"'{group.name}' ({group.score:.2f})")
        else:
            return None
        return f"one skill fits: '{top.name}' ({inside}) {why}; its other {extra} steps are not asked for"

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

    def _fast_route(self, query: str, context: RequestContext, router: GroupRouter | None,
                    ) -> tuple[GroupChoice, list[tuple[str, float]]] | None:
        """The group, chosen from the request's words alone, when the router's lexical half is
        at least ``fast_route_confidence`` sure: the request is then never embedded.

        Only where every request is routed to a group (``group_threshold`` not above 0: the
        similarity bar needs the embedding) and the chosen group needs no second look
        (not demoted, every member available); anything else takes the full path."""
        least = self._groups.fast_route
        if least is None or self._groups.threshold > 0 \
                or self._groups.support_depth is not None or self._groups.top_lead is not None:
            return None
        if router is None or router.lexical is None:
            return None
        ranked = router.lexical_top(query, 10)
        confidence, best_id = ranked[0]
        if confidence < least:
            return None
        reads = self._reads
        reads.fetch(nodes=[gid for _, gid in ranked])
        reads.fetch(nodes=[m for _, gid in ranked for m in members_of(reads.node(gid))])
        record = self._reads.node(best_id)
        if record is None or _demotion(record) or self._unavailable_members(record):
            return None
        explanation = GroupExplanation(router=round(confidence, 4), route="lexical")
        choice = _choice(record, confidence, self._groups.threshold, explanation, context)
        return choice, [(gid, round(p, 4)) for p, gid in ranked]

    def _close_runner_ups_first(self, group: GroupChoice,
                                candidates: Sequence[tuple[str, float]],
                                skills: list[ScoredSkill], k: int) -> list[ScoredSkill]:
        """Put the members of groups that scored almost as well as the chosen one at the head of
        the single-skill ranking: when two learned toolboxes differ by one skill, the other
        one's skill is the likeliest missing piece.

        With a router, "almost as well" is its belief: a skill's share is the summed
        posterior of the other groups holding it, and every skill with at least
        ``runner_up_min`` leads, likeliest first. Without one, groups scoring at least
        ``runner_up_ratio`` of the chosen group's similarity lead, in their order."""
        routed = group.explanation.router is not None
        chosen = set(group.members)
        share: dict[str, float] = {}
        source: dict[str, tuple[str, float]] = {}
        cutoff = group.score * self._groups.runner_up_ratio
        reads = self._reads
        reads.fetch(nodes=[gid for gid, _ in candidates[1:]])
        reads.fetch(nodes=[m for gid, _ in candidates[1:] for m in members_of(reads.node(gid))])
        for rank, (gid, score) in enumerate(candidates[1:]):
            if not routed and (score < cutoff or score <= 0):
                break
            record = self._reads.node(gid)
            for member in members_of(record):
                if member in chosen:
                    continue
                # Similarity mode keeps group order: earlier groups' members come first.
                share[member] = share.get(member, 0.0) + (score if routed else -rank)
                source.setdefault(member, (gid, score))
        if routed:
            share = {m: v for m, v in share.items() if v >= self._groups.runner_up_min}
        by_id = {s.id: s for s in skills}
        front: list[ScoredSkill] = []
        for member in sorted(share, key=lambda m: -share[m]):
            node = self._reads.node(member)
            if node is None:
                continue
            base = by_id.get(member)
            gid, score = source[member]
            explanation = replace(base.explanation if base else SkillExplanation(),
                                  runner_up_group=RunnerUp(gid, score))
            front.append(ScoredSkill(member, node.name, base.score if base else 0.0,
                                     SkillNode(node).description,
                                     SkillNode(node).available, explanation))
        ahead = {f.id for f in front}
        rest = [s for s in skills if s.id not in ahead]
        return (front + rest)[: max(k, len(front))]

    # -- groups -------------------------------------------------------------------------------

    def _search_all_kinds(self, query: str, vector: Any, router: GroupRouter | None) -> None:
        """Runs the lexical and vector searches of the request that the group and atomic tiers
        will make, each kind at the depth it will ask for, in one batch each."""
        skills, groups = self.settings.skills.candidates, self._groups.candidates
        examples = groups if router is not None else self._groups.example_candidates
        limits = {NodeKind.SKILL: skills, NodeKind.GROUP: groups,
                  NodeKind.EXAMPLE: examples}
        self._reads.hybrid_searches(query, vector, limits, {NodeKind.SKILL: skills}
                                    if router is not None else limits)

    def _fetch_routed(self, gids: Sequence[str], best_id: str, query: str, vector: Any,
                      state: _IndexState) -> None:
        """With a router, once the ranked groups and the skill candidates are read: the
        records and vectors the rest of the search reads of what they name (the chosen
        group's examples, every ranked group's members) and the vectors of the lexical-only
        candidates."""
        reads = self._reads
        _, lexical_only = reads.candidates(NodeKind.SKILL, query, vector,
                                           self.settings.skills.candidates)
        record = reads.node(best_id)
        eids = self._example_ids(best_id, record, state) if record is not None else []
        members = [m for gid in gids for m in members_of(reads.node(gid))]
        reads.fetch(nodes=[*eids, *members],
                    vectors=[*eids, best_id, *lexical_only,
                             *(members if self.settings.plan.near_miss is not None else ())])

    def _fetch_similar(self, query: str, vector: Any) -> None:
        """Without a router: the records and vectors of every kind's candidates, in two waves:
        the candidates; then the groups their examples name, the candidate groups' members
        and the vectors of the lexical-only candidates."""
        reads = self._reads
        groups, groups_lexical = reads.candidates(NodeKind.GROUP, query, vector,
                                                  self._groups.candidates)
        examples, examples_lexical = reads.candidates(NodeKind.EXAMPLE, query, vector,
                                                      self._groups.example_candidates)
        skills, skills_lexical = reads.candidates(NodeKind.SKILL, query, vector,
                                                  self.settings.skills.candidates)
        reads.fetch(nodes=[*groups, *examples, *skills])
        named = [gid for gid in (group_of(reads.node(eid)) for eid in examples) if gid]
        members = [m for gid in groups for m in members_of(reads.node(gid))]
        listed = set(groups)
        reads.fetch(nodes=[*named, *members],
                    vectors=[*groups_lexical, *examples_lexical, *skills_lexical,
                             *(gid for gid in named if gid not in listed)])

    def _group_tier(self, request: str, query: str, vector: Any, context: RequestContext,
                    state: _IndexState, weight: float | None = None,
                    ) -> tuple[GroupChoice | None, str | None, list[tuple[str, float]]]:
        router = state.router
        confidence: float | None = None
        if router is None:
            self._fetch_similar(query, vector)
            whole = self._hybrid(NodeKind.GROUP, query, vector, self._groups.candidates,
                                 weight=weight)
            examples = self._hybrid(NodeKind.EXAMPLE, query, vector, self._groups.example_candidates,
                                    weight)
            fits = self._group_fits(whole, examples, set(whole), vector, weight)
            if not fits:
                return None, NO_GROUPS, []
            scored = sorted(((score, gid, why) for gid, (score, why) in fits.items()),
                            key=lambda t: (-t[0], t[1]))
            candidates = [(gid, round(score, 4)) for score, gid, _ in scored[:5]]
            best_score, best_id, explanation = scored[0]
            runner_up = scored[1][0] if len(scored) > 1 else 0.0
        else:
            ranked = router.top(query, vector, 10)
            skills, _ = self._reads.candidates(NodeKind.SKILL, query, vector,
                                               self.settings.skills.candidates)
            self._reads.fetch(nodes=[*(gid for _, gid in ranked), *skills])
            for index, (p, gid) in enumerate(ranked):
                record = self._reads.node(gid)
                if record is not None and _demotion(record):
                    ranked[index] = (p * self.settings.demote_factor, gid)
            ranked.sort(key=lambda t: (-t[0], t[1]))
            candidates = [(gid, round(p, 4)) for p, gid in ranked]
            confidence, best_id = ranked[0]
            targeted = self._by_final_steps(ranked, query, vector, weight)
            if targeted is not None:
                confidence, best_id = targeted[0], targeted[1]
            self._fetch_routed([gid for _, gid in ranked], best_id, query, vector, state)
            # Only the chosen group's similarity is needed (for the threshold): its examples
            # are the only ones scored.
            examples = self._examples_of(best_id, query, vector, state, weight)
            lexical = dict(self._reads.text_search(NodeKind.GROUP, query,
                                                   self._groups.candidates))
            whole = {best_id: self._hybrid_one(best_id, vector, weight,
                                               lexical.get(best_id, 0.0))}
            fits = self._group_fits(whole, examples, {best_id}, vector, weight)
            best_score, explanation = fits[best_id]
            explanation = replace(explanation, router=round(confidence, 4))
            if targeted is not None:
                if self._groups.final_steps is not None:
                    explanation = replace(explanation, final_step_evidence=round(targeted[2], 4))
                sibling = targeted[3]
                if sibling is not None:
                    explanation = replace(explanation, sibling_evidence=SiblingMatch(
                        sibling.part, sibling.word, round(sibling.lead, 4)))
                if best_id != ranked[0][1]:
                    explanation = replace(explanation, router_first=self._reads.node(
                        ranked[0][1]).name)  # type: ignore[union-attr]
            runner_up = -1.0  # the router ranks; the margin rule is for similarity alone
        threshold = self._groups.threshold if weight is None else self._groups.cjk_threshold
        if best_score < threshold:
            name = self._reads.node(best_id).name  # type: ignore[union-attr]
            return None, (f"no group fits: the best, '{name}', scores {best_score:.2f}, below "
                          f"the threshold {threshold:.2f}"), candidates
        if weight is not None and threshold > 0:
            # The embedding knows little of CJK text, so a CJK request needs some lexical
            # evidence for the group (its text or its best example), not vectors alone.
            best_lexical = max(explanation.lexical or 0.0, explanation.example.lexical
                               if explanation.example is not None else 0.0)
            if best_lexical < self._groups.cjk_min_lexical:
                name = self._reads.node(best_id).name  # type: ignore[union-attr]
                return None, (f"no group fits: the best, '{name}', shares almost no words with "
                              f"the request (lexical {best_lexical:.2f}, needs "
                              f"{self._groups.cjk_min_lexical:.2f} for a request in CJK script)"), \
                    candidates
        if confidence is not None and confidence < self._groups.router_min_confidence:
            name = self._reads.node(best_id).name  # type: ignore[union-attr]
            return None, (f"no group is clearly meant: the likeliest, '{name}', has only "
                          f"{confidence:.0%} of the router's belief (needs "
                          f"{self._groups.router_min_confidence:.0%})"), candidates
        if best_score - runner_up < self._groups.margin:
            return None, "two groups fit equally well; falling back to skills", candidates
        record = self._reads.node(best_id)
        assert record is not None
        unavailable = self._unavailable_members(record)
        if unavailable:
            return None, (f"group '{record.name}' fits, but its skills are unavailable here: "
                          + "; ".join(unavailable)), candidates
        return _choice(record, best_score, threshold, explanation, context), None, candidates

    def _by_final_steps(self, ranked: Sequence[tuple[float, str]], query: str, vector: Any,
                        weight: float | None,
                        ) -> tuple[float, str, float, SiblingEvidence | None] | None:
        """(router belief, group id, evidence, its sibling evidence) of the router candidate
        that scores best once the request's evidence for each candidate's final steps (see
        ``GroupSettings.final_steps``) and its words for the part that sets siblings apart
        (``GroupSettings.siblings``) are weighed in; None when neither applies."""
        final, kin = self._groups.final_steps, self._groups.siblings
        siblings = self._sibling_evidence(ranked, query, kin.overlap) \
            if weight is None and kin is not None else {}
        if (final is None and not siblings) or not ranked:
            return None
        pairs = self._final_step_pairs(ranked, query, vector) if final is not None else {}
        share = (final or FinalSteps(0.0)).vector_share if weight is None else weight
        at, evidence = weigh_final_steps(
            [(belief, pairs.get(gid, [])) for belief, gid in ranked],
            final.weight if final is not None else 0.0, share,
            [kin.weight * siblings[gid].lead if kin is not None and gid in siblings else 0.0
             for _, gid in ranked])
        return ranked[at][0], ranked[at][1], evidence, siblings.get(ranked[at][1])

    def _sibling_evidence(self, ranked: Sequence[tuple[float, str]], query: str,
                          overlap: float) -> dict[str, SiblingEvidence]:
        """Group id -> how much better than its siblings the request's words match the part
        of its final steps' names that sets it apart (see ``GroupSettings.siblings``);
        empty when the router's first candidates are not siblings."""
        if len(ranked) < 2:
            return {}
        top = [gid for _, gid in ranked[:SIBLING_CANDIDATES]]
        reads = self._reads
        finals = {gid: _final_members(reads.node(gid)) for gid in top}
        reads.fetch(nodes=[m for ids in finals.values() for m in ids])
        words = {gid: name_words(r.name for m in ids if (r := reads.node(m)) is not None)
                 for gid, ids in finals.items()}
        parts = distinguishing_parts([words[gid] for gid in top], overlap)
        if len(parts) < 2:
            return {}
        request_words = request_terms(query)
        if not request_words:
            return {}
        best = self._words.nearest(request_words, list(dict.fromkeys(parts.values())))
        mean = sum(best[p][0] for p in parts.values()) / len(parts)
        return {top[i]: SiblingEvidence(phrase, best[phrase][1], best[phrase][0] - mean)
                for i, phrase in parts.items()}

    def _final_step_pairs(self, ranked: Sequence[tuple[float, str]], query: str, vector: Any,
                          ) -> dict[str, list[tuple[float, float]]]:
        """Group id -> the (cosine, lexical) evidence of each of its final steps."""
        reads = self._reads
        finals = {gid: _final_members(reads.node(gid)) for _, gid in ranked}
        reads.fetch(vectors=[m for ids in finals.values() for m in ids])
        lexical = dict(reads.text_search(NodeKind.SKILL, query,
                                         self.settings.skills.candidates))
        return {gid: [self._hybrid_one(m, vector, 1.0, lexical.get(m, 0.0))[1:] for m in ids]
                for gid, ids in finals.items()}

    def final_step_evidence(self, request: str,
                            ) -> list[tuple[float, tuple[str, ...], list[tuple[float, float]],
                                            float]]:
        """For calibration: the router's top ten for ``request`` as (belief, members, the
        (cosine, lexical) evidence of each final step, the sibling evidence's lead), so that
        ``target_weight``, ``target_vector_weight`` and ``sibling_weight`` can be tried
        without searching again."""
        with self._reading():
            state = self._refresh()
            if state.router is None:
                return []
            vector = self.encoder.encode([request])[0]
            ranked = state.router.top(request, vector, 10)
            self._reads.fetch(nodes=[gid for _, gid in ranked])
            pairs = self._final_step_pairs(ranked, request, vector)
            siblings = self._sibling_evidence(
                ranked, request, (self._groups.siblings or Siblings(0.0)).overlap)
            return [(belief, GroupNode(record).members, pairs[gid],
                     siblings[gid].lead if gid in siblings else 0.0)
                    for belief, gid in ranked if (record := self._reads.node(gid)) is not None]

    def _examples_of(self, gid: str, query: str, vector: Any, state: _IndexState,
                     weight: float | None) -> dict[str, tuple[float, float, float]]:
        """The hybrid scores of one group's examples (no search over every example: their
        vectors are read by id, the lexical side from the usual BM25 candidates)."""
        record = self._reads.node(gid)
        if record is None:
            return {}
        w = self._groups.vector_weight if weight is None else weight
        lexical = dict(self._reads.text_search(NodeKind.EXAMPLE, query,
                                               self._groups.candidates))
        out: dict[str, tuple[float, float, float]] = {}
        eids = self._example_ids(gid, record, state)
        self._reads.fetch(vectors=eids)
        for eid in eids:
            stored = self._reads.vector(eid)
            if stored is None:
                continue
            cosine = float(stored @ vector)
            lex = lexical.get(eid, 0.0)
            out[eid] = (w * cosine + (1 - w) * lex, cosine, lex)
        return out

    @staticmethod
    def _example_ids(gid: str, record: NodeRecord, state: _IndexState) -> list[str]:
        memo = state.memo
        eids: list[str] | None = memo.get(("examples", gid)) if memo is not None else None
        if eids is None:
            eids = [example_id(gid, str(text)) for text in GroupNode(record).examples]
            if memo is not None:
                memo[("examples", gid)] = eids
        return eids

    def _group_fits(self, whole: Mapping[str, tuple[float, float, float]],
                    examples: Mapping[str, tuple[float, float, float]], gids: set[str],
                    vector: Any, weight: float | None,
                    ) -> dict[str, tuple[float, GroupExplanation]]:
        """Group id -> (similarity, explanation): the better of the group's own text and its
        best example (or their blend, see ``whole_weight``), halved when demoted. Scores the
        groups in ``gids`` plus those with example hits."""
        reads = self._reads
        reads.fetch(nodes=[*gids, *examples])
        named = {group_of(reads.node(eid)) for eid in examples} - {""}
        reads.fetch(nodes=named, vectors=[gid for gid in named | gids if gid not in whole])
        per_group: dict[str, list[tuple[float, float, float, str]]] = {}
        for eid, hit in examples.items():
            record = self._reads.node(eid)
            gid = group_of(record)
            if gid and record is not None:
                per_group.setdefault(gid, []).append((*hit, record.text))
        best_example: dict[str, tuple[float, float, float, str]] = {}
        for gid, hits in per_group.items():
            hits.sort(key=lambda h: -h[0])
            top = hits[: self._groups.example_top]
            best_example[gid] = (sum(h[0] for h in top) / len(top), *hits[0][1:])
        out: dict[str, tuple[float, GroupExplanation]] = {}
        for gid in gids | set(best_example):
            record = self._reads.node(gid)
            if record is None:
                continue
            score, cosine, lexical = whole.get(gid) or self._hybrid_one(gid, vector, weight)
            example: ExampleMatch | None = None
            matched: str | None = None
            if gid in best_example:
                ex_score, ex_cos, ex_lex, ex_text = best_example[gid]
                example = ExampleMatch(ex_text, round(ex_cos, 4), round(ex_lex, 4))
                if self._groups.whole_weight > 0:
                    score = self._groups.whole_weight * score + (1 - self._groups.whole_weight) * ex_score
                elif ex_score > score:
                    score = ex_score
                    matched = "example"
            demoted = _demotion(record)
            if demoted:
                score *= self.settings.demote_factor
            out[gid] = (score, GroupExplanation(
                vector=round(cosine, 4), lexical=round(lexical, 4), example=example,
                matched=matched, demoted=demoted or None, score=round(score, 4)))
        return out

    def _hybrid(self, kind: NodeKind, query: str, vector: Any, k: int,
                weight: float | None = None) -> dict[str, tuple[float, float, float]]:
        """id -> (hybrid score, cosine, lexical) for the vector and lexical candidates."""
        w = self._groups.vector_weight if weight is None else weight
        found = self._reads.hybrid_searches(query, vector, {kind: k}, {kind: k})
        lexical, dense = dict(found[0][kind]), dict(found[1][kind])
        self._reads.fetch(vectors=[nid for nid in lexical if nid not in dense])
        out: dict[str, tuple[float, float, float]] = {}
        for nid in {*lexical, *dense}:
            cosine = dense.get(nid)
            if cosine is None:
                stored = self._reads.vector(nid)
                cosine = float(stored @ vector) if stored is not None else 0.0
            lex = lexical.get(nid, 0.0)
            out[nid] = (w * cosine + (1 - w) * lex, cosine, lex)
        return out

    def _hybrid_one(self, nid: str, vector: Any, weight: float | None, lexical: float = 0.0,
                    ) -> tuple[float, float, float]:
        stored = self._reads.vector(nid)
        cosine = float(stored @ vector) if stored is not None else 0.0
        w = self._groups.vector_weight if weight is None else weight
        return w * cosine + (1 - w) * lexical, cosine, lexical

    def _unavailable_members(self, group: NodeRecord) -> list[str]:
        out = []
        self._reads.fetch(nodes=members_of(group))
        for member in GroupNode(group).members:
            record = self._reads.node(member)
            if record is None:
                out.append(f"{member} is not indexed")
            elif not SkillNode(record).available:
                reasons = ", ".join(SkillNode(record).unavailable_reasons)
                out.append(f"{record.name} ({reasons})")
        return out

    # -- skills -------------------------------------------------------------------------------

    def _atomic_tier(self, query: str, vector: Any, context: RequestContext, k: int,
                     weight: float | None = None, glossed: tuple[str, Any] | None = None,
                     ) -> list[ScoredSkill]:
        """``glossed``: the English gloss of a Chinese request and its vector. Each skill then
        scores the better of the request as written (a Chinese skill's own words) and its
        gloss, matched as English is (an English skill's)."""
        skill_weight = self.settings.skills.vector_weight if weight is None else weight
        cjk = True if weight is not None else None
        hits: dict[str, tuple[float, SkillExplanation]] = {
            sid: (score, SkillExplanation(vector=cosine, lexical=lex, cjk=cjk))
            for sid, (score, cosine, lex) in self._hybrid(
                NodeKind.SKILL, query, vector, self.settings.skills.candidates, weight=skill_weight).items()}
        if glossed is not None:
            text, gloss_vector = glossed
            for sid, (score, cosine, lex) in self._hybrid(
                    NodeKind.SKILL, text, gloss_vector, self.settings.skills.candidates,
                    weight=self.settings.skills.vector_weight).items():
                if sid not in hits or score > hits[sid][0]:
                    hits[sid] = (score, SkillExplanation(vector=cosine, lexical=lex, cjk=cjk,
                                                         gloss=text))
        return self._rank_skills(hits, context, k)

    def _rank_skills(self, hits: Mapping[str, tuple[float, SkillExplanation]],
                     context: RequestContext, k: int) -> list[ScoredSkill]:
        """The best ``k`` of ``hits`` (id -> (score, evidence)) after the recent-use boost and
        the quality filter; only those are given an explanation."""
        recent = set(context.recent_skills)
        self._reads.fetch(nodes=hits)
        scored: list[tuple[float, str, NodeRecord, SkillExplanation, bool, str | None]] = []
        for sid, (score, evidence) in hits.items():
            record = self._reads.node(sid)
            if record is None:
                continue
            boosted = record.name in recent or sid in recent
            if boosted:
                score += self.settings.skills.recent_boost
            demoted = _demotion(record)
            if demoted:
                score *= self.settings.demote_factor
            scored.append((round(score, 4), record.name, record, evidence, boosted, demoted))
        scored.sort(key=lambda t: (-t[0], t[1]))
        out: list[ScoredSkill] = []
        for score, name, record, evidence, boosted, demoted in scored[:k]:
            notes = replace(
                evidence, vector=None if evidence.vector is None else round(evidence.vector, 4),
                lexical=None if evidence.lexical is None else round(evidence.lexical, 4),
                recently_used=True if boosted else None, demoted=demoted or None, score=score)
            out.append(ScoredSkill(record.id, name, score,
                                   SkillNode(record).description,
                                   SkillNode(record).available, notes))
        return out

    def select(self, skills: Sequence[ScoredSkill]) -> list[str]:
        """The top skill plus every skill within ``select_ratio`` of its score (at most
        ``select_max``, none below ``select_min``), leaving out substitutes: a skill SIMILAR_TO
        one already selected is an alternative to it, not a second thing the request needs
        (``select_substitutes`` keeps them)."""
        if not skills or not self.fits(skills[0]):
            return []
        top = skills[0].score
        cut = selection_cut(self.settings.skills, top)
        chosen = self._answering([s.id for s in skills[: self.settings.skills.most]
                                  if s.score >= cut])
        if self.settings.skills.substitutes or len(chosen) < 2:
            return chosen
        kept: list[str] = []
        with self._reading():
            reads = self._reads
            reads.fetch(neighbors=chosen)
            for sid in chosen:
                similar = {other.id for _, other in reads.neighbors(sid, [EdgeKind.SIMILAR_TO])}
                if not similar & set(kept):
                    kept.append(sid)
        return kept

    def fits(self, skill: ScoredSkill) -> bool:
        """Whether ``skill`` fits the request on its own (``stages.skills.fits``)."""
        return fits(self.settings.skills, skill.score, skill.explanation)

    def _answering(self, ids: Sequence[str]) -> list[str]:
        """``ids`` with a shadowed skill (a same-named copy, ``data["shadowed_by"]``) replaced
        by the skill that answers for its name: what is selected is what the name runs."""
        with self._reading():
            reads = self._reads
            reads.fetch(nodes=ids)
            out = []
            for sid in ids:
                record = reads.node(sid)
                winner = SkillNode(record).shadowed_by if record is not None else None
                out.append(winner if winner and reads.node(winner) else sid)
        return list(dict.fromkeys(out))


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


class _Reads:
    """What one search reads from the store, each thing once, and in batches where the search
    knows ahead what it will need: on the Neo4j store every read is a round trip to the
    server, and a search asks for the same records again and again (a skill's record for its
    score, for its explanation, for the group it belongs to...).

    Neighbour lists are read whole (every edge kind) and filtered here, so one read serves
    the SIMILAR_TO, FLOWS_TO and suggestion questions about a node. Nothing outlives the
    search: what the index holds may change between two searches."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
        self._nodes: dict[str, NodeRecord | None] = {}
        self._vectors: dict[str, Vectors | None] = {}
        self._neighbors: dict[str, list[tuple[Edge, NodeRecord]]] = {}
        self._text: dict[tuple[NodeKind, str, int], list[tuple[str, float]]] = {}
        self._dense: dict[tuple[NodeKind, bytes, int], list[tuple[str, float]]] = {}
        self.derived: dict[Any, Any] = {}
        """What the search computed from its reads and asks again (each part's ranking)."""

    def fetch(self, nodes: Iterable[str] = (), vectors: Iterable[str] = (),
              neighbors: Iterable[str] = ()) -> None:
        """Reads whatever is not known yet of the records of ``nodes``, the vectors of
        ``vectors`` and the neighbour lists of ``neighbors``: one batched call each."""
        wanted = [nid for nid in dict.fromkeys(nodes) if nid not in self._nodes]
        if wanted:
            found = self.store.nodes_by_id(wanted)
            self._nodes.update({nid: found.get(nid) for nid in wanted})
        wanted = [nid for nid in dict.fromkeys(vectors) if nid not in self._vectors]
        if wanted:
            stored = self.store.vectors(wanted)
            self._vectors.update({nid: stored.get(nid) for nid in wanted})
        wanted = [nid for nid in dict.fromkeys(neighbors) if nid not in self._neighbors]
        if wanted:
            lists = self.store.neighbors_of(wanted)
            for nid in wanted:
                found_list = lists.get(nid, [])
                self._neighbors[nid] = found_list
                for _, other in found_list:
                    self._nodes.setdefault(other.id, other)

    def node(self, node_id: str) -> NodeRecord | None:
        if node_id not in self._nodes:
            self.fetch(nodes=(node_id,))
        return self._nodes[node_id]

    def vector(self, node_id: str) -> Vectors | None:
        if node_id not in self._vectors:
            self.fetch(vectors=(node_id,))
        return self._vectors[node_id]

    def neighbors(self, node_id: str, kinds: Sequence[EdgeKind] | None = None,
                  ) -> list[tuple[Edge, NodeRecord]]:
        if node_id not in self._neighbors:
            self.fetch(neighbors=(node_id,))
        found = self._neighbors[node_id]
        return list(found) if kinds is None else [(e, o) for e, o in found if e.kind in kinds]

    def text_search(self, kind: NodeKind, query: str, k: int) -> list[tuple[str, float]]:
        return self.text_searches(query, {kind: k})[kind]

    def text_searches(self, query: str, limits: Mapping[NodeKind, int],
                      ) -> dict[NodeKind, list[tuple[str, float]]]:
        missing = {kind: k for kind, k in limits.items() if (kind, query, k) not in self._text}
        if missing:
            for kind, hits in self.store.text_searches(query, missing).items():
                self._text[(kind, query, missing[kind])] = hits
        return {kind: self._text[(kind, query, k)] for kind, k in limits.items()}

    def vector_search(self, kind: NodeKind, vector: Vectors, k: int) -> list[tuple[str, float]]:
        return self.vector_searches(vector, {kind: k})[kind]

    def vector_searches(self, vector: Vectors, limits: Mapping[NodeKind, int],
                        ) -> dict[NodeKind, list[tuple[str, float]]]:
        key = np.asarray(vector, dtype=np.float32).tobytes()
        missing = {kind: k for kind, k in limits.items() if (kind, key, k) not in self._dense}
        if missing:
            for kind, hits in self.store.vector_searches(vector, missing).items():
                self._dense[(kind, key, missing[kind])] = hits
        return {kind: self._dense[(kind, key, k)] for kind, k in limits.items()}

    def hybrid_searches(self, query: str, vector: Vectors, text_limits: Mapping[NodeKind, int],
                        vector_limits: Mapping[NodeKind, int],
                        ) -> tuple[dict[NodeKind, list[tuple[str, float]]],
                                   dict[NodeKind, list[tuple[str, float]]]]:
        """:meth:`text_searches` and :meth:`vector_searches` at once: what neither has read
        yet is asked of the store in one call (one round trip on Neo4j)."""
        key = np.asarray(vector, dtype=np.float32).tobytes()
        text = {kind: k for kind, k in text_limits.items() if (kind, query, k) not in self._text}
        dense = {kind: k for kind, k in vector_limits.items()
                 if (kind, key, k) not in self._dense}
        if text or dense:
            lexical, nearest = self.store.hybrid_searches(query, vector, text, dense)
            for kind, hits in lexical.items():
                self._text[(kind, query, text[kind])] = hits
            for kind, hits in nearest.items():
                self._dense[(kind, key, dense[kind])] = hits
        return (self.text_searches(query, text_limits),
                self.vector_searches(vector, vector_limits))

    def candidates(self, kind: NodeKind, query: str, vector: Vectors, k: int,
                   ) -> tuple[list[str], list[str]]:
        """The ids of ``kind`` that a hybrid search of ``k`` finds (vector hits, then lexical
        ones), and the lexical-only ones among them (whose vectors are read by id)."""
        lexical = [nid for nid, _ in self.text_search(kind, query, k)]
        dense = [nid for nid, _ in self.vector_search(kind, vector, k)]
        seen = set(dense)
        only = [nid for nid in lexical if nid not in seen]
        return dense + only, only


_SEARCH_READS: ContextVar[_Reads | None] = ContextVar("skillgrove_search_reads", default=None)
"""The reads of the search running in this thread (or task), shared by its nested searches."""


@dataclass(frozen=True)
class _IndexState:
    generation: str = ""
    router_key: str = ""
    router: GroupRouter | None = None
    memo: dict[Any, Any] | None = None
    """Derived data kept while the index is unchanged: suggestions per set of anchors, a
    group's example ids."""


def _fitted(text: str | None) -> Settings:
    """The fitted settings stored with an index (the defaults when there are none, or when
    they do not read: an index is never unusable for its settings)."""
    if not text:
        return DEFAULT_SETTINGS
    try:
        return Settings.from_json(text)
    except (ValueError, TypeError):
        return DEFAULT_SETTINGS




def single_step_lead(top: ScoredSkill, group: GroupChoice,
                     skills: Sequence[ScoredSkill]) -> float | None:
    """How far ``top``, a step of ``group``, scores ahead of the group's next best step in
    ``skills`` (a step not ranked there counts as 0); None when ``top`` is not a step."""
    if top.id not in group.members:
        return None
    others = [s.score for s in skills if s.id in group.members and s.id != top.id]
    return top.score - max(others, default=0.0)


def _choice(record: NodeRecord, score: float, threshold: float,
            explanation: GroupExplanation, context: RequestContext) -> GroupChoice:
    """The chosen group as the toolbox shows it, with the inputs the context still lacks."""
    missing = tuple(_missing_inputs(record, context))
    explanation = replace(explanation, threshold=threshold)
    if missing:
        explanation = replace(explanation, missing_inputs=missing)
    node = GroupNode(record)
    return GroupChoice(
        id=record.id, name=record.name, score=round(score, 4), members=node.members,
        member_names=node.member_names, edges=node.edges,
        missing_inputs=missing, ready=not missing, explanation=explanation)


BELIEF_FLOOR = 0.01
"""The router's belief counts for at least this much when the final steps' evidence is
weighed against it: its posteriors saturate near 0 and 1 on a few examples per group, and a
candidate it gives 1e-12 should still win when the request plainly asks for its last step."""


def weigh_final_steps(candidates: Sequence[tuple[float, Sequence[tuple[float, float]]]],
                      weight: float, share: float, bonus: Sequence[float] = (),
                      ) -> tuple[int, float]:
    """(index, evidence) of the candidate, given as (router belief, the (cosine, lexical)
    evidence of each final step), with the best ``log(belief) + weight * evidence + bonus``:
    the evidence is its best final step's ``share * cosine + (1 - share) * lexical``, the
    belief floored at ``BELIEF_FLOOR``, the bonus (the weighed sibling evidence) 0 where not
    given; the first of equals wins (the router's order).

    >>> weigh_final_steps([(0.6, [(0.2, 0.0)]), (0.4, [(0.5, 0.0)])], 0.0, 1.0)
    (0, 0.2)
    >>> weigh_final_steps([(0.6, [(0.2, 0.0)]), (0.4, [(0.5, 0.0)])], 0.0, 1.0, [0.0, 1.0])
    (1, 0.5)
    """
    best: tuple[float, int, float] | None = None
    for at, (belief, pairs) in enumerate(candidates):
        evidence = max((share * cosine + (1 - share) * lexical for cosine, lexical in pairs),
                       default=0.0)
        score = math.log(max(belief, BELIEF_FLOOR)) + weight * evidence
        if at < len(bonus):
            score += bonus[at]
        if best is None or score > best[0] + 1e-12:
            best = (score, at, evidence)
    assert best is not None, "no candidates"
    return best[1], best[2]


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

SIBLING_CANDIDATES = 3
"""Siblings are looked for among the router's first three candidates: further down, its
belief is too small for a word to matter, and unrelated groups would blur the comparison."""
_REQUEST_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
_NAME_WORD = re.compile(r"[a-z0-9]+")


class _WordVectors:
    """Vectors of single words and name parts, kept in memory (at most ``limit``): the
    words of requests repeat, and embedding a dozen short texts costs more than the request
    itself."""

    def __init__(self, encoder: Encoder, limit: int = 16384) -> None:
        self.encoder = encoder
        self.limit = limit
        self._kept: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            found = {t: v for t in texts if (v := self._kept.get(t)) is not None}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            fresh = dict(zip(missing, self.encoder.encode(missing), strict=True))
            found.update(fresh)
            with self._lock:
                self._kept.update(fresh)
                while len(self._kept) > self.limit:
                    self._kept.popitem(last=False)
        return np.stack([found[t] for t in texts])

    def nearest(self, terms: Sequence[str], phrases: Sequence[str],
                ) -> dict[str, tuple[float, str]]:
        """Phrase -> (its best cosine with one of ``terms``, that term)."""
        vectors = self.encode([*terms, *phrases])
        similarity = vectors[: len(terms)] @ vectors[len(terms):].T
        rows = similarity.argmax(axis=0)
        return {phrase: (float(similarity[rows[i], i]), terms[int(rows[i])])
                for i, phrase in enumerate(phrases)}


STAND_IN_OVERLAP = 0.5
"""A skill stands in for a final step only when their names share at least half their words."""
STAND_IN_MIN_SIMILARITY = 0.5
"""...and when a word of the request is at least this like the part that sets it apart (the
word itself, a synonym, "Canada" for "country"): a part nothing in the request names is
left to the group."""


@dataclass(frozen=True)
class StandIn:
    """The chosen group with a sibling in place of a final step (see ``Retriever._stand_in``)."""
    members: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    reason: str
    notes: StandInNotes


@dataclass(frozen=True)
class StandInNotes:
    """What the stand-in's members say in their explanations (``SkillExplanation``)."""
    stand_in_for: str
    word: str
    part: str
    instead_of: str
    gain: float


@dataclass(frozen=True)
class SiblingEvidence:
    part: str
    """The words of the group's final steps' names that its siblings' names lack."""
    word: str
    """The request's word nearest that part."""
    lead: float
    """Their similarity less the mean over the siblings' parts."""


def request_terms(text: str) -> list[str]:
    """The words of a request that could name a part, lower-cased, each once: not numbers, not
    lower-case words of one or two letters ("in", "my"; "LA" and "UK" stay). Each is embedded
    on its own, so every word left out saves time.

    >>> request_terms("What's the rent in LA for 2 rooms in 2024? my LA flat")
    ["what's", 'the', 'rent', 'la', 'for', 'rooms', 'flat']
    """
    return list(dict.fromkeys(
        word.lower() for word in _REQUEST_WORD.findall(text)
        if not word.isdigit() and (len(word) > 2 or word.isupper())))


def name_words(names: Iterable[str]) -> tuple[str, ...]:
    """The words of skill names, in order of first appearance.

    >>> name_words(["get-life-expectancy-by-sub-region", "set_wifi_status"])
    ('get', 'life', 'expectancy', 'by', 'sub', 'region', 'set', 'wifi', 'status')
    """
    return tuple(dict.fromkeys(w for name in names for w in _NAME_WORD.findall(name.lower())))


def overlap_of(a: Iterable[str], b: Iterable[str]) -> float:
    """The Jaccard overlap of two sets of words (0 for two empty ones)."""
    first, second = set(a), set(b)
    return len(first & second) / len(first | second) if first | second else 0.0


def distinguishing_parts(candidates: Sequence[Sequence[str]], overlap: float) -> dict[int, str]:
    """Index -> the part that sets a candidate apart, for the first candidate and those whose
    words overlap with its own by at least ``overlap`` (Jaccard): the words it has and none of
    the others in that family has, joined in their order. Empty unless two candidates have
    such a part.

    >>> distinguishing_parts([("get", "rent", "by", "country"), ("get", "rent", "by", "sub",
    ...                       "region"), ("play", "song")], 0.3)
    {0: 'country', 1: 'sub region'}
    """
    if not candidates or not candidates[0]:
        return {}
    family = [i for i, words in enumerate(candidates)
              if words and overlap_of(candidates[0], words) >= overlap]
    parts: dict[int, str] = {}
    for i in family:
        others = {w for j in family if j != i for w in candidates[j]}
        own = [w for w in candidates[i] if w not in others]
        if own:
            parts[i] = " ".join(own)
    return parts if len(parts) >= 2 else {}


def _final_members(group: NodeRecord | None) -> list[str]:
    """The skill ids of a group's final steps: those no other step needs."""
    if group is None:
        return []
    steps = GroupNode(group).steps
    members = list(GroupNode(group).members)
    needed = {need for step in steps for need in step.get("needs", ())}
    out: list[str] = []
    ids = iter(members)
    for step in steps:
        if step.get("kind") != "skill":
            continue
        member = next(ids, None)
        if member is not None and step.get("id") not in needed:
            out.append(member)
    return out


def _missing_inputs(group: NodeRecord, context: RequestContext) -> list[str]:
    return [spec["name"] for spec in GroupNode(group).inputs
            if spec.get("required") and not spec.get("has_default")
            and context.values.get(spec["name"]) in (None, "")]


def _demotion(record: NodeRecord) -> str | None:
    """OpenSpace's quality rule: selected at least twice and never succeeded, or mostly fell
    back."""
    stats = SkillNode(record).stats
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
