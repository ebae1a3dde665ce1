"""The graph commands of the CLI: index, search, graph neighbors, graph export."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, TextIO

from skillgrove.graph.documents import GROUP_PREFIX
from skillgrove.graph.embedded import EmbeddedStore
from skillgrove.graph.embeddings import CachedEncoder, EmbeddingCache, default_encoder
from skillgrove.graph.errors import IndexMissingError
from skillgrove.graph.export import to_dot, to_mermaid
from skillgrove.graph.indexer import index_library
from skillgrove.graph.model import NodeKind, NodeRecord
from skillgrove.graph.retrieval import RequestContext, Retriever, Toolbox
from skillgrove.graph.store import GraphStore
from skillgrove.skills.errors import SkillgroveError

INDEX_FILE = "graph.sqlite"


def index_dir(args: argparse.Namespace) -> Path:
    configured = args.index or os.environ.get("SKILLGROVE_INDEX")
    return Path(configured) if configured else Path(".skillgrove")


def cache_path() -> Path:
    configured = os.environ.get("SKILLGROVE_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "skillgrove"
    return base / "embeddings.sqlite"


def make_encoder(args: argparse.Namespace) -> CachedEncoder:
    return CachedEncoder(default_encoder(args.model, cache_path().parent),
                         EmbeddingCache(cache_path()))


def open_store(args: argparse.Namespace, *, create: bool = False) -> GraphStore:
    if args.store == "neo4j":
        from skillgrove.graph.neo4j_store import Neo4jStore

        return Neo4jStore.from_environment()
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
    from skillgrove.runtime.cli import load_from_args

    library = load_from_args(args, write_ids=True)
    for diagnostic in library.errors:
        out.write(diagnostic.format() + "\n")
    store = open_store(args, create=True)
    encoder = make_encoder(args)
    runs = _recorded_runs(args)
    try:
        result = index_library(library, store, encoder, _Progress(sys.stderr, not args.quiet),
                               runs=runs)
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


def _recorded_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every run in the index folder's run log (quality statistics and co-use learn from
    them); none when nothing has run yet."""
    if not (index_dir(args) / "runs.sqlite").exists():
        return []
    log = run_log_for(args)
    try:
        return [run.to_dict() for run in log.list(limit=1_000_000)]
    finally:
        log.close()


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
        if "demoted" in ex:
            lines.append(f"  demoted by the quality filter: {ex['demoted']}")
    else:
        lines.append(f"No group: {toolbox.fallback_reason}")
    lines.append("")
    lines.append("  #  score  skill                            description")
    for rank, skill in enumerate(toolbox.skills, 1):
        mark = "*" if skill.id in toolbox.selected else " "
        avail = "" if skill.available else "  [unavailable]"
        desc = skill.description.replace("\n", " ")
        desc = desc[:60] + ("..." if len(desc) > 60 else "")
        if "demoted" in skill.explanation:
            avail += f"  [demoted: {skill.explanation['demoted']}]"
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


# -- running groups ---------------------------------------------------------------------------


def library_paths(args: argparse.Namespace) -> list[Path]:
    from skillgrove.runtime.paths import default_paths

    return list(getattr(args, "library", None) or default_paths())


def load_runtime_library(args: argparse.Namespace) -> Any:
    from skillgrove.groups.library import load_library

    return load_library(library_paths(args))


def parse_inputs(pairs: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SkillgroveError(f"--input {pair!r}: write it as name=value")
        key, value = pair.split("=", 1)
        values[key.strip()] = value
    return values


def run_log_for(args: argparse.Namespace) -> Any:
    from skillgrove.graph.runlog import SqliteRunLog

    return SqliteRunLog(index_dir(args) / "runs.sqlite")


class ProgressDisplay:
    """Prints the event stream as it happens (the CLI's live progress)."""

    SYMBOLS: ClassVar[dict[str, str]] = {
        "step_started": ">", "step_finished": "ok", "step_failed": "FAIL", "step_skipped": "skip",
        "step_retrying": "retry"}

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, event: Any) -> None:
        kind = event.kind.value
        if kind == "run_started" and not event.step:
            self.stream.write(f"run {event.run_id}: group {event.group}\n")
        elif kind == "run_finished" and not event.step:
            self.stream.write(f"run {event.run_id}: {event.status} in {event.seconds:.2f} s"
                              + (f" ({event.message})" if event.message else "") + "\n")
        elif kind in self.SYMBOLS:
            detail = ""
            if kind == "step_started" and (event.attempt or 1) > 1:
                detail = f" (attempt {event.attempt})"
            elif kind == "step_finished" and event.seconds is not None:
                detail = f" {event.seconds:.2f} s" + (f" ({event.message})" if event.message
                                                       else "")
            elif kind == "step_retrying":
                detail = f" in {event.data.get('delay', 0):.2f} s: {event.message}"
            elif event.message:
                detail = f": {event.message}"
            self.stream.write(f"  {self.SYMBOLS[kind]:<5} {event.step}{detail}\n")
        self.stream.flush()


def make_runner(args: argparse.Namespace, library: Any, events: Any) -> Any:
    from skillgrove.runtime.executors import SubprocessExecutor
    from skillgrove.runtime.runner import Runner, RunOptions

    return Runner(library.groups, library.skills, SubprocessExecutor(),
                  run_log=run_log_for(args), events=events,
                  options=RunOptions(max_concurrency=args.concurrency))


def _context_values(path: Path | None) -> dict[str, Any]:
    return dict(load_context(path).values)


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    library = load_runtime_library(args)
    runner = make_runner(args, library, None)
    plan = runner.plan(args.group, parse_inputs(args.input), _context_values(args.context))
    if args.json:
        from dataclasses import asdict

        out.write(json.dumps(asdict(plan), indent=2, ensure_ascii=False, default=str) + "\n")
        return 0
    out.write(f"group {plan.group}\ninputs: {json.dumps(plan.inputs, ensure_ascii=False)}\n")
    steps = {s.id: s for s in plan.steps}
    for level, ids in enumerate(plan.levels):
        out.write(f"level {level}:\n")
        for sid in ids:
            step = steps[sid]
            note = f"  [skipped: {step.skip_reason}]" if step.skip_reason else ""
            out.write(f"  {sid}: {step.kind} {step.target}{note}\n")
            for key, value in step.inputs.items():
                out.write(f"      {key} = {json.dumps(value, ensure_ascii=False)[:120]}\n")
    return 0


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    library = load_runtime_library(args)
    events = ProgressDisplay(sys.stderr) if not args.json else None
    runner = make_runner(args, library, events or (lambda e: None))
    resume = None
    if args.resume:
        resume = run_log_for(args).get(args.resume)
        if resume is None:
            raise SkillgroveError(f"no run '{args.resume}' in {index_dir(args) / 'runs.sqlite'}")
    inputs = parse_inputs(args.input) if args.input or resume is None else None
    context = _context_values(args.context) if args.context or resume is None else None
    record = runner.run(args.group, inputs, context, resume=resume)
    if args.json:
        out.write(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(json.dumps(dict(record.outputs), indent=2, ensure_ascii=False,
                             default=str) + "\n")
    return 0 if record.status == "success" else 1


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    log = run_log_for(args)
    if args.runs_command == "show":
        record = log.get(args.id)
        if record is None:
            raise SkillgroveError(f"no run '{args.id}'")
        out.write(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
        return 0
    for record in log.list(args.limit):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started_at))
        failed = [s.id for s in record.steps if s.status == "failure"]
        out.write(f"{record.id}  {when}  {record.group:<28} {record.status:<8} "
                  f"{record.seconds:6.2f} s" + (f"  failed: {', '.join(failed)}" if failed
                                                 else "") + "\n")
    return 0


def _injection(args: argparse.Namespace, library: Any, toolbox: Toolbox, run: Any) -> Any:
    from skillgrove.runtime.inject import build_injection

    return build_injection(toolbox, library.catalog.by_id(), run, budget=args.budget,
                           fmt=args.format)


def _search(args: argparse.Namespace, request: str, context: RequestContext) -> Toolbox:
    store = open_store(args)
    try:
        return Retriever(store, make_encoder(args)).search(request, context)
    finally:
        store.close()


def cmd_inject(args: argparse.Namespace, out: TextIO) -> int:
    library = load_runtime_library(args)
    toolbox = _search(args, args.request, load_context(args.context))
    run = None
    if args.run:
        run = run_log_for(args).get(args.run)
        if run is None:
            raise SkillgroveError(f"no run '{args.run}'")
    injection = _injection(args, library, toolbox, run)
    out.write(injection.text)
    sys.stderr.write(f"[{injection.tokens} tokens ({'cl100k_base'}), budget "
                     f"{injection.budget or 'none'}, level {injection.level}]\n")
    return 0


def cmd_ask(args: argparse.Namespace, out: TextIO) -> int:
    """Search, validate the chosen group against the context, run it (or fall back), inject."""
    library = load_runtime_library(args)
    if args.store == "embedded" and not (index_dir(args) / INDEX_FILE).exists():
        sys.stderr.write(f"no index yet: indexing {', '.join(map(str, library.roots))}\n")
        store = open_store(args, create=True)
        try:
            index_library(library, store, make_encoder(args))
        finally:
            store.close()
    context = load_context(args.context)
    toolbox = _search(args, args.request, context)
    run = None
    group = toolbox.group
    if group is not None and group.ready:
        runner = make_runner(args, library, ProgressDisplay(sys.stderr))
        gid = group.id.removeprefix(GROUP_PREFIX)
        declared = {spec.name for spec in library.groups[gid].inputs}
        inputs = {k: v for k, v in context.values.items() if k in declared}
        inputs.update(parse_inputs(args.input))
        run = runner.run(gid, inputs, dict(context.values), request=args.request)
    elif group is not None:
        sys.stderr.write(f"group '{group.name}' needs input: {', '.join(group.missing_inputs)}"
                         " (pass them in --context values); not run\n")
    injection = _injection(args, library, toolbox, run)
    out.write(injection.text)
    sys.stderr.write(f"[{injection.tokens} tokens, cl100k_base; level {injection.level}]\n")
    return 0 if run is None or run.status == "success" else 1


# -- learning and benchmarks ------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from skillgrove.runtime.bench import format_table, run_bench

    def make_store(scratch: Path) -> GraphStore:
        if args.store == "neo4j":
            return open_store(args)
        return EmbeddedStore(scratch / "graph.sqlite")

    def say(message: str) -> None:
        if not args.json:
            sys.stderr.write(message + "\n")

    result = run_bench(args.dir, args.mode, make_encoder(args), make_store, args.store,
                       limit=args.limit, progress=say)
    if args.json:
        out.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    else:
        out.write(format_table(result))
    return 0


def cmd_groups_suggest(args: argparse.Namespace, out: TextIO) -> int:
    from skillgrove.graph.learning import HistoryRow, draft_to_yaml, mine_groups, read_history

    if args.history:
        rows = read_history(args.history)
    else:
        rows = [HistoryRow(r.id, r.request or "", tuple(s.target for s in r.steps
                                                        if s.kind == "skill"
                                                        and s.status == "success"),
                           tuple(), r.status == "success")
                for r in run_log_for(args).list(100000)]
    drafts = mine_groups(rows, min_support=args.min_support)
    args.out.mkdir(parents=True, exist_ok=True)
    written = 0
    for draft in drafts[: args.limit]:
        target = args.out / f"{draft.id}.yaml"
        if target.exists() and not args.force:
            out.write(f"skipped {target} (exists; --force replaces it)\n")
            continue
        target.write_text(draft_to_yaml(draft), encoding="utf-8")
        out.write(f"wrote {target}: {len(draft.members)} skills, seen {draft.support} times\n")
        written += 1
    out.write(f"{written} draft groups in {args.out}; review them, then keep the ones you want "
              "in a groups/ folder of your library\n")
    return 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """The bundled library end to end, after a plain install: index, ask, run, inject."""
    import tempfile

    from skillgrove.runtime.paths import bundled_library

    library = bundled_library()
    samples = library / "samples"
    os.environ.setdefault("SKILLGROVE_OUTBOX", str(index_dir(args) / "outbox"))
    values = {"pdf_path": str(samples / "quarterly_report.pdf"),
              "team_email": "team@example.com", "report_name": "Q3 demo"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"values": values}, handle)
        context_file = Path(handle.name)
    try:
        request = "summarize the quarterly report PDF and email the key numbers to my team"
        out.write(f"$ skillgrove ask {json.dumps(request)}  (context: {json.dumps(values)})\n\n")
        args.request, args.context, args.input = request, context_file, []
        args.library = [library]
        return cmd_ask(args, out)
    finally:
        context_file.unlink(missing_ok=True)
