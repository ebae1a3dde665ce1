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

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from skillgrove.graph.embeddings import Encoder, Vectors
from skillgrove.graph.glossary import english_gloss
from skillgrove.graph.indexer import GENERATION_KEY
from skillgrove.graph.model import (
    Edge,
    EdgeKind,
    NodeKind,
    NodeRecord,
    SkillNode,
    demotion,
)
from skillgrove.graph.router import ROUTER_DIGEST_KEY, ROUTER_KEY, GroupRouter
from skillgrove.graph.stages import (
    DEFAULT_SETTINGS,
    FITTED_KEY,
    GroupSettings,
    Settings,
)
from skillgrove.graph.stages.groups import GroupRules, StandIn
from skillgrove.graph.stages.plan import PlanRules
from skillgrove.graph.stages.skills import BALANCED_MOST, balanced_weight, fits, selection_cut
from skillgrove.graph.stages.suggestions import gather, ranked
from skillgrove.graph.store import GraphStore
from skillgrove.graph.text import as_matched, cjk_share
from skillgrove.graph.toolbox import GroupChoice as GroupChoice
from skillgrove.graph.toolbox import RequestContext as RequestContext
from skillgrove.graph.toolbox import ScoredSkill as ScoredSkill
from skillgrove.graph.toolbox import (
    SkillExplanation,
)
from skillgrove.graph.toolbox import Suggestion as Suggestion
from skillgrove.graph.toolbox import Toolbox as Toolbox


class Retriever(GroupRules, PlanRules):
    """Answers a request with a toolbox: the four stages of ``graph.stages`` in turn (candidate
    skills here, the group rules of :class:`stages.groups.GroupRules` and the planner's of
    :class:`stages.plan.PlanRules`, then the suggestions), reading the store through one
    :class:`_Reads` per search."""

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
        """The index's group router (None with fewer than two groups, or when the settings
        turn it off)."""
        return self._router_for(self._refresh())

    def _router_for(self, state: _IndexState) -> GroupRouter | None:
        """The router that chooses among groups: the index's, unless ``groups.router`` is
        off."""
        return state.router if self._groups.router else None

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
            router = alone.group.explanation.belief if alone.group else 0.0
            if (alone.group is not None and router >= self._groups.clear_router) or (
                    alone.group is None and alone.selected):
                return replace(alone, latency_ms=(time.perf_counter() - started) * 1000)
        state = self._refresh()
        query, skill_query = request, as_kinds
        if context.conversation:
            recent = "\n" + " ".join(context.conversation[-2:])
            query, skill_query = query + recent, skill_query + recent
        group_router = self._router_for(state)
        fast = self._fast_route(query, context, group_router)
        group: GroupChoice | None
        reason: str | None = None
        skill_vector: Vectors | None = None
        if fast is not None:
            group, candidates = fast
            hits = {sid: (lexical, None, lexical, None, 0.0) for sid, lexical in
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
            self._search_all_kinds(query, vector, group_router)
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
                skills, tops, parts, missing = several
                answered = (f"{len(tops)} skills answer them" if len(tops) > 1 else
                            "only one skill here answers any of them" if missing else
                            "one skill answers all of them")
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
            if any(sid not in {s.id for s in skills} for sid in selected):
                # A same-named copy ranked, and the skill that answers for its name did not:
                # that skill is listed in its place, as the selection names it.
                skills = self._listed_in_place(skills, selected)
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
            found = state.memo[key]
        else:
            found = gather(self._reads, anchors, set(anchors))
            if state.memo is not None:
                state.memo[key] = found
        suggestions = ranked(self._reads, found, self.settings.suggestions, skill_vector)
        return Toolbox(request, group, reason, tuple(skills), tuple(selected),
                       tuple(suggestions), tuple(candidates),
                       (time.perf_counter() - started) * 1000, edges)


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


    def _hybrid(self, kind: NodeKind, query: str, vector: Any, k: int,
                weight: float) -> dict[str, tuple[float, float, float]]:
        """id -> (hybrid score, cosine, lexical) for the vector and lexical candidates, the
        embedding counting ``weight``."""
        return {nid: (weight * cosine + (1 - weight) * lex, cosine, lex)
                for nid, (cosine, lex) in self._evidence(kind, query, vector, k).items()}

    def _evidence(self, kind: NodeKind, query: str, vector: Any, k: int,
                  ) -> dict[str, tuple[float, float]]:
        """id -> (cosine, lexical) for the vector and lexical candidates."""
        found = self._reads.hybrid_searches(query, vector, {kind: k}, {kind: k})
        lexical, dense = dict(found[0][kind]), dict(found[1][kind])
        self._reads.fetch(vectors=[nid for nid in lexical if nid not in dense])
        out: dict[str, tuple[float, float]] = {}
        for nid in {*lexical, *dense}:
            cosine = dense.get(nid)
            if cosine is None:
                stored = self._reads.vector(nid)
                cosine = float(stored @ vector) if stored is not None else 0.0
            out[nid] = (cosine, lexical.get(nid, 0.0))
        return out

    def _skill_weight(self, query: str, vector: Any) -> float:
        """The embedding's share of a skill's score for this request: the setting, or balanced
        over the request's skill candidates."""
        weight = self.settings.skills.vector_weight
        if weight is not None:
            return weight
        return balanced_weight(self._evidence(NodeKind.SKILL, query, vector,
                                              self.settings.skills.candidates).values())

    def _hybrid_one(self, nid: str, vector: Any, weight: float | None, lexical: float = 0.0,
                    ) -> tuple[float, float, float]:
        stored = self._reads.vector(nid)
        cosine = float(stored @ vector) if stored is not None else 0.0
        w = self._groups.vector_weight if weight is None else weight
        return w * cosine + (1 - w) * lexical, cosine, lexical


    # -- skills -------------------------------------------------------------------------------

    def _atomic_tier(self, query: str, vector: Any, context: RequestContext, k: int,
                     weight: float | None = None, glossed: tuple[str, Any] | None = None,
                     ) -> list[ScoredSkill]:
        """``glossed``: the English gloss of a Chinese request and its vector. Each skill then
        scores the better of the request as written (a Chinese skill's own words) and its
        gloss, matched as English is (an English skill's)."""
        skill_weight = self.settings.skills.vector_weight if weight is None else weight
        candidates = self.settings.skills.candidates
        evidence = self._evidence(NodeKind.SKILL, query, vector, candidates)
        share = balanced_weight(evidence.values()) if skill_weight is None else skill_weight
        hits: dict[str, _Evidence] = {
            sid: (share * cosine + (1 - share) * lex, cosine, lex, None, share)
            for sid, (cosine, lex) in evidence.items()}
        if glossed is not None:
            # A gloss is every dictionary sense of every word, most of them wrong for the
            # sentence: how far its words spread the candidates is no measure of them, so it
            # is matched at the set share, or at equal shares where that is balanced.
            text, gloss_vector = glossed
            gloss_share = self.settings.skills.vector_weight
            gloss_share = BALANCED_MOST if gloss_share is None else gloss_share
            for sid, (score, cosine, lex) in self._hybrid(
                    NodeKind.SKILL, text, gloss_vector, candidates, gloss_share).items():
                if sid not in hits or score > hits[sid][0]:
                    hits[sid] = (score, cosine, lex, text, gloss_share)
        return self._rank_skills(hits, context, k, cjk=weight is not None)

    def _adjusted(self, score: float, recently_used: bool, demoted: bool) -> float:
        """A skill's score with the recent-use boost and the quality filter's demotion."""
        if recently_used:
            score += self.settings.skills.recent_boost
        if demoted:
            score *= self.settings.demote_factor
        return score

    def _rank_skills(self, hits: Mapping[str, _Evidence], context: RequestContext, k: int,
                     cjk: bool = False) -> list[ScoredSkill]:
        """The best ``k`` of ``hits`` (id -> (score, cosine, lexical, gloss, the embedding's
        share)) after the recent-use boost and the quality filter; only those are given an
        explanation (built for the ``k`` kept, not for every candidate: a search scores a
        hundred)."""
        recent = set(context.recent_skills)
        self._reads.fetch(nodes=hits)
        scored: list[tuple[float, str, NodeRecord, _Evidence, bool, str | None]] = []
        for sid, evidence in hits.items():
            score = evidence[0]
            record = self._reads.node(sid)
            if record is None:
                continue
            boosted = record.name in recent or sid in recent
            demoted = demotion(record)
            score = self._adjusted(score, boosted, bool(demoted))
            scored.append((round(score, 4), record.name, record, evidence, boosted, demoted))
        scored.sort(key=lambda t: (-t[0], t[1]))
        out: list[ScoredSkill] = []
        for score, name, record, (_, cosine, lexical, gloss, share), boosted, demoted \
                in scored[:k]:
            notes = SkillExplanation(
                vector=None if cosine is None else round(cosine, 4), lexical=round(lexical, 4),
                vector_share=None if cosine is None else round(share, 4),
                cjk=True if cjk else None, gloss=gloss, recently_used=True if boosted else None,
                demoted=demoted or None, score=score)
            node = SkillNode(record)
            out.append(ScoredSkill(record.id, name, score, node.description, node.available,
                                   notes))
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

    def _listed_in_place(self, skills: Sequence[ScoredSkill],
                         selected: Sequence[str]) -> list[ScoredSkill]:
        """``skills`` with each selected skill missing from it listed just before the
        same-named copy that ranked in its stead (see :meth:`_answering_items`)."""
        missing = set(selected) - {s.id for s in skills}
        with self._reading():
            answering = self._answering_of([s.id for s in skills])
            stand_ins = self._answering_items(skills)
        out: list[ScoredSkill] = []
        for item in skills:
            winner = answering[item.id]
            if winner in missing:
                missing.discard(winner)
                out.append(stand_ins[winner])
            out.append(item)
        return out

    def fits(self, skill: ScoredSkill) -> bool:
        """Whether ``skill`` fits the request on its own (``stages.skills.fits``)."""
        return fits(self.settings.skills, skill.score, skill.explanation)

    def _answering(self, ids: Sequence[str]) -> list[str]:
        """``ids`` with a shadowed skill (a same-named copy, ``data["shadowed_by"]``) replaced
        by the skill that answers for its name: what is selected is what the name runs."""
        answering = self._answering_of(ids)
        return list(dict.fromkeys(answering[sid] for sid in ids))

    def _answering_of(self, ids: Sequence[str]) -> dict[str, str]:
        """Each of ``ids`` -> the skill that answers for its name (itself unless shadowed)."""
        with self._reading():
            reads = self._reads
            reads.fetch(nodes=ids)
            out = {}
            for sid in ids:
                record = reads.node(sid)
                winner = SkillNode(record).shadowed_by if record is not None else None
                out[sid] = winner if winner and reads.node(winner) else sid
        return out


_Evidence = tuple[float, float | None, float, str | None, float]
"""A candidate skill's (hybrid score, cosine (None: not embedded), lexical, the gloss it matched
through, the embedding's share of the score), before the ranking keeps the best."""


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


