"""The toolbox planner: the parts a request asks for, and the order of the skills that do them.

A request often asks for several things: "the forecast for Lyon, its current weather and its
time zone", "find the film, then fetch its reviews", "总结这份报告，然后把关键数字发邮件给团队".
:func:`request_parts` cuts it into those parts; each part needs a skill of its own, and whether
a group covers every part decides between the group and a composed toolbox.

:func:`plan_edges` orders the skills of a composed toolbox. Four kinds of evidence join two
skills, strongest first, and an edge that would close a cycle with stronger ones is dropped:

1. a declared prerequisite (``depends_on``): the dependent cannot run first;
2. the order the request states with a sequencing word ("then", "after that", "然后"): the
   user said so, and it overrides what history usually did;
3. data flow: a declared output of one skill is a required input of the other (by name, with
   compatible types);
4. transitions seen in the run log (``FLOWS_TO`` edges with an ``observed`` count, sets seen
   once included): the direction runs took more often.

Skills that none of these joins but that answer consecutive parts of a request listing them
("A, B and C") are chained in the order listed: a toolbox composed in the order asked.
"Consecutive" counts the parts a skill answers: a sentence of details between two tasks does
not break the order. Where a library's runs record only the data one step takes from another
(``referenced``, fitted on its history), the words of a request join a task to the one before
it only when it refers back to that result ("then email it"); a task merely written after
another runs on its own.

>>> [p.text for p in request_parts("get the forecast for Lyon, then email it to Ana")]
['get the forecast for Lyon', 'email it to Ana']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from itertools import pairwise

from skillgrove.graph.learning import acyclic_edges, topological_order
from skillgrove.graph.text import cjk_share, tokenize


class Join(Enum):
    """How a part follows the one before it."""

    FIRST = "first"
    SEQUENCE = "sequence"
    """After a sequencing word: "then", "after that", "finally", "然后"."""
    LIST = "list"
    """After a comma or "and" of a list: order as written, not as required."""


@dataclass(frozen=True)
class Part:
    text: str
    join: Join


_SEQUENCE = re.compile(
    r"(?:[.!?;,:]\s*|\s+)(?:and then|after that|and after that|and finally|followed by|"
    r"once (?:that is|that's|it is|it's) done)\b[,:]?\s*"
    r"|(?:[.!?;,:]\s*|\s+)then\b[,:]?\s*"
    r"|[.!?;,:]\s*(?:afterwards|next|finally|lastly|subsequently|after which|also|"
    r"additionally|in addition|second|secondly|third|thirdly)\b[,:]?\s*"
    r"|[.!?;:]\s*(?=once\b)"
    r"|[。！？；，,]?\s*(?:然后|接着|之后|随后|最后|再把)[，,]?",
    re.IGNORECASE)
"""Where a request moves on to its next task: a sequencing word ("then", "after that",
"finally", "然后"). "next" or "finally" count only after a clause break ("remind me next
Monday" is one task)."""
_SENTENCE = re.compile(r"(?<=[;])\s+(?=\S)|(?<=[；])\s*(?=\S)")
"""A semicolon ends a list item. A sentence alone does not: most extra sentences give context
("The password is 'coffee4me'.", "Can you find out?"), and as parts of their own they would
each add a skill nobody asked for."""
_LIST = re.compile(
    r"(\s*,(?!\s*-?\d)\s*(?:and\s+|also\s+|plus\s+)?|\s+(?:and also|as well as|plus|and|also)\s+"
    r"|\s*[、，]\s*|和|并且|并|以及|还要|同时)",
    re.IGNORECASE)
"""Where a list moves on to its next item."""
_ITEM = re.compile(r"(?m)^\s*(\d+[.)]|[-*•])\s+")
"""A numbered line (steps in order) or a bulleted one (a list)."""

MIN_PART_TOKENS = {"first": 1, "sequence": 1, "list": 2}
"""A piece becomes a part of its own only with at least this many content words (English
tokens without stopwords; a CJK bigram counts as one): after "then" one word ("send it") is a
task, but a list item needs two ("and Bob" or "and hotels" is an argument of the part before
it, not a task)."""


@lru_cache(maxsize=1024)
def request_parts(request: str) -> tuple[Part, ...]:
    """The parts of ``request``, in the order written: pieces between sequencing words,
    sentences and list separators that have at least ``MIN_PART_TOKENS`` content words each
    (a shorter piece stays with the part before it). A request of one part gives one part.
    Remembered: one search asks for the parts of the same request several times.

    >>> [(p.text, p.join.value) for p in request_parts(
    ...     "Give me the forecast for Lyon, the current weather and the time zone there")]
    [('Give me the forecast for Lyon', 'first'), ('the current weather', 'list'), ('the time zone there', 'list')]
    """
    split = _ITEM.split(request)
    marks = ["", *split[1::2]]
    pieces: list[tuple[str, str, Join]] = []  # (the separator before, the text, the join)
    for line_number, line in enumerate(split[0::2]):
        if not line.strip():
            continue
        numbered = marks[line_number][:1].isdigit()
        for index, step in enumerate(_SEQUENCE.split(line)):
            if not step or not step.strip(" ,.;:"):
                continue
            joined = Join.SEQUENCE if index or (numbered and pieces) else (
                Join.LIST if pieces else Join.FIRST)
            for sentence_index, sentence in enumerate(_SENTENCE.split(step)):
                split = _LIST.split(sentence)
                separators = ["", *split[1::2]]
                for item_index, item in enumerate(split[0::2]):
                    text = item.strip().strip(" ,.;:!?。，；！？")
                    if not text:
                        continue
                    first = sentence_index == 0 and item_index == 0
                    pieces.append((separators[item_index] or " ", text,
                                   joined if first else Join.LIST))
    parts: list[Part] = []
    for separator, text, join in pieces:
        if parts and not _is_task(text, join):
            last = parts[-1]
            parts[-1] = Part(last.text + separator + text, last.join)
            continue
        if parts and not _is_task(parts[-1].text, parts[-1].join):
            # A short piece at the front ("Please," "First") belongs to what follows.
            parts[-1] = Part(parts[-1].text + " " + text, parts[-1].join)
            continue
        parts.append(Part(text, join if parts else Join.FIRST))
    return tuple(parts) or (Part(request.strip(), Join.FIRST),)


_OPENER = re.compile(r"(?:first|firstly|first of all|to begin(?: with)?|to start(?: with)?)\W*",
                     re.IGNORECASE)
"""A word that opens the first task ("Firstly, ..."): part of what follows, not a task."""


def _is_task(text: str, join: Join) -> bool:
    if _OPENER.fullmatch(text.strip()):
        return False
    return len(tokenize(text)) >= MIN_PART_TOKENS[join.value] or _cjk_task(text)


def _cjk_task(text: str) -> bool:
    return cjk_share(text) > 0.3 and len(text) >= 4


def stated_order(parts: Sequence[Part]) -> bool:
    """Whether the request states an order (a sequencing word joins two of its parts)."""
    return any(p.join is Join.SEQUENCE for p in parts)


Edge = tuple[str, str]


@dataclass(frozen=True)
class Plan:
    """A composed toolbox's order: ``order`` lists the skills so that every edge points
    forward; ``why`` says, per edge, which evidence joined it."""

    order: tuple[str, ...]
    edges: tuple[Edge, ...]
    why: Mapping[Edge, str]


STRENGTH = {"declared": 4, "stated": 3, "data flow": 2, "observed": 1, "listed": 0}


def plan_edges(selected: Sequence[str], *, part_of: Mapping[str, int] | None = None,
               parts: Sequence[Part] = (), declared: Sequence[Edge] = (),
               data_flow: Sequence[Edge] = (),
               observed: Mapping[Edge, float] | None = None,
               referenced: bool = False) -> Plan:
    """The edges among ``selected`` skills from the evidence described in the module's
    docstring. ``part_of`` maps a skill to the index of the part of the request it answers
    (see :func:`request_parts`); ``observed`` maps a directed pair to how often runs took it.
    ``referenced``: the words of the request join a part to the one before it only when it
    refers back to an earlier result (:func:`refers_back`), whatever word comes between them;
    a part merely written after another is a task of its own.

    >>> plan_edges(["b", "a"], part_of={"a": 0, "b": 1},
    ...            parts=[Part("x", Join.FIRST), Part("y", Join.SEQUENCE)]).edges
    (('a', 'b'),)
    """
    chosen = list(dict.fromkeys(selected))
    inside = set(chosen)
    part_of = {s: i for s, i in (part_of or {}).items() if s in inside}
    votes: dict[Edge, int] = {}
    why: dict[Edge, str] = {}

    def add(edge: Edge, kind: str, weight: int) -> None:
        a, b = edge
        if a == b or a not in inside or b not in inside:
            return
        if weight > votes.get(edge, -1):
            votes[edge] = weight
            why[edge] = kind

    for edge in declared:
        add(edge, "declared", 1000)
    after = next_answered(part_of.values())
    for a in chosen:
        for b in chosen:
            if a == b or a not in part_of or b not in part_of:
                continue
            i, j = part_of[a], part_of[b]
            # b answers the next part that has a skill, and a sequencing word stands between
            # (or, ``referenced``, b's part refers back to what came before).
            if after.get(i) != j:
                continue
            said = sequenced(parts, i, j)
            if refers_back(parts[j:after.get(j, len(parts))]) if referenced else said:
                add((a, b), "stated" if said else "listed", 800)
    for edge in data_flow:
        add(edge, "data flow", 600)
    for (a, b), count in (observed or {}).items():
        back = (observed or {}).get((b, a), 0.0)
        if count > back:
            add((a, b), "observed", 100 + min(int(count), 399))
    position = {s: (part_of.get(s, len(parts)), i) for i, s in enumerate(chosen)}
    order = sorted(chosen, key=lambda s: position[s])
    kept = acyclic_edges(list(votes), votes, order)
    # Consecutive listed parts that nothing else joins: chain them in the order written.
    components = _components(chosen, kept)
    for a in order:
        for b in order:
            if referenced or a == b or a not in part_of or b not in part_of:
                continue
            if after.get(part_of[a]) == part_of[b] and components[a] != components[b]:
                kept.append((a, b))
                why[(a, b)] = "listed"
                components = _components(chosen, kept)
    ordered = topological_order(order, kept)
    rank = {s: i for i, s in enumerate(ordered)}
    edges = tuple(sorted(kept, key=lambda e: (rank[e[0]], rank[e[1]])))
    return Plan(ordered, edges, {e: why[e] for e in edges})


def next_answered(answered: Iterable[int]) -> dict[int, int]:
    """Each answered part's index -> the index of the next part that has a skill: a part
    between them that no skill answers (a sentence of details: "The subnet should be named
    Subnet A.") does not break the order written.

    >>> next_answered([0, 3, 4, 3])
    {0: 3, 3: 4}
    """
    indexes = sorted(set(answered))
    return dict(pairwise(indexes))


def sequenced(parts: Sequence[Part], i: int, j: int) -> bool:
    """Whether a sequencing word stands between parts ``i`` and ``j`` (``i`` < ``j``): it opens
    one of the parts after ``i`` up to ``j``."""
    return any(part.join is Join.SEQUENCE for part in parts[i + 1:j + 1])


_REFERENCE = re.compile(
    r"\b(?:it|its|them|their|these|those|the same|previous(?:ly)?|above|earlier|results?|"
    r"response|output|obtained|retrieved|returned|received|mentioned|generated|translated)\b"
    r"|它|其|这些|结果|上述|上面的|前面的",
    re.IGNORECASE)
"""Words by which a part refers back to what an earlier one made: "email it", "for the same
location", "the ID obtained from the previous response", "把结果发给我"."""


def refers_back(task: Sequence[Part]) -> bool:
    """Whether a task (the part a skill answers and the parts after it that no other skill
    answers: its details) refers back to an earlier result.

    >>> refers_back([Part("email it to Ana", Join.LIST)])
    True
    >>> refers_back([Part("then set a new alarm", Join.SEQUENCE)])
    False
    """
    return any(_REFERENCE.search(part.text) for part in task)


def _components(nodes: Sequence[str], edges: Sequence[Edge]) -> dict[str, int]:
    """Node -> the id of its weakly connected component."""
    parent = {n: n for n in nodes}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, b in edges:
        parent[root(a)] = root(b)
    ids: dict[str, int] = {}
    return {n: ids.setdefault(root(n), len(ids)) for n in nodes}


def data_flow_edges(contracts: Mapping[str, tuple[Mapping[str, str], Mapping[str, str]]],
                    ) -> list[Edge]:
    """Producer -> consumer pairs where an output of the producer is a required input of the
    consumer by name with a compatible type; ``contracts`` maps a skill id to (its outputs,
    its required inputs), each a name -> JSON type ("" when undeclared). A pair that would
    flow both ways says nothing about order and is left out.

    >>> data_flow_edges({"a": ({"text": "string"}, {}), "b": ({}, {"text": "string"})})
    [('a', 'b')]
    """
    found: list[Edge] = []
    for a, (outputs, _) in contracts.items():
        for b, (_, required) in contracts.items():
            if a == b:
                continue
            for name, wanted in required.items():
                given = outputs.get(name)
                if given is None:
                    continue
                if given and wanted and given != wanted and not (
                        {given, wanted} <= {"number", "integer"}):
                    continue
                found.append((a, b))
                break
    pairs = set(found)
    return [e for e in found if (e[1], e[0]) not in pairs]
