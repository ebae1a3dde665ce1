"""``skillgrove bench DIR --mode groups|flat``: the retrieval benchmark harness.

Reads any folder in the format of ``shared/benchmarks/FORMAT.md`` (skills.jsonl, history.jsonl,
queries.jsonl), then:

1. builds a fresh library: each skill line becomes a real ``SKILL.md`` (instruction-only, its id
   in ``.skill_id``) in a scratch folder, loaded by the ordinary loader;
2. in ``groups`` mode learns from history with the product's own code: draft groups mined from
   recurring skill sets (written as ordinary group YAML, every request of the set as an example)
   and co-use weights; ``flat`` mode learns nothing;
3. calibrates retrieval on history alone: a tenth of the history rows (at most 500) is held out,
   a second library is learned from the rest, and the group threshold and router confidence
   that maximise set F1 on the held-out rows are kept, then the lowest lexical confidence at
   which the fast route (no embedding) loses nothing on those rows (test queries are never
   looked at);
4. answers every query with the product's search call, timing each call, and scores it.

Metrics follow FORMAT.md; beyond them it reports ``group_precision`` (share of group answers that
are exactly the gold set), ``toolbox_coverage`` (gold set inside the selected skills plus the
suggestions) and ``composite_coverage`` (the same, on queries whose gold set strictly contains
another learned group: the "group plus another skill" cases), and where the time goes:
``fast_route_rate`` (requests answered from their words alone), the latency of the embedded
requests and of the fast ones, and within the embedded ones the model (``encode_ms_p50``)
against the rest (``retrieval_ms_p50``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from skillgrove.graph.embeddings import Encoder
from skillgrove.graph.indexer import index_library
from skillgrove.graph.learning import (
    HistoryError,
    HistoryRow,
    co_use_weights,
    draft_support,
    draft_to_yaml,
    mine_groups,
    read_history,
    read_jsonl,
    transition_counts,
)
from skillgrove.graph.model import members_of
from skillgrove.graph.planner import request_parts
from skillgrove.graph.retrieval import Retriever, ScoredSkill, Toolbox
from skillgrove.graph.stages import DEFAULT_SETTINGS, FinalSteps, Settings, Siblings
from skillgrove.graph.stages.groups import weigh_final_steps
from skillgrove.graph.store import GraphStore
from skillgrove.groups.library import Library, load_library
from skillgrove.skills.loader import (
    LoadOptions,
    contract_problem,
    json_schema_types,
    valid_skill_id,
)

KS = (3, 5, 10)


@dataclass(frozen=True)
class Query:
    id: str
    request: str
    gold: tuple[str, ...]
    gold_edges: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Dataset:
    name: str
    skills: tuple[dict[str, Any], ...]
    history: tuple[HistoryRow, ...]
    queries: tuple[Query, ...]


def library_id(dataset_id: object) -> str:
    """The id a data set's skill has in the library: its own where a skill id may be that
    (``valid_skill_id``), else one made of it (its letters and digits, and a digest that keeps
    two ids apart). A data set may name its operations ``GET /movie/{id}`` or ``工具1``; a
    library id may not, and a skill whose id the loader refuses gets another, which no gold
    label would name. Applied to every id the data set holds, so labels and skills agree."""
    text = str(dataset_id)
    if valid_skill_id(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    stem = re.sub(r"[^A-Za-z0-9._:-]+", "-", text).strip("-._:")[:100]
    return f"{stem}-{digest}" if stem else f"id-{digest}"


def _distinct_names(skills: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each skill's name, its id where it has none, and a number after a name an earlier skill
    has (``search``, ``search-2``): a data set's skills are told apart by their ids, a
    library's by their names, where a second ``search`` is a copy the first shadows and a
    label naming it could never be answered."""
    out: list[str] = []
    seen: set[str] = set()
    for skill in skills:
        name = str(skill["name"]).strip() or library_id(skill["id"])
        unique, number = name, 1
        while unique.lower() in seen:
            number += 1
            unique = f"{name}-{number}"
        seen.add(unique.lower())
        out.append(unique)
    return out


def read_dataset(folder: Path) -> Dataset:
    if not folder.is_dir():
        raise HistoryError(f"{folder}: not a folder (expected skills.jsonl, history.jsonl, "
                           "queries.jsonl)")
    skills = read_jsonl(folder / "skills.jsonl",
                        {"id": (str, int), "name": str, "description": (str, type(None))})
    seen: dict[str, int] = {}
    for number, skill in enumerate(skills, 1):
        key = str(skill["id"])
        if key in seen:
            raise HistoryError(f"{folder / 'skills.jsonl'}:{number}: id '{key}' repeats line "
                               f"{seen[key]}")
        seen[key] = number
    skills = [{**s, "id": library_id(s["id"]), "name": name,
               **({"depends_on": [library_id(d) for d in s["depends_on"]]}
                  if isinstance(s.get("depends_on"), list) else {})}
              for s, name in zip(skills, _distinct_names(skills), strict=True)]
    history = [replace(r, skills=tuple(library_id(s) for s in r.skills),
                       edges=tuple((library_id(a), library_id(b)) for a, b in r.edges))
               for r in read_history(folder / "history.jsonl")]
    raw = read_jsonl(folder / "queries.jsonl",
                     {"id": (str, int), "request": str, "gold_skills": list})
    queries = tuple(Query(str(q["id"]), q["request"],
                          tuple(library_id(s) for s in q["gold_skills"]),
                          tuple((library_id(a), library_id(b))
                                for a, b in (q.get("gold_edges") or [])))
                    for q in raw)
    return Dataset(folder.resolve().name, tuple(skills), tuple(history), queries)


def _yaml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # JSON strings are valid YAML scalars


@lru_cache(maxsize=16384)
def _contract(key: str, text: str) -> tuple[str | None, str]:
    """(the JSON of a schema the loader accepts, or None; "kept", "retyped" or "left out")."""
    schema = json.loads(text)
    if contract_problem(key, schema) is None:
        return text, "kept"
    retyped = json_schema_types(schema)
    if retyped != schema and contract_problem(key, retyped) is None:
        return json.dumps(retyped, ensure_ascii=False), "retyped"
    return None, "left out"


def usable_contracts(dataset: Dataset) -> tuple[dict[str, tuple[Any, Any]], Counter[str]]:
    """Each skill's (inputs, outputs) as the library gets them, and how many were retyped or
    left out. A skill whose declared contract the loader refuses would not load at all, and
    its queries could never be answered: a contract spelling its types as another tool format
    does (``"STRING"``) is retyped; one still refused is left out of the frontmatter (its text
    stays in the body, where retrieval reads it)."""
    out: dict[str, tuple[Any, Any]] = {}
    counts: Counter[str] = Counter()
    for skill in dataset.skills:
        pair: list[Any] = []
        for key in ("inputs", "outputs"):
            value = skill.get(key)
            if value is None or value == {}:
                pair.append(None)
                continue
            # Written as declared: the order of its properties is the order of its inputs.
            text, fate = _contract(key, json.dumps(value, ensure_ascii=False))
            counts[fate] += 1
            pair.append(value if fate == "kept" else None if text is None else json.loads(text))
        out[str(skill["id"])] = (pair[0], pair[1])
    return out, counts


def _folders(dataset: Dataset) -> dict[str, str]:
    """A folder name for each skill id: its name where that is a safe, unused folder name,
    else the name with anything a path cannot hold replaced and a number added (a data set
    may repeat a name or write ``a/b``; neither may overwrite or escape)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for skill in dataset.skills:
        name = str(skill["name"])
        base = name if re.fullmatch(r"\w[\w.-]{0,99}", name) else \
            re.sub(r"[^\w.-]+", "-", name).strip(".-")[:100] or "skill"
        folder, number = base, 1
        while folder.lower() in used:
            number += 1
            folder = f"{base}-{number}"
        used.add(folder.lower())
        out[str(skill["id"])] = folder
    return out


def write_library(dataset: Dataset, root: Path, mode: str,
                  history: Sequence[HistoryRow] | None = None, min_support: int | None = None,
                  ) -> tuple[Path, dict[tuple[str, str], float] | None, int]:
    """Materialize the dataset as a library under ``root``, learning from ``history`` (all of
    the dataset's by default) the groups an owner approves from ``groups suggest``'s drafts
    (``min_support``: None, as ``groups suggest`` drafts them); returns (root, co-use,
    groups)."""
    history = dataset.history if history is None else history
    if min_support is None:
        min_support = draft_support(len(history))
    names = {str(s["id"]): s["name"] for s in dataset.skills}
    contracts, _ = usable_contracts(dataset)
    folders = _folders(dataset)
    for skill in dataset.skills:
        folder = root / "skills" / folders[str(skill["id"])]
        folder.mkdir(parents=True, exist_ok=True)
        tags = skill.get("tags") or []
        tags = [tags] if isinstance(tags, str) else tags if isinstance(tags, list) else []
        lines = ["---", f"name: {_yaml_string(skill['name'])}",
                 f"description: {_yaml_string(skill['description'] or skill['name'])}"]
        if tags:
            lines.append(f"tags: {json.dumps([str(t) for t in tags], ensure_ascii=False)}")
        # The optional contract fields are part of the skill as its author declared them
        # (JSON is valid YAML); prerequisites are named, as a SKILL.md names other skills.
        refused = []
        for key, usable in zip(("inputs", "outputs"), contracts[str(skill["id"])], strict=True):
            if usable is not None:
                lines.append(f"{key}: {json.dumps(usable, ensure_ascii=False)}")
            elif skill.get(key) not in (None, {}):
                refused.append(f"{key}: {json.dumps(skill[key], ensure_ascii=False)}")
        depends = [names.get(str(d), str(d)) for d in skill.get("depends_on") or []]
        if depends:
            lines.append(f"depends_on: {json.dumps(depends, ensure_ascii=False)}")
        lines += ["---", *refused, str(skill.get("body") or ""), ""]
        (folder / "SKILL.md").write_text("\n".join(lines), encoding="utf-8")
        (folder / ".skill_id").write_text(str(skill["id"]) + "\n", encoding="utf-8")
    if mode != "groups":
        return root, None, 0
    descriptions = {str(s["id"]): s["description"] or "" for s in dataset.skills}
    by_name = {name: sid for sid, name in names.items()}
    needs = {str(s["id"]): [str(d) if str(d) in names else by_name.get(str(d), str(d))
                            for d in s.get("depends_on") or []] for s in dataset.skills}
    count = write_mined_groups(history, names, descriptions, contracts, root / "groups",
                               min_support, needs)
    return root, co_use_weights(history), count


def rows_by_id(rows: Sequence[HistoryRow], library: Library) -> list[HistoryRow]:
    """``rows`` with every skill named by its id: a history may name a skill by id or by name
    (a name means the skill that answers for it)."""
    ids = set(library.catalog.by_id())
    by_name = {s.name: s.id for s in library.catalog.active.values()}

    def known(skill: str) -> str:
        return skill if skill in ids else by_name.get(skill, skill)

    return [HistoryRow(r.id, r.request, tuple(known(s) for s in r.skills),
                       tuple((known(a), known(b)) for a, b in r.edges), r.succeeded)
            for r in rows]


def learned_store(paths: Sequence[Path], library: Library, rows: Sequence[HistoryRow],
                  folder: Path, min_support: int, options: LoadOptions, encoder: Encoder,
                  make_store: Callable[[Path], GraphStore]) -> GraphStore:
    """An index of what a library learns from ``rows`` alone: the skills of ``library``
    (loaded from ``paths``) with the groups the rows recur often enough to give, approved as
    an owner approves them, none of its own groups (they may have been learned from rows held
    out), and the co-use and transitions of the rows. The same for ``skillgrove bench`` and
    ``skillgrove index --history``: both fit their settings on it (:func:`fit_settings`)."""
    named = rows_by_id(rows, library)
    skills = library.catalog.active.values()
    by_name = {s.name: s.id for s in skills}
    write_mined_groups(named, {s.id: s.name for s in skills},
                       {s.id: s.description for s in skills},
                       {s.id: (s.inputs, s.outputs) for s in skills}, folder / "groups",
                       min_support, {s.id: [by_name.get(n, n) for n in s.depends_on]
                                     for s in skills})
    # The learned groups' folder first: a group of the library with the same id is shadowed.
    loaded = load_library([folder, *paths], options)
    learned = replace(loaded, groups={gid: group for gid, group in loaded.groups.items()
                                      if folder in Path(group.path).parents})
    store = make_store(folder)
    index_library(learned, store, encoder, co_use=co_use_weights(named),
                  transitions=transition_counts(named))
    return store


def write_mined_groups(history: Sequence[HistoryRow], names: Mapping[str, str],
                       descriptions: Mapping[str, str], contracts: Mapping[str, Any],
                       folder: Path, min_support: int = 2,
                       prerequisites: Mapping[str, Sequence[str]] | None = None) -> int:
    """The groups ``history`` (rows naming skills by id) recurs often enough to give, as the
    owner approves them: one group file each under ``folder``, every past request an example;
    returns how many. ``prerequisites``: each skill's declared ``depends_on``, by id (the
    edges of a set whose rows record none)."""
    drafts = mine_groups(history, names=names, descriptions=descriptions,
                         min_support=min_support, prerequisites=prerequisites)
    folder.mkdir(parents=True, exist_ok=True)
    for draft in drafts:
        (folder / f"{draft.id}.yaml").write_text(
            draft_to_yaml(draft, names, all_examples=True, contracts=contracts),
            encoding="utf-8")
    return len(drafts)


# -- metrics ----------------------------------------------------------------------------------


SHAPES = ("group", "composed", "skill", "skills", "none")
"""The shapes of an answer (``Toolbox.shape``); each run reports the share of each."""


def ranked_list(toolbox: Toolbox) -> list[str]:
    out: list[str] = []
    if toolbox.group is not None:
        out.extend(toolbox.group.members)
    out.extend(s.id for s in toolbox.skills)
    return list(dict.fromkeys(out))


def selected_edges(toolbox: Toolbox, ids_by_name: Mapping[str, str]) -> set[tuple[str, str]]:
    if toolbox.group is None:
        return set(toolbox.edges)
    return {(ids_by_name.get(a, a), ids_by_name.get(b, b)) for a, b in toolbox.group.edges}


def f1(predicted: set[Any], gold: set[Any]) -> float:
    if not predicted and not gold:
        return 1.0
    hits = len(predicted & gold)
    if not hits:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


def ndcg(ranked: Sequence[str], gold: set[str], k: int = 5) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, s in enumerate(ranked[:k]) if s in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def score_query(toolbox: Toolbox, query: Query, ids_by_name: Mapping[str, str],
                composite: bool) -> dict[str, float | None]:
    gold = set(query.gold)
    ranked = ranked_list(toolbox)
    selected = set(toolbox.selected)
    row: dict[str, float | None] = {}
    for k in KS:
        hits = len(gold & set(ranked[:k]))
        row[f"recall@{k}"] = hits / len(gold) if gold else 1.0
        row[f"completeness@{k}"] = 1.0 if gold <= set(ranked[:k]) else 0.0
    row["ndcg@5"] = ndcg(ranked, gold)
    row["set_f1"] = f1(selected, gold)
    row["edge_f1"] = (f1(selected_edges(toolbox, ids_by_name), set(query.gold_edges))
                      if query.gold_edges else None)
    row["exact"] = 1.0 if selected == gold else 0.0
    row["group_rate"] = 1.0 if toolbox.group is not None else 0.0
    for shape in SHAPES:
        row[f"shape_{shape}"] = 1.0 if toolbox.shape == shape else 0.0
    row["group_precision"] = (1.0 if selected == gold else 0.0) if toolbox.group else None
    covered = gold <= selected | {s.id for s in toolbox.suggestions}
    row["toolbox_coverage"] = 1.0 if covered else 0.0
    row["composite_coverage"] = (1.0 if covered else 0.0) if composite else None
    return row


def aggregate(rows: Sequence[Mapping[str, float | None]], latencies: Sequence[float],
              ) -> dict[str, float]:
    keys = [f"recall@{k}" for k in KS] + [f"completeness@{k}" for k in KS] + [
        "ndcg@5", "set_f1", "edge_f1", "exact", "group_rate", "group_precision",
        "toolbox_coverage", "composite_coverage", *(f"shape_{shape}" for shape in SHAPES)]
    out: dict[str, float] = {}
    for key in keys:
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[key] = round(100 * statistics.fmean(v for v in values if v is not None), 1)
    ordered = sorted(latencies)
    if ordered:
        out["latency_ms_p50"] = round(statistics.median(ordered), 2)
        out["latency_ms_p95"] = round(ordered[min(len(ordered) - 1,
                                                  int(0.95 * len(ordered)))], 2)
    return out


# -- calibration ------------------------------------------------------------------------------


def split_history(history: Sequence[HistoryRow], share: float = 0.1, cap: int = 500,
                  seed: int = 7) -> tuple[list[HistoryRow], list[HistoryRow]]:
    """(fit rows, held-out rows): a seeded random ``share`` of the rows (at most ``cap``) is
    held out, or ``MIN_CALIBRATION_ROWS`` of them when that is more and at most
    ``MOST_HELD_OUT`` of the rows (a history of 100 to 299 rows holds out 30). Calibration
    learns from the fit rows alone and is scored on the held-out ones, which the groups, their
    texts, co-use and the router have never seen."""
    rows = [r for r in history if r.skills]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    count = int(len(rows) * share)
    if count < MIN_CALIBRATION_ROWS <= len(rows) * MOST_HELD_OUT:
        count = MIN_CALIBRATION_ROWS
    held = set(order[: min(cap, count)])
    return ([r for i, r in enumerate(rows) if i not in held],
            [r for i, r in enumerate(rows) if i in held])


MIN_CALIBRATION_ROWS = 30
"""Every fitted setting needs at least this many held-out history rows; with fewer (a run log
of under 100 rows) the defaults stay, but for the selection floor: a threshold chosen on 5 rows
predicted 59 set F1 and got 33 on data it had not seen."""
MOST_HELD_OUT = 0.3
"""The largest share of a short history held out to reach ``MIN_CALIBRATION_ROWS``: the library
calibrated on the rest must still be much like the one the product learns from all of them."""

SKILL_VECTOR_WEIGHTS: tuple[float | None, ...] = (0.5, None, 0.25, 0.0, 0.75)
"""Candidates for how much the embedding counts against BM25 for single skills (the default
first: it wins ties)."""
SELECT_RATIOS = (0.85, 0.7, 0.8, 0.9, 0.95)
SELECT_MINIMA = (0.25, 0.1, 0.2, 0.3, 0.4)


def calibrate_skills(retriever: Retriever, held_out: Sequence[HistoryRow],
                     weights: Sequence[float | None] = SKILL_VECTOR_WEIGHTS,
                     ratios: Sequence[float] = SELECT_RATIOS,
                     ) -> tuple[Settings, dict[str, Any]]:
    """The single-skill weights and selection cut that fit this library, chosen on held-out
    history rows: the vector weight with the best recall@10 of the skill ranking, then the
    cut (``select_ratio``, ``select_min``) with the best set F1 of the selection. A lexically
    easy library so gets the BM25 side it needs, instead of a weight tuned elsewhere."""
    config = retriever.settings
    if len(held_out) < MIN_CALIBRATION_ROWS:
        return config, {}
    plain = config.but(groups=None, plan={"closure": None})
    best: tuple[float, float | None, list[tuple[list[ScoredSkill], set[str]]]] | None = None
    for weight in weights:
        probe = Retriever(retriever.store, retriever.encoder,
                          plain.but(skills={"vector_weight": weight}))
        rankings = []
        recall = 0.0
        for row in held_out:
            gold = set(row.skills)
            toolbox = probe.search(row.request)
            ids = [s.id for s in toolbox.skills]
            recall += len(gold & set(ids[:10])) / max(len(gold), 1)
            rankings.append((list(toolbox.skills), gold))
        if best is None or recall > best[0] + 1e-9:
            best = (recall, weight, rankings)
    assert best is not None
    recall, weight, rankings = best
    cut: tuple[float, float, float] | None = None
    for ratio in ratios:
        for minimum in SELECT_MINIMA:
            # The retriever's own selection rule, with these settings.
            selector = Retriever(retriever.store, retriever.encoder, config.but(
                skills={"vector_weight": weight, "ratio": ratio, "minimum": minimum}))
            total = sum(f1(set(selector.select(skills)), gold) for skills, gold in rankings)
            if cut is None or total > cut[0] + 1e-9:
                cut = (total, ratio, minimum)
    assert cut is not None
    tuned = config.but(skills={"vector_weight": weight, "ratio": cut[1], "minimum": cut[2]})
    return tuned, {"skill_vector_weight": "balanced" if weight is None else weight,
                   "skill_recall@10": round(
        100 * recall / len(held_out), 1), "select_ratio": cut[1], "select_min": cut[2],
        "select_set_f1": round(100 * cut[0] / len(held_out), 1)}


TARGET_WEIGHTS = (0.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""Candidates for ``target_weight``, the first (the router alone) preferred on ties."""
TARGET_VECTOR_WEIGHTS = (0.5, 0.25, 0.75)
SIBLING_WEIGHTS = (0.0, 4.0, 8.0, 16.0)
"""Candidates for ``sibling_weight`` besides the default (which wins ties)."""
TARGET_MIN_ROWS = 20
TARGET_MIN_GAIN = 0.01
"""A final-step weight is kept only when it adds at least this much mean set F1 (1 point) to
the router alone on the held-out rows: less is the noise of a row or two (on ToolLens, where
the router has 35 requests per group, the best weight gained 0.1 point there and lost 0.4 on
the test queries)."""
"""Fewer held-out rows than this whose skill set is among the calibration library's groups,
and the final-step weight is calibrated on a library that also keeps the sets seen once."""


def _recurring_rows(held_out: Sequence[HistoryRow], fit_rows: Sequence[HistoryRow],
                    min_support: int = 2) -> int:
    """How many held-out rows use a skill set that recurs in the fit rows (has a group)."""
    counts = Counter(frozenset(r.skills) for r in fit_rows)
    return sum(1 for r in held_out if counts[frozenset(r.skills)] >= min_support)


def calibrate_targets(retriever: Retriever, held_out: Sequence[HistoryRow],
                      ) -> tuple[Settings, dict[str, Any]]:
    """The ``target_weight`` and ``target_vector_weight`` whose group choice has the best set
    F1 on the held-out rows whose skill set is one of the router's candidates (only there can
    the choice among them be right or wrong); every row is answered with a group here, as in
    :func:`calibrate_near_miss`."""
    config = retriever.settings
    groups = config.groups
    if groups is None:
        return config, {}
    rows = []
    for row in held_out:
        gold = set(row.skills)
        candidates = retriever.final_step_evidence(row.request)
        if any(set(candidate[1]) == gold for candidate in candidates):
            rows.append((gold, candidates))
    if len(rows) < TARGET_MIN_ROWS:
        return config, {"target_rows": len(rows)}

    def per_row(alpha: float, share: float, siblings: float) -> list[float]:
        out = []
        for gold, candidates in rows:
            at, _ = weigh_final_steps([(belief, pairs) for belief, _, pairs, _ in candidates],
                                      alpha, share,
                                      [siblings * lead for _, _, _, lead in candidates])
            out.append(f1(set(candidates[at][1]), gold))
        return out

    default = groups.siblings.weight if groups.siblings is not None else 0.0
    router = per_row(0.0, TARGET_VECTOR_WEIGHTS[0], default)
    scores = {(alpha, share): per_row(alpha, share, default)
              for share in TARGET_VECTOR_WEIGHTS for alpha in TARGET_WEIGHTS}
    best_key = (0.0, TARGET_VECTOR_WEIGHTS[0])
    for key, values in scores.items():
        # A weight must beat the router alone by more than noise, then score best.
        if _beats(values, router) and sum(values) > sum(scores[best_key]) + 1e-9:
            best_key = key
    alpha, share = best_key
    # Then the sibling weight with the best held-out set F1, the default on ties. (No margin
    # over noise here: where a router fitted on many requests knows better than the words of
    # the names, as on ToolLens, history says so and the weight goes to 0.)
    siblings = {weight: per_row(alpha, share, weight)
                for weight in dict.fromkeys((default, *SIBLING_WEIGHTS))}
    sibling = default
    for weight, values in siblings.items():
        if sum(values) > sum(siblings[sibling]) + 1e-9:
            sibling = weight
    overlap = (groups.siblings or Siblings(0.0)).overlap
    return config.but(groups={
        "final_steps": FinalSteps(alpha, share) if alpha > 0 else None,
        "siblings": Siblings(sibling, overlap) if sibling > 0 else None}), {
        "target_rows": len(rows), "target_weight": alpha, "target_vector_weight": share,
        "target_set_f1": {f"{a:g}@{w:g}": round(100 * sum(v) / len(v), 1)
                          for (a, w), v in scores.items()},
        "sibling_weight": sibling,
        "sibling_set_f1": {f"{w:g}": round(100 * sum(v) / len(v), 1)
                           for w, v in siblings.items()}}


def _beats(values: Sequence[float], reference: Sequence[float]) -> bool:
    """Whether per-row set F1 ``values`` beat ``reference`` by more than the noise of a few
    rows: ``TARGET_MIN_GAIN`` of mean set F1, on more rows than they lose."""
    won = sum(1 for v, r in zip(values, reference, strict=True) if v > r + 1e-9)
    lost = sum(1 for v, r in zip(values, reference, strict=True) if v < r - 1e-9)
    return won > lost and sum(values) - sum(reference) >= TARGET_MIN_GAIN * len(values)


ROUTING: tuple[tuple[bool, float | None], ...] = ((True, None), (False, None), (True, 0.25),
                                                   (False, 0.25))
"""Candidates for (``groups.router``, ``groups.vector_weight``), None keeping the weight as it
is; the first (the router, the default weight) is kept unless another beats it."""


def calibrate_routing(retriever: Retriever, held_out: Sequence[HistoryRow],
                      ) -> tuple[Settings, dict[str, Any]]:
    """Whether the router says which group is meant (``groups.router``) and how much the
    embedding counts in a group's score (``groups.vector_weight``): the pair whose groups,
    every held-out row answered with one, have the best set F1, where it beats the router
    with the default weight by more than noise (``_beats``). Fitted only where the groups come
    from sets seen once (a short history, ``learning.SHORT_HISTORY``): on ToolLens cut to 250
    rows of history the router, fitted on about 1.4 past requests a group, chose worse than
    the groups' words (44.9 against 48.1 set F1 on its queries)."""
    config = retriever.settings
    if config.groups is None or len(held_out) < MIN_CALIBRATION_ROWS:
        return config, {}
    scores = {(router, weight): _group_answer_scores(
        retriever, held_out, groups={"router": router} | (
            {"vector_weight": weight} if weight is not None else {}))
        for router, weight in ROUTING}
    best = ROUTING[0]
    for key, values in scores.items():
        if _beats(values, scores[ROUTING[0]]) and sum(values) > sum(scores[best]) + 1e-9:
            best = key
    router, weight = best
    changes: dict[str, Any] = {"router": router}
    if weight is not None:
        changes["vector_weight"] = weight
    return config.but(groups=changes), {
        "router": router, "group_vector_weight": weight if weight is not None
        else config.groups.vector_weight,
        "routing_set_f1": {
            f"{'router' if r else 'similarity'}@{'default' if w is None else w}":
            round(100 * sum(v) / len(v), 1) for (r, w), v in scores.items()}}


NEAR_MISS_MARGINS: tuple[float | None, ...] = (None, 0.1, 0.05, 0.02, 0.0)
"""Candidates for ``PlanSettings.near_miss``, the first (never) preferred on ties."""


def _group_answers_f1(retriever: Retriever, held_out: Sequence[HistoryRow],
                      **settings: Any) -> float:
    """Mean set F1 on the held-out rows with the planner's ``settings``, every row answered
    with a group (:func:`_group_answer_scores`)."""
    return sum(_group_answer_scores(retriever, held_out, plan=settings)) / len(held_out)


def _group_answer_scores(retriever: Retriever, held_out: Sequence[HistoryRow],
                         groups: Mapping[str, Any] | None = None,
                         plan: Mapping[str, Any] | None = None) -> list[float]:
    """Each held-out row's set F1 with these ``groups`` and ``plan`` settings, every row
    answered with a group (as the group settings are calibrated after these: the rules that
    give a group's answer to single skills are off, or they would judge these settings on the
    rows they take away)."""
    probe = Retriever(retriever.store, retriever.encoder, retriever.settings.but(
        groups={"threshold": -1.0, "cjk_threshold": -1.0, "router_min_confidence": 0.0,
                "one_skill_margin": None, "fast_route": None, "support_depth": None,
                "top_lead": None, **(groups or {})},
        plan={"first_task": False, **(plan or {})}))
    return [f1(set(probe.search(row.request).selected), set(row.skills)) for row in held_out]


def _best_margin(scores: Sequence[tuple[float, float | None]]) -> tuple[float, float | None]:
    """(value, margin) of the best score, the first (never) on ties."""
    best_value, best_margin = scores[0]
    for value, margin in scores[1:]:
        if value > best_value + 1e-9:
            best_value, best_margin = value, margin
    return best_value, best_margin


def calibrate_near_miss(retriever: Retriever, held_out: Sequence[HistoryRow],
                        ) -> tuple[Settings, dict[str, Any]]:
    """The ``near_miss`` margin whose group answers have the best set F1 on held-out rows."""
    config = retriever.settings
    if len(held_out) < MIN_CALIBRATION_ROWS:
        return config, {}
    scores = [(_group_answers_f1(retriever, held_out, near_miss=margin,
                                 extend_groups=False), margin)
              for margin in NEAR_MISS_MARGINS]
    best_value, best_margin = _best_margin(scores)
    extended = _group_answers_f1(retriever, held_out, near_miss=best_margin,
                                 extend_groups=True)
    extend = extended > best_value + 1e-9
    return config.but(plan={"near_miss": best_margin, "extend_groups": extend}), {
        "near_miss": best_margin, "extend_groups": extend,
        "near_miss_set_f1": {str(m): round(100 * v, 1) for v, m in scores},
        "extended_set_f1": round(100 * extended, 1)}


STAND_IN_MARGINS: tuple[float | None, ...] = (None, 0.2, 0.1, 0.05, 0.0)
"""Candidates for ``PlanSettings.stand_in``, the first (never) preferred on ties."""


def calibrate_stand_in(retriever: Retriever, held_out: Sequence[HistoryRow],
                       ) -> tuple[Settings, dict[str, Any]]:
    """The ``stand_in`` margin with the best set F1 on held-out rows. Rows whose skill set
    the calibration library has no group for (a set seen once, its row held out) are the
    case a stand-in is for; rows whose group is there show what it costs."""
    config = retriever.settings
    if len(held_out) < MIN_CALIBRATION_ROWS:
        return config, {}
    scores = [(_group_answers_f1(retriever, held_out, stand_in=margin), margin)
              for margin in STAND_IN_MARGINS]
    _, best = _best_margin(scores)
    return config.but(plan={"stand_in": best}), {
        "stand_in": best,
        "stand_in_set_f1": {str(m): round(100 * v, 1) for v, m in scores}}


def calibrate_order(retriever: Retriever, held_out: Sequence[HistoryRow],
                    ) -> tuple[Settings, dict[str, Any]]:
    """Whether a part of a request joins the part before it only when it refers back to an
    earlier result (``plan.referenced``), or whenever it is written after it (the default).

    Judged on the held-out rows that ask for two skills or more in a request of two parts or
    more and that the answer composes (a group keeps its own edges), by the F1 of the answer's
    edges against the row's (none against none scores 1): a history whose rows record only the
    data one step takes from another (most rows saying "then" have no edge) turns it on. Kept
    only on ``MIN_CALIBRATION_ROWS`` such rows and when it beats the order written by more
    than noise (:func:`_beats`)."""
    config = retriever.settings
    if not config.plan.order:
        return config, {}
    rows = [r for r in held_out
            if len(set(r.skills)) > 1 and len(request_parts(r.request)) > 1]

    def edge_scores(referenced: bool, asked: Sequence[HistoryRow]) -> list[float | None]:
        judge = Retriever(retriever.store, retriever.encoder,
                          config.but(plan={"referenced": referenced}))
        out: list[float | None] = []
        for row in asked:
            toolbox = judge.search(row.request)
            out.append(None if toolbox.group is not None
                       else f1(set(toolbox.edges), set(row.edges)))
        return out

    # The setting orders composed toolboxes only: a row a group answers is asked once.
    composed: list[tuple[HistoryRow, float]] = [
        (row, score) for row, score in zip(rows, edge_scores(False, rows), strict=True)
        if score is not None]
    second = edge_scores(True, [row for row, _ in composed])
    pairs = [(w, r) for (_, w), r in zip(composed, second, strict=True) if r is not None]
    details: dict[str, Any] = {"order_sample": len(pairs)}
    if len(pairs) < MIN_CALIBRATION_ROWS:
        return config, {**details, "referenced": config.plan.referenced}
    written = [w for w, _ in pairs]
    referring = [r for _, r in pairs]
    referenced = _beats(referring, written)
    details.update(referenced=referenced,
                   order_edge_f1={"written": round(100 * statistics.fmean(written), 1),
                                  "referenced": round(100 * statistics.fmean(referring), 1)})
    return config.but(plan={"referenced": referenced}), details


FOLDS = 5
"""How many parts a history too short for a held-out split is cut into for
:func:`calibrate_support_folds`: each part is answered by a library learned from the others."""


def calibrate_support_folds(build: Callable[[str, Sequence[HistoryRow], int], GraphStore],
                            rows: Sequence[HistoryRow], encoder: Encoder, base: Settings,
                            ) -> tuple[Settings, dict[str, Any]]:
    """``groups.support_depth`` for a history too short to hold rows out (30 to 99 rows), by
    cross-validation: the rows are cut into ``FOLDS`` seeded parts, each answered by a library
    learned from the others (its groups drafted from sets seen once, as the product drafts
    them from a short history), so that every row is answered once without being learned.

    The rule that a group needs one of its steps among the request's first five skills guards
    libraries whose new requests are new tasks (Sealtools-in cut to 50 rows loses 13 points of
    set F1 without its rules); where requests repeat earlier ones in words their skills do not
    share (ToolLens cut to 50 rows and 40 skills: 85.8 with it, 92.8 without), it turns the
    right group away. A depth replaces the default only when it beats it by more than noise
    (:func:`_beats`) on every row's answer."""
    config = base
    if config.groups is None or len(rows) < MIN_CALIBRATION_ROWS:
        return config, {}
    order = list(range(len(rows)))
    random.Random(7).shuffle(order)
    folds = [[rows[i] for i in order[f::FOLDS]] for f in range(FOLDS)]
    default = config.groups.support_depth
    scores: dict[int | None, list[float]] = {depth: [] for depth in (default, *SUPPORT_DEPTHS)}
    for index, fold in enumerate(folds):
        learned = [r for other, part in enumerate(folds) if other != index for r in part]
        store = build(f"calibration-fold-{index}", learned, 1)
        for depth in scores:
            judge = Retriever(store, encoder, config.but(groups={"support_depth": depth}))
            scores[depth].extend(f1(set(judge.search(row.request).selected), set(row.skills))
                                 for row in fold)
        store.close()
    best = default
    for depth, values in scores.items():
        if _beats(values, scores[default]) and sum(values) > sum(scores[best]) + 1e-9:
            best = depth
    return config.but(groups={"support_depth": best}), {
        "support_depth": best, "support_folds": FOLDS,
        "support_set_f1": {str(d): round(100 * statistics.fmean(v), 1)
                           for d, v in scores.items()}}


SINGLE_SKILL_MARGINS: tuple[float | None, ...] = (None, 0.3, 0.2, 0.1, 0.05, 0.0)
"""Candidates for ``GroupSettings.one_skill_margin``, the first (never) preferred on ties."""
SINGLE_STEP_LEADS: tuple[float | None, ...] = (None, 0.3, 0.2, 0.15)
"""Candidates for ``GroupSettings.step_lead``, the first (never) preferred on ties."""
TOP_LEAD = 0.9
"""``GroupSettings.top_lead`` where history turns that rule on."""


SUPPORT_DEPTHS: tuple[int | None, ...] = (5, None, 10, 3)
"""Candidates for ``GroupSettings.support_depth``, the default first (it wins ties)."""


def calibrate(retriever: Retriever, held_out: Sequence[HistoryRow],
              fit_rows: Sequence[HistoryRow] = (), min_support: int = 2,
              ) -> tuple[Settings, dict[str, Any]]:
    """The group threshold and router confidence that maximise set F1 on ``held_out`` rows,
    with the rules that let single skills replace a chosen group (``one_skill_margin``,
    ``step_lead``, ``support_depth``), each judged by the retriever's own code.

    ``retriever`` must answer from a library learned without those rows (see
    ``split_history``): an earlier version hid only each row's own example, but the row's text
    was still inside its group's description, and every setting scored 97%.
    """
    config = retriever.settings
    groups = config.groups
    if groups is None:
        return config, {"kept": "the group stage is off"}
    if len(held_out) < MIN_CALIBRATION_ROWS:
        return config, {"sample": len(held_out), "kept": "defaults: too few held-out rows"}
    # Every rule that gives a group's answer to skills is off here, so that each is judged
    # below on the rows where it would act (``shaped``).
    probe = Retriever(retriever.store, retriever.encoder, config.but(groups={
        "threshold": -1.0, "router_min_confidence": 0.0, "cjk_threshold": -1.0,
        "one_skill_margin": None, "step_lead": None, "support_depth": None,
        "top_lead": None}, plan={"first_task": False}))
    # What the product answers when no group is taken: the same search with groups off.
    plain = Retriever(retriever.store, retriever.encoder, config.but(groups=None))
    every: list[tuple[Toolbox, float, float]] = []
    for row in held_out:
        toolbox = probe.search(row.request)
        gold = set(row.skills)
        without = f1(set(plain.search(row.request).selected), gold)
        every.append((toolbox, f1(set(toolbox.selected), gold) if toolbox.group else without,
                      without))
    # The threshold and the rules say whether the chosen group is the right one: they are
    # fitted on the rows whose task has a group to choose (its set recurs in the fit rows),
    # when there are enough of them. The other rows ask for tasks no group learned; they
    # decide ``top_in_a_group`` below, with all the rows.
    counts = Counter(frozenset(r.skills) for r in fit_rows)
    known = [entry for entry, row in zip(every, held_out, strict=True)
             if counts[frozenset(row.skills)] >= min_support]
    rows = known if len(known) >= MIN_CALIBRATION_ROWS else every

    top_lead = groups.top_lead if groups.top_lead is not None else TOP_LEAD

    def shaped(margin: float | None, lead: float | None, depth: int | None,
               top: bool = groups.top_lead is not None, first: bool = config.plan.first_task,
               ) -> list[tuple[float, float, float, float]]:
        """(group score, router confidence, set F1 with the group, without it) per row; the
        score is -1 where there is no group or the rules give the answer to single skills."""
        judge = Retriever(retriever.store, retriever.encoder, config.but(groups={
            "one_skill_margin": margin, "step_lead": lead, "support_depth": depth,
            "top_lead": top_lead if top else None}, plan={"first_task": first}))
        out = []
        for toolbox, with_group, without in rows:
            group = toolbox.group
            if group is None:
                out.append((-1.0, -1.0, with_group, without))
                continue
            skills = list(toolbox.skills)
            replaced = judge.one_skill_fits_better(group, skills, toolbox.request) or judge.unsupported(
                group, skills, toolbox.group_candidates)
            confidence = group.explanation.belief
            out.append((-1.0 if replaced else group.score, confidence, with_group, without))
        return out

    # (value, threshold, confidence, margin, lead, depth); no margin and no lead (one skill
    # never overrides a group) come first, so that they win ties and the fast route stays
    # possible.
    best: tuple[float, float, float, float | None, float | None, int | None] | None = None
    for margin in SINGLE_SKILL_MARGINS:
        for lead in SINGLE_STEP_LEADS:
            for depth in SUPPORT_DEPTHS:
                candidate = shaped(margin, lead, depth)
                for confidence in sorted({0.0} | {round(p[1], 3) for p in candidate
                                                  if p[1] >= 0}):
                    kept = [(p[0] if p[1] >= confidence else -1.0, p[2], p[3])
                            for p in candidate]
                    threshold, value = _best_threshold(kept)
                    if best is None or value > best[0] + 1e-9:
                        best = (value, threshold, confidence, margin, lead, depth)
    assert best is not None
    value, threshold, confidence, margin, lead, depth = best
    # Then whether the request's best skill must be in a group: where held-out rows ask for
    # tasks no group learned (their sets seen too rarely), a composed toolbox around that
    # skill beats the group that shares its prerequisites. Kept only when it wins more rows
    # than it loses and gains at least TARGET_MIN_GAIN.
    top_rule = groups.top_lead is not None
    rows = every
    before = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3]
              for p in shaped(margin, lead, depth, top_rule)]
    flipped = shaped(margin, lead, depth, not top_rule)
    after = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3] for p in flipped]
    won = sum(1 for a, b in zip(after, before, strict=True) if a > b + 1e-9)
    lost = sum(1 for a, b in zip(after, before, strict=True) if a < b - 1e-9)
    if won > lost and sum(after) - sum(before) >= TARGET_MIN_GAIN * len(before):
        top_rule = not top_rule
        value = statistics.fmean(after)
    # Then whether a group must do the first of the tasks a request states in turn: off
    # where the held-out rows answer better without it (more rows won than lost).
    first = config.plan.first_task
    if first:
        on = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3]
              for p in shaped(margin, lead, depth, top_rule, True)]
        off_first = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3]
                     for p in shaped(margin, lead, depth, top_rule, False)]
        if sum(1 for a, b in zip(off_first, on, strict=True) if a > b + 1e-9) > sum(
                1 for a, b in zip(off_first, on, strict=True) if a < b - 1e-9):
            first = False
            value = statistics.fmean(off_first)
    routable = threshold <= 0 and margin is None and lead is None and depth is None
    if top_rule and routable and lost <= won:
        # The rule does no better on the held-out rows here, and it needs every request
        # embedded: it goes where history shows the words alone answer as well (the fast
        # route).
        off = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3]
               for p in shaped(margin, lead, depth, False, first)]
        if _fast_route_confidence(probe, held_out, off)[0] is not None:
            top_rule = False
    points = shaped(margin, lead, depth, top_rule, first)
    # A request mostly in CJK script is held to the same share of the bar as by default.
    ratio = groups.cjk_threshold / groups.threshold
    full = [p[2] if p[0] >= threshold and p[1] >= confidence else p[3] for p in points]
    fast, share = (_fast_route_confidence(probe, held_out, full)
                   if routable and not top_rule else (None, 0.0))
    tuned = config.but(groups={
        "threshold": threshold, "cjk_threshold": round(threshold * ratio, 3),
        "router_min_confidence": confidence, "one_skill_margin": margin, "step_lead": lead,
        "support_depth": depth, "top_lead": top_lead if top_rule else None,
        "fast_route": fast}, plan={"first_task": first})
    return tuned, {"sample": len(points), "sample_with_groups": len(known),
                   "set_f1": round(100 * value, 1),
                   "threshold": threshold, "router_min_confidence": confidence,
                   "one_skill_margin": margin, "step_lead": lead,
                   "support_depth": depth, "top_in_a_group": top_rule, "first_task": first,
                   "fast_route": fast, "fast_route_share": round(100 * share, 1)}


def _fast_route_confidence(probe: Retriever, held_out: Sequence[HistoryRow],
                           full: Sequence[float], minimum: int = 20,
                           ) -> tuple[float | None, float]:
    """(the lowest lexical confidence at which the fast route loses nothing, the share of
    held-out rows it would take); (None, 0) when it never qualifies.

    Rows are taken from the most confident down; a cut qualifies when the fast route's mean set
    F1 on the rows it takes is at least the full path's on the same rows (``full``), over at
    least ``minimum`` rows."""
    router = probe.router()
    if router is None or router.lexical is None:
        return None, 0.0
    rows: list[tuple[float, float, float]] = []
    for row, full_f1 in zip(held_out, full, strict=True):
        confidence, gid = router.lexical_top(row.request, 1)[0]
        record = probe.store.node(gid)
        members = set(members_of(record))
        rows.append((confidence, f1(members, set(row.skills)), full_f1))
    return lossless_cut(rows, minimum)


FAST_ROUTE_FLOOR = 0.5
"""The fast route never answers below this lexical confidence: the words alone must hold most
of the router's belief. (On ToolLinkOS a cut of 0.32, lossless on 104 held-out rows, cost 1.5
points of set F1 on the test queries.)"""


def lossless_cut(rows: Sequence[tuple[float, float, float]], minimum: int = 20,
                 floor: float = FAST_ROUTE_FLOOR) -> tuple[float | None, float]:
    """``rows`` are (confidence, fast F1, full F1). The lowest confidence, at least ``floor``,
    such that the rows at or above it score at least as well on the fast route as on the full
    one, and the share of rows it takes; (None, 0) when no cut of at least ``minimum`` rows
    qualifies."""
    ordered = sorted(rows, key=lambda r: -r[0])
    best: float | None = None
    taken = 0
    fast_sum = full_sum = 0.0
    for index, (confidence, fast_f1, full_f1) in enumerate(ordered):
        if confidence < floor:
            break
        fast_sum += fast_f1
        full_sum += full_f1
        boundary = index + 1 == len(ordered) or ordered[index + 1][0] < confidence
        if boundary and index + 1 >= minimum and fast_sum >= full_sum - 1e-9:
            best, taken = confidence, index + 1
    return best, taken / len(ordered) if ordered else 0.0


def _best_threshold(points: Sequence[tuple[float, float, float]]) -> tuple[float, float]:
    """(threshold, mean set F1): groups at or above it are taken, below it single skills."""
    candidates = sorted({round(p[0], 3) for p in points if p[0] >= 0} | {0.0, 1.01})
    best_t, best_value = 1.01, -1.0
    for t in candidates:
        value = statistics.fmean(p[1] if p[0] >= t else p[2] for p in points)
        if value > best_value + 1e-9:
            best_t, best_value = t, value
    return best_t, best_value


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchResult:
    dataset: str
    mode: str
    store: str
    queries: int
    metrics: Mapping[str, float]
    details: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "mode": self.mode, "store": self.store,
                "queries": self.queries, "metrics": dict(self.metrics),
                "details": dict(self.details)}


def hide_skill_sets(dataset: Dataset, share: float, seed: int = 0,
                    ) -> tuple[Dataset, set[frozenset[str]]]:
    """The dataset without ``share`` of its recurring skill sets (seen in two or more history
    rows, chosen with a fixed seed) in history, and with only the queries that need one."""
    counts = Counter(frozenset(row.skills) for row in dataset.history if row.skills)
    recurring = sorted((s for s, n in counts.items() if n >= 2), key=lambda s: sorted(s))
    chosen = set(random.Random(seed).sample(recurring, round(len(recurring) * share)))
    history = tuple(row for row in dataset.history if frozenset(row.skills) not in chosen)
    queries = tuple(q for q in dataset.queries if frozenset(q.gold) in chosen)
    return replace(dataset, history=history, queries=queries), chosen


STAGES: dict[str, tuple[str, dict[str, Any]]] = {
    "groups": ("no group answers: skills only, with what was learned (co-use, transitions)",
               {"groups": None}),
    "fast-route": ("every request is embedded (the router's words alone never answer)",
                   {"groups": {"fast_route": None}}),
    "one-skill": ("one skill never replaces a chosen group",
                  {"groups": {"one_skill_margin": None, "step_lead": None}}),
    "support": ("a group needs no step among the request's best skills",
                {"groups": {"support_depth": None, "top_lead": None}}),
    "task-cover": ("a group need not cover the tasks a request states in turn",
                   {"plan": {"task_cover": None}}),
    "final-steps": ("the router alone ranks groups (no evidence from their final steps)",
                    {"groups": {"final_steps": None}}),
    "siblings": ("no sibling comparison between groups named alike",
                 {"groups": {"siblings": None}}),
    "near-miss": ("no runner-up group replaces the chosen one", {"plan": {"near_miss": None}}),
    "stand-in": ("no skill named like a group's final step stands in for it",
                 {"plan": {"stand_in": None}}),
    "parts": ("the request is not split into parts: one cut of its ranking",
              {"plan": {"parts": False}}),
    "partner": ("a part's skill gets no lead for following an earlier part's",
                {"plan": {"partner_boost": None}}),
    "planner": ("no order from the request, data flow or transitions (declared prerequisites "
                "and learned groups only)", {"plan": {"order": False}}),
    "closure": ("a selected skill's declared prerequisites are not added",
                {"plan": {"closure": None}}),
    "gloss": ("no English gloss for a request in Chinese", {"skills": {"gloss": False}}),
    "fit": ("a skill fits by its hybrid score alone (not its embedding)",
            {"skills": {"fit_cosine": None}}),
}
"""What ``bench --without STAGE`` turns off, and the settings that do it (changes to
:class:`~skillgrove.graph.stages.Settings`, by stage): applied before calibration (nothing is
fitted for a stage that is off) and again after it."""


def without_stages(settings: Settings, stages: Sequence[str]) -> Settings:
    """``settings`` with ``stages`` (names of :data:`STAGES`) off."""
    for stage in stages:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}: one of {', '.join(STAGES)}")
        settings = settings.but(**STAGES[stage][1])
    return settings


def fit_settings(build: Callable[[str, Sequence[HistoryRow], int], GraphStore],
                 history: Sequence[HistoryRow], encoder: Encoder, base: Settings,
                 say: Callable[[str], None] = lambda _: None,
                 ) -> tuple[Settings, dict[str, Any]]:
    """The settings a library's history fits, and how each was chosen: what ``skillgrove
    index --history`` stores for every search and what ``skillgrove bench`` scores with.

    History is split (``split_history``: a seeded tenth, at most 500 rows, held out); a
    library learned from the other rows only (``build(name, fit_rows, min_support)``: the
    library's skills with the groups those rows give, indexed) answers the held-out requests,
    and each stage's settings are chosen by the set F1 of those answers, in turn: the
    single-skill weights and cut, the choice among groups (final steps, siblings), the
    near-miss and stand-in margins, the order of tasks, then the group threshold and the rules
    that let skills replace a group. Fewer than ``MIN_CALIBRATION_ROWS`` held-out rows (a
    history under 100 rows) fit only the selection floor (``skills.minimum``), on every row
    when there are ``MIN_CALIBRATION_ROWS`` of them (the ranking it cuts learns nothing from
    history, so no row need be held out), and the group support rule by folds
    (:func:`calibrate_support_folds`); the rest of ``base`` stays, and the details say so."""
    fit_rows, held_out = split_history(history)
    if len(held_out) < MIN_CALIBRATION_ROWS:
        kept = {"sample": len(held_out), "history_rows": len(history),
                "kept": f"defaults: {len(held_out)} held-out rows, fewer than "
                        f"{MIN_CALIBRATION_ROWS}"}
        rows = [r for r in history if r.skills]
        if len(rows) < MIN_CALIBRATION_ROWS:
            return base, kept
        # Only the selection floor, whether anything fits at all (on a library whose real
        # requests share few words with its skills, the default floor leaves a request in
        # seven empty): it is one number, and the skill ranking it cuts learns nothing from
        # history (BM25 and the embedding), so every row judges it without being held out,
        # on a library of the skills alone with no co-use or transitions the rows give away.
        # The weight and the ratio stay: fitted on 50 rows they lost 1-2 points on ToolLinkOS.
        say(f"fitting the selection floor on {len(rows)} history rows")
        store = build("calibration-skills", (), 2)
        fitted, skill_calibration = calibrate_skills(Retriever(store, encoder, base), rows,
                                                     (base.skills.vector_weight,),
                                                     (base.skills.ratio,))
        store.close()
        # And whether a group must be supported by the request's best skills, which a short
        # history can judge only by answering each of its rows from the others (FOLDS).
        say(f"fitting the group support rule on {FOLDS} folds of {len(rows)} rows")
        fitted, support_fit = calibrate_support_folds(build, rows, encoder, fitted)
        return fitted, {**kept, **skill_calibration, **support_fit, "skill_sample": len(rows),
                        "kept": f"defaults beyond the floor and the support rule: "
                                f"{len(held_out)} held-out rows, fewer than "
                                f"{MIN_CALIBRATION_ROWS}"}
    say(f"calibrating on {len(held_out)} held-out history rows")
    targets: dict[str, Any] | None = None
    support = draft_support(len(history))
    if _recurring_rows(held_out, fit_rows, support) < TARGET_MIN_ROWS:
        # Sets seen twice lose their group when one row is held out: the choice among groups
        # is then calibrated where the sets seen once are groups too (first, because with
        # --store neo4j every build replaces the one database).
        once = build("calibration-once", fit_rows, 1)
        base, targets = calibrate_targets(Retriever(once, encoder, base), held_out)
        targets["library"] = "sets seen once kept"
        once.close()
    store = build("calibration", fit_rows, support)
    base, skill_calibration = calibrate_skills(Retriever(store, encoder, base), held_out)
    if support == 1:
        # Groups drafted from sets seen once: the router rests on one or two past requests a
        # group, and the groups' own words may choose better. With recurring sets it stays:
        # on ToolLinkOS's full history the held-out rows preferred the words by 1.0 point of
        # set F1 with every group rule still off, and its queries then lost 7.4 (95.0 against
        # 87.6), what the final steps and siblings fitted after it add to the router.
        base, routing = calibrate_routing(Retriever(store, encoder, base), held_out)
        skill_calibration.update(routing)
    if targets is None:
        base, targets = calibrate_targets(Retriever(store, encoder, base), held_out)
    base, near_miss = calibrate_near_miss(Retriever(store, encoder, base), held_out)
    base, stand_in = calibrate_stand_in(Retriever(store, encoder, base), held_out)
    near_miss.update(stand_in)
    base, order = calibrate_order(Retriever(store, encoder, base), held_out)
    near_miss.update(order)
    if targets.get("library") == "sets seen once kept":
        # The group threshold too is fitted where the held-out rows' sets are groups (seen
        # once in the fit rows): otherwise almost no held-out row has its group to choose,
        # and the threshold learns only that groups are wrong.
        store.close()
        store = build("calibration-once-groups", fit_rows, 1)
        base, calibration = calibrate(Retriever(store, encoder, base), held_out, fit_rows,
                                      min_support=1)
    else:
        base, calibration = calibrate(Retriever(store, encoder, base), held_out, fit_rows,
                                      min_support=support)
    store.close()
    calibration.update(skill_calibration)
    calibration.update(targets)
    calibration.update(near_miss)
    calibration["history_rows"] = len(history)
    return base, calibration


def fit_on_dataset(dataset: Dataset, scratch: Path, encoder: Encoder,
                   make_store: Callable[[Path], GraphStore], base: Settings = DEFAULT_SETTINGS,
                   say: Callable[[str], None] = lambda _: None,
                   ) -> tuple[Settings, dict[str, Any]]:
    """:func:`fit_settings` on the data set's history, for its library as an owner has it
    before learning anything (its skills alone, written under ``scratch``)."""
    skills_root = write_library(dataset, scratch / "skills", "flat")[0]
    skills_only = load_library([skills_root], LoadOptions())

    def build(name: str, rows: Sequence[HistoryRow], min_support: int) -> GraphStore:
        return learned_store([skills_root], skills_only, rows, scratch / name, min_support,
                             LoadOptions(), encoder, make_store)

    return fit_settings(build, dataset.history, encoder, base, say)


def run_bench(folder: Path, mode: str, encoder: Encoder,
              make_store: Callable[[Path], GraphStore], store_name: str = "embedded",
              config: Settings | None = None, limit: int | None = None,
              progress: Callable[[str], None] | None = None,
              hide_sets: float = 0.0, without: Sequence[str] = ()) -> BenchResult:
    """Run the benchmark in ``folder``. ``hide_sets``: remove that share of the recurring
    skill sets (seeded) from history entirely and score only the queries whose gold set was
    hidden: what composition does for a task no learned group covers. ``without``: stages
    (:data:`STAGES`) turned off, for an ablation."""
    dataset = read_dataset(folder)
    say = progress or (lambda _: None)
    hidden: set[frozenset[str]] = set()
    if hide_sets > 0:
        dataset, hidden = hide_skill_sets(dataset, hide_sets)
        say(f"hid {len(hidden)} recurring skill sets from history; "
            f"{len(dataset.queries)} queries need one of them")
    timings: dict[str, float] = {}
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:8]
    base = without_stages(config or DEFAULT_SETTINGS, without)
    details: dict[str, Any] = {"history_rows": len(dataset.history)}
    if without:
        details["without"] = list(without)
    with tempfile.TemporaryDirectory(prefix=f"skillgrove-bench-{digest}-") as scratch:
        if mode == "groups":
            # Calibrate first: with --store neo4j both builds share one database.
            started = time.perf_counter()

            base, calibration = fit_on_dataset(dataset, Path(scratch), encoder, make_store,
                                               base, say)
            base = without_stages(base, without)
            details["calibration"] = calibration
            timings["calibration_s"] = round(time.perf_counter() - started, 1)
            say(f"calibrated on history: {calibration}")
        started = time.perf_counter()
        store, library, group_count = _build(dataset, Path(scratch) / "bench", mode, None,
                                             encoder, make_store, say)
        timings["build_s"] = round(time.perf_counter() - started, 1)
        # Queries are embedded by the bare model: the cache would make repeated runs look fast.
        query_encoder = _TimedEncoder(getattr(encoder, "encoder", encoder))
        retriever = Retriever(store, query_encoder, base)
        details.update(skills=len(library.skills), groups=group_count)
        if len(library.skills) != len(dataset.skills):
            details["skills_in_file"] = len(dataset.skills)
        _, fates = usable_contracts(dataset)
        if fates["retyped"] or fates["left out"]:
            details["contracts"] = {"retyped": fates["retyped"], "left_out": fates["left out"]}
            said = [f"{fates['retyped']} retyped to JSON Schema's type names"] \
                if fates["retyped"] else []
            if fates["left out"]:
                said.append(f"{fates['left out']} that the loader refuses left out of the "
                            "frontmatter (kept in the body as text)")
            say("declared contracts: " + "; ".join(said))
        ids_by_name = {s.name: s.id for s in library.skills.values()}
        group_sets = [frozenset(g.skills) for g in library.groups.values()]
        names_to_ids = {s.name: s.id for s in library.skills.values()}
        group_id_sets = [frozenset(names_to_ids.get(n, n) for n in s) for s in group_sets]
        queries = dataset.queries[:limit] if limit else dataset.queries
        retriever.search("warm up the encoder and the indexes")
        rows, latencies = [], []
        encode_ms: list[float] = []
        for query in queries:
            calls = len(query_encoder.seconds)
            began = time.perf_counter()
            toolbox = retriever.search(query.request)
            latencies.append((time.perf_counter() - began) * 1000)
            encode_ms.append(1000 * sum(query_encoder.seconds[calls:]))
            gold = frozenset(query.gold)
            composite = any(s < gold for s in group_id_sets)
            rows.append(score_query(toolbox, query, ids_by_name, composite))
        store.close()
    details["timings"] = timings
    metrics = aggregate(rows, latencies)
    # Where the time goes: requests that were embedded against those the fast route answered
    # from their words alone, and within the former, the model against the rest.
    embedded = [(t, e) for t, e in zip(latencies, encode_ms, strict=True) if e > 0]
    metrics["fast_route_rate"] = round(100 * (1 - len(embedded) / len(latencies)), 1) \
        if latencies else 0.0
    if embedded:
        metrics["embedded_latency_ms_p50"] = round(statistics.median(t for t, _ in embedded), 2)
        metrics["encode_ms_p50"] = round(statistics.median(e for _, e in embedded), 2)
        metrics["retrieval_ms_p50"] = round(statistics.median(t - e for t, e in embedded), 2)
    fast = [t for t, e in zip(latencies, encode_ms, strict=True) if e == 0]
    if fast:
        metrics["fast_route_latency_ms_p50"] = round(statistics.median(fast), 2)
    return BenchResult(dataset.name, mode, store_name, len(queries), metrics, details)


def _build(dataset: Dataset, folder: Path, mode: str, history: Sequence[HistoryRow] | None,
           encoder: Encoder, make_store: Callable[[Path], GraphStore],
           say: Callable[[str], None] | None = None, min_support: int | None = None,
           ) -> tuple[GraphStore, Library, int]:
    """Write the dataset's library under ``folder``, learning from ``history``, and index it."""
    folder.mkdir(parents=True)
    root, co_use, group_count = write_library(dataset, folder / "library", mode, history,
                                              min_support)
    library = load_library([root], LoadOptions())
    if library.errors and say:
        # What was learned never breaks the library: a draft that does not validate is left
        # out (the loader keeps only valid groups), and the harness says so.
        say(f"{len(library.errors)} errors in the learned library, left out; the first: "
            + library.errors[0].format())
    store = make_store(folder)
    if say:
        say(f"indexing {len(library.skills)} skills, {len(library.groups)} groups")
    rows = dataset.history if history is None else history
    transitions = transition_counts(rows) if mode == "groups" else None
    index_library(library, store, encoder, co_use=co_use, transitions=transitions)
    return store, library, group_count


class _TimedEncoder:
    """Wraps the query encoder to time each call."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds: list[float] = []

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def encode(self, texts: Sequence[str]) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.encode(texts)
        finally:
            self.seconds.append(time.perf_counter() - started)


def format_table(result: BenchResult) -> str:
    lines = [f"{result.dataset}: mode {result.mode}, store {result.store}, "
             f"{result.queries} queries"]
    for key, value in result.metrics.items():
        lines.append(f"  {key:<26} {value:>8}")
    calibration = result.details.get("calibration")
    if calibration and calibration.get("sample"):
        lines.append(f"  (calibrated on {calibration.get('sample')} held-out history rows: "
                     f"group threshold {calibration.get('threshold')}, router confidence "
                     f"{calibration.get('router_min_confidence')}, fast route at "
                     f"{calibration.get('fast_route')} for "
                     f"{calibration.get('fast_route_share')}% of them, one skill over a group "
                     f"at a margin of {calibration.get('one_skill_margin')}, skill vector "
                     f"weight {calibration.get('skill_vector_weight')}, selection cut "
                     f"{calibration.get('select_ratio')} / {calibration.get('select_min')})")
    return "\n".join(lines) + "\n"
