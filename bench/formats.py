"""A data set as other tools write it: the same cut of a benchmark folder, rewritten the ways a
data set in the format of ``shared/benchmarks/FORMAT.md`` may differ from ours, each run
through the harness (``skillgrove bench``'s own path) beside the cut as written. Prints
figures, asserts nothing.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/formats.py [DIR] [--skills 120] [--history 80]
        [--queries 40] [--mode groups|flat] [--json]

The cut: the first ``--skills`` skills, and the history rows and queries that use only them.
The rewrites, each alone and then all together:

- ``ids``: every id made one no skill id may be: ``GET /x/{id}``, a space, a slash, CJK
  characters, a leading hyphen, a ``#``, 200 characters (labels rewritten alike);
- ``names``: names camelCased, in UPPER_SNAKE or spaced Title Case;
- ``repeated names``: every fifth skill named as the one before it (two operations called
  ``search``), against FORMAT.md's unique names;
- ``contracts``: declared types in another format's names (``STRING``, ``int``), and one
  contract in nine the loader refuses (a list of properties, an unknown type);
- ``nulls``: null descriptions and bodies, a tags string, a byte-order mark and CRLF lines;
- ``prerequisites by name``: ``depends_on`` naming skills, not giving their ids;
- ``calls``: history rows without edges (an unordered set, as FORMAT.md allows), the first
  skill called again at the end.

A rewrite that costs figures is a data set the harness would answer worse for its spelling
alone. ``skills`` is the number the library loaded: every skill the file holds should load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, default_encoder
from skillgrove.runtime.bench import run_bench
from skillgrove.runtime.commands import cache_path
from skillgrove.skills.loader import retyped

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
ODD_IDS = ("GET /x/{id}", "{id} with space", "ns/{id}", "工具{n}", "-{id}", "{id}#v1",
           "{id}" + "x" * 200)

Rows = dict[str, list[dict[str, Any]]]


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def cut(folder: Path, skills: int, history: int, queries: int) -> Rows:
    kept = _read(folder / "skills.jsonl")[:skills]
    ids = {str(s["id"]) for s in kept}
    return {
        "skills": kept,
        "history": [r for r in _read(folder / "history.jsonl")
                    if {str(s) for s in r["skills"]} <= ids][:history],
        "queries": [q for q in _read(folder / "queries.jsonl")
                    if {str(s) for s in q["gold_skills"]} <= ids][:queries]}


def odd_ids(rows: Rows) -> Rows:
    new = {str(s["id"]): ODD_IDS[n % len(ODD_IDS)].format(id=s["id"], n=n)
           for n, s in enumerate(rows["skills"])}

    def renamed(ids: list[Any]) -> list[str]:
        return [new.get(str(i), str(i)) for i in ids]

    return {
        "skills": [{**s, "id": new[str(s["id"])],
                    **({"depends_on": renamed(s["depends_on"])} if s.get("depends_on") else {})}
                   for s in rows["skills"]],
        "history": [{**r, "skills": renamed(r["skills"]),
                     "edges": [renamed(e) for e in r.get("edges") or []]} for r in rows["history"]],
        "queries": [{**q, "gold_skills": renamed(q["gold_skills"]),
                     "gold_edges": [renamed(e) for e in q.get("gold_edges") or []]}
                    for q in rows["queries"]]}


def names(rows: Rows) -> Rows:
    def spelled(name: str, n: int) -> str:
        words = name.replace("_", "-").split("-")
        return [" ".join(w.capitalize() for w in words),
                words[0] + "".join(w.capitalize() for w in words[1:]),
                "_".join(words).upper()][n % 3]

    return {**rows, "skills": [{**s, "name": spelled(s["name"], n)}
                               for n, s in enumerate(rows["skills"])]}


def _upper_types(value: Any) -> Any:
    return retyped(value, lambda kind: {"integer": "int", "boolean": "bool"}.get(kind,
                                                                                 kind.upper()))


def contracts(rows: Rows) -> Rows:
    skills = []
    for n, skill in enumerate(rows["skills"]):
        skill = dict(skill)
        for key in ("inputs", "outputs"):
            if isinstance(skill.get(key), dict):
                skill[key] = (_upper_types(skill[key]) if n % 9 else
                              {"type": "object", "properties": list(skill[key].get("properties")
                                                                    or []), "x": {"type": "?"}})
        skills.append(skill)
    return {**rows, "skills": skills}


def nulls(rows: Rows) -> Rows:
    skills = []
    for n, skill in enumerate(rows["skills"]):
        skill = dict(skill)
        if n % 7 == 0:
            skill["description"] = None
        if n % 5 == 0:
            skill["body"] = None
        if n % 6 == 0:
            skill["tags"] = "one tag"
        skills.append(skill)
    return {**rows, "skills": skills, "_bom": []}


def repeated_names(rows: Rows) -> Rows:
    skills = [dict(s) for s in rows["skills"]]
    for n in range(4, len(skills), 5):
        skills[n]["name"] = skills[n - 1]["name"]
    return {**rows, "skills": skills}


def by_name(rows: Rows) -> Rows:
    named = {str(s["id"]): s["name"] for s in rows["skills"]}
    return {**rows, "skills": [
        {**s, "depends_on": [named.get(str(d), d) for d in s["depends_on"]]}
        if s.get("depends_on") else s for s in rows["skills"]]}


def calls(rows: Rows) -> Rows:
    return {**rows, "history": [
        {**r, "skills": [*r["skills"], *r["skills"][:1]], "edges": []} for r in rows["history"]]}


REWRITES: dict[str, Callable[[Rows], Rows]] = {
    "ids": odd_ids, "names": names, "repeated names": repeated_names, "contracts": contracts,
    "nulls": nulls, "prerequisites by name": by_name, "calls": calls}


def write(rows: Rows, folder: Path) -> Path:
    folder.mkdir(parents=True)
    bom = "\ufeff" if "_bom" in rows else ""
    end = "\r\n" if "_bom" in rows else "\n"
    for name in ("skills", "history", "queries"):
        text = "".join(json.dumps(r, ensure_ascii=False) + end for r in rows[name])
        (folder / f"{name}.jsonl").write_text(bom + text, encoding="utf-8", newline="")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", type=Path, default=SHARED / "toollinkos")
    parser.add_argument("--skills", type=int, default=120)
    parser.add_argument("--history", type=int, default=80)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--mode", choices=("groups", "flat"), default="groups")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    encoder = CachedEncoder(default_encoder(None, cache_path().parent),
                            EmbeddingCache(cache_path()))
    base = cut(args.dir, args.skills, args.history, args.queries)
    variants: dict[str, Rows] = {"as written": base}
    for label, rewrite in REWRITES.items():
        variants[label] = rewrite(base)
    every = base
    for rewrite in REWRITES.values():
        every = rewrite(every)
    variants["all together"] = every
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="skillgrove-formats-") as scratch:
        for n, (label, rows) in enumerate(variants.items()):
            folder = write(rows, Path(scratch) / f"set{n}")
            try:
                result = run_bench(folder, args.mode, encoder,
                                   lambda path: EmbeddedStore(path / "graph.sqlite"))
            except Exception as exc:  # a data set the harness cannot read is a figure too
                out[label] = {"set_f1": "-", "edge_f1": "-", "completeness@10": "-",
                              "skills": f"stopped: {exc}"[:120]}
                continue
            metrics = result.metrics
            out[label] = {"set_f1": metrics["set_f1"], "edge_f1": metrics.get("edge_f1", "-"),
                          "completeness@10": metrics["completeness@10"],
                          "skills": f"{result.details['skills']} of {len(rows['skills'])}"}
            print(f"  {label}: {out[label]}", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.dir.name}, {len(base['skills'])} skills, {len(base['history'])} history rows, "
          f"{len(base['queries'])} queries, {args.mode} mode")
    print("| rewrite | set F1 | edge F1 | C@10 | skills loaded |")
    print("|---|---|---|---|---|")
    for label, row in out.items():
        print(f"| {label} | {row['set_f1']} | {row['edge_f1']} | {row['completeness@10']} | "
              f"{row['skills']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
