"""The graph commands of the CLI: index, search, graph neighbors, graph export."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from graph.documents import GROUP_PREFIX
from graph.embedded import EmbeddedStore
from graph.embeddings import CachedEncoder, EmbeddingCache, SentenceTransformerEncoder
from graph.errors import IndexMissingError
from graph.export import to_dot, to_mermaid
from graph.indexer import index_library
from graph.model import NodeKind, NodeRecord
from graph.retrieval import RequestContext, Retriever, Toolbox
from graph.store import GraphStore
from skills.errors import SkillgroveError

INDEX_FILE = "graph.sqlite"


def index_dir(args: argparse.Namespace) -> Path:
    configured = args.index or os.environ.get("SKILLGROVE_INDEX")
    return Path(configured) if configured else Path(".skillgrove")


def cache_path() -> Path:
    configured = os.environ.get("SKILLGROVE_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "skillgrove"
    return base / "embeddings.sqlite"


def make_encoder(args: argparse.Namespace) -> CachedEncoder:
    return CachedEncoder(SentenceTransformerEncoder(args.model), EmbeddingCache(cache_path()))


def open_store(args: argparse.Namespace, *, create: bool = False) -> GraphStore:
    path = index_dir(args) / INDEX_FILE
    if not create and not path.exists():
        raise IndexMissingError(f"no index at {path}: run `skillgrove index` first "
                                "(or pass --index DIR)")
    return EmbeddedStore(path)


class _Progress:
    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled and stream.isatty()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        self.stream.write(f"\r{stage:<10} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{done}/{total}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    from runtime.cli import load_from_args

    library = load_from_args(args, write_ids=True)
    for diagnostic in library.errors:
        out.write(diagnostic.format() + "\n")
    store = open_store(args, create=True)
    encoder = make_encoder(args)
    try:
        result = index_library(library, store, encoder, _Progress(sys.stderr, not args.quiet))
    finally:
        store.close()
    report = result.report
    out.write(
        f"indexed {result.skills} skills and {result.groups} groups "
        f"into {'Neo4j' if args.store == 'neo4j' else index_dir(args)}: "
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.removed)} "
        f"removed, {report.unchanged} unchanged; {report.edges_added} edges written, "
        f"{report.edges_removed} removed; {result.embedded} texts embedded "
        f"({result.seconds:.1f} s)\n")
    if library.errors:
        out.write(f"{len(library.errors)} errors: the skills and groups they concern were left "
                  "out (see `skillgrove check`)\n")
    return 0


def load_context(path: Path | None) -> RequestContext:
    if path is None:
        return RequestContext()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SkillgroveError(f"cannot read context file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise SkillgroveError(f"{path}:{exc.lineno}:{exc.colno}: context is not JSON: "
                              f"{exc.msg}") from exc
    if not isinstance(data, dict):
        raise SkillgroveError(f"{path}: context must be a JSON object")
    return RequestContext.from_json(data)


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    store = open_store(args)
    try:
        retriever = Retriever(store, make_encoder(args))
        toolbox = retriever.search(args.request, load_context(args.context), k=args.k)
    finally:
        store.close()
    if args.json:
        out.write(json.dumps(toolbox.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(render_toolbox(toolbox))
    return 0


def render_toolbox(toolbox: Toolbox) -> str:
    lines: list[str] = []
    group = toolbox.group
    if group is not None:
        state = "ready" if group.ready else "needs input: " + ", ".join(group.missing_inputs)
        ex = group.explanation
        lines.append(f"Group  {group.id.removeprefix(GROUP_PREFIX)}  \"{group.name}\"  "
                     f"score {group.score:.2f} (vector {ex['vector']:.2f}, lexical "
                     f"{ex['lexical']:.2f})  {state}")
        lines.append("  steps: " + " -> ".join(group.member_names))
    else:
        lines.append(f"No group: {toolbox.fallback_reason}")
    lines.append("")
    lines.append("  #  score  skill                            description")
    for rank, skill in enumerate(toolbox.skills, 1):
        mark = "*" if skill.id in toolbox.selected else " "
        avail = "" if skill.available else "  [unavailable]"
        desc = skill.description.replace("\n", " ")
        desc = desc[:60] + ("..." if len(desc) > 60 else "")
        lines.append(f"{rank:>3}{mark} {skill.score:5.2f}  {skill.name[:32]:<32} {desc}{avail}")
    if toolbox.suggestions:
        lines.append("")
        lines.append("Usually used with:")
        for suggestion in toolbox.suggestions:
            lines.append(f"  {suggestion.name}: {suggestion.reason}")
    lines.append(f"\n({toolbox.latency_ms:.1f} ms; * = selected)")
    return "\n".join(lines) + "\n"


def resolve_node(store: GraphStore, key: str) -> NodeRecord:
    for candidate in (key, GROUP_PREFIX + key):
        record = store.node(candidate)
        if record is not None:
            return record
    for record in store.nodes():
        if record.name == key:
            return record
    raise SkillgroveError(f"no skill or group named '{key}' in the index")


def cmd_neighbors(args: argparse.Namespace, out: TextIO) -> int:
    store = open_store(args)
    try:
        record = resolve_node(store, args.id)
        rows: list[dict[str, Any]] = []
        for edge, other in store.neighbors(record.id):
            direction = "->" if edge.src == record.id else "<-"
            rows.append({"edge": edge.kind.value, "direction": direction, "weight": edge.weight,
                         "kind": other.kind.value, "name": other.name, "id": other.id,
                         "props": dict(edge.props)})
    finally:
        store.close()
    rows.sort(key=lambda r: (r["edge"], -r["weight"], r["name"]))
    out.write(f"{record.kind.value} {record.name} ({record.id})\n")
    for row in rows:
        props = " ".join(f"{k}={v}" for k, v in row["props"].items())
        out.write(f"  {row['direction']} {row['edge']:<10} {row['weight']:>6.2f}  "
                  f"{row['kind']:<5} {row['name']}  {props}".rstrip() + "\n")
    return 0


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    store = open_store(args)
    try:
        record = resolve_node(store, args.group)
    finally:
        store.close()
    if record.kind is not NodeKind.GROUP:
        raise SkillgroveError(f"'{args.group}' is a skill, not a group")
    out.write(to_mermaid(record) if args.format == "mermaid" else to_dot(record))
    return 0
