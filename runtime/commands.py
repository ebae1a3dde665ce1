"""The commands of the CLI. Each handler turns its options into one call of the engine
(:class:`skillgrove.runtime.engine.Skillgrove`) and prints the answer; nothing below this module
sees an ``argparse.Namespace``."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

from skillgrove.graph.documents import GROUP_PREFIX
from skillgrove.graph.model import path_of
from skillgrove.runtime.terminal import AnnouncedEncoder, Status, Style, plural
from skillgrove.skills.errors import SkillgroveError

if TYPE_CHECKING:
    from skillgrove.graph.retrieval import RequestContext, Toolbox
    from skillgrove.graph.store import GraphStore
    from skillgrove.runtime.engine import Skillgrove


EXIT_FAILED = 1
"""A mistake (a one-line error on stderr), or a run that did not succeed."""
EXIT_NEEDS_CONFIRMATION = 3
"""``ask``: the chosen group has side effects nobody confirmed; it was planned, not run."""
EXIT_NOTHING_FITS = 4
"""``search``, ``ask``: no group and no single skill fits the request."""
EXIT_LEFT_OUT = 5
"""``index``: skills or groups with errors were left out of the index (listed on stderr)."""


def index_dir(args: argparse.Namespace) -> Path:
    from skillgrove.runtime.engine import default_index_dir

    return Path(args.index) if args.index else default_index_dir()


def usable_index_dir(args: argparse.Namespace) -> Path:
    """The index folder, refused with what to do when it is a file or cannot be written (it
    need not exist yet: the engine creates it)."""
    folder = index_dir(args)
    if args.index:
        name = f"--index {folder}"
    elif os.environ.get("SKILLGROVE_INDEX"):
        name = f"the index folder {folder} ($SKILLGROVE_INDEX)"
    else:
        name = f"the index folder {folder}"
    existing = folder  # the folder, or the nearest parent that exists
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == folder and not folder.is_dir():
        raise SkillgroveError(f"{name} is a file, not a folder: give a folder for the index (it "
                              "is created when missing)")
    if not existing.is_dir():
        raise SkillgroveError(f"{name} cannot be created: {existing} is a file; give a folder "
                              "for the index")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == folder else f" ({existing} is not writable)"
        raise SkillgroveError(f"{name} is not writable{where}: give a folder you can write to, "
                              "or change its permissions")
    return folder


def engine_from_args(args: argparse.Namespace) -> Skillgrove:
    """The one engine a command talks to, built from the options every command shares."""
    from skillgrove.runtime.engine import Skillgrove

    paths = library_paths(named_library(args))
    return Skillgrove(paths, index=usable_index_dir(args), store=args.store, model=args.model,
                      encoder=AnnouncedEncoder(args.model, Status(
                          sys.stderr, live=not getattr(args, "quiet", False))),
                      allow_rules=getattr(args, "allow_rule", None) or (),
                      concurrency=getattr(args, "concurrency", 4),
                      log=_say)


def close(engine: Skillgrove) -> None:
    """Close a command's engine and save the query vectors its encoder embedded (one small
    transaction), so that the next command asking the same thing loads no model. The CLI gives
    the engine its encoder, so the CLI saves it."""
    engine.close()
    flush = getattr(engine.encoder, "flush", None)
    if flush is not None:
        flush()


def named_library(args: argparse.Namespace) -> list[Path]:
    """The library folders a command was given: ``--library`` values, then the PATH
    arguments that ``check``, ``index`` and ``serve`` keep as an alias of ``--library``."""
    return [*(getattr(args, "library", None) or ()), *(getattr(args, "paths", None) or ())]


def library_paths(given: Sequence[Path] | None) -> list[Path] | None:
    """Library paths from the command line, each split on ``os.pathsep`` as
    ``$SKILLGROVE_PATH`` is (``--library a:b`` is ``--library a --library b``); None when none
    were given."""
    if not given:
        return None
    split = [Path(part).expanduser() for path in given
             for part in str(path).split(os.pathsep) if part.strip()]
    return split or None


def _say(message: str) -> None:
    sys.stderr.write(f"skillgrove: {message}\n")


def cache_path() -> Path:
    from skillgrove.runtime.engine import cache_dir

    return cache_dir() / "embeddings.sqlite"


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


LOOK_ALIKE_SHOWN = 10
"""How many look-alike skill pairs ``index`` prints (the closest first)."""


def cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        result = engine.index(_Progress(sys.stderr, not args.quiet),
                              write_ids=getattr(args, "write_ids", False),
                              history=getattr(args, "history", None))
        library = engine.library
        look_alike = engine.look_alike_skills()
        left_out = _left_out(engine)
        fit = engine.retrieval_fit()
    finally:
        close(engine)
    # The diagnostics are about the library, not the result: stderr, so `index > log` keeps
    # only the summary and a pipe reading stdout is not fed error lines.
    style = Style.for_stream(sys.stderr)
    for diagnostic in library.errors:
        sys.stderr.write(style.diagnostic(diagnostic.format()) + "\n")
    for diagnostic in look_alike[:LOOK_ALIKE_SHOWN]:
        sys.stderr.write(style.diagnostic(diagnostic.format()) + "\n")
    if len(look_alike) > LOOK_ALIKE_SHOWN:
        sys.stderr.write(f"... and {plural(len(look_alike) - LOOK_ALIKE_SHOWN, 'more pair')} "
                         "of look-alike skills\n")
    report = result.report
    where = "Neo4j" if args.store == "neo4j" else str(index_dir(args))
    if args.json:
        out.write(json.dumps({
            "skills": result.skills, "groups": result.groups, "index": where,
            "added": len(report.added), "updated": len(report.updated),
            "removed": len(report.removed), "unchanged": report.unchanged,
            "edges_added": report.edges_added, "edges_removed": report.edges_removed,
            "embedded": result.embedded, "seconds": round(result.seconds, 3),
            "errors": [d.format() for d in library.errors], "left_out_groups": left_out,
            "retrieval_fit": fit}, indent=2, ensure_ascii=False) + "\n")
    else:
        out.write(
            f"indexed {plural(result.skills, 'skill')} and {plural(result.groups, 'group')} "
            f"into {where}: {len(report.added)} added, {len(report.updated)} updated, "
            f"{len(report.removed)} removed, {report.unchanged} unchanged; "
            f"{plural(report.edges_added, 'edge')} written, {report.edges_removed} removed; "
            f"{plural(result.embedded, 'text')} embedded ({result.seconds:.1f} s)\n")
        if fit:
            out.write(fit_summary(fit) + "\n")
    _say_left_out(left_out, why=False)
    if library.errors:
        sys.stderr.write(style.error(plural(len(library.errors), "error")) + ": the skills and "
                         "groups they concern were left out (see `skillgrove check`)\n")
        return EXIT_LEFT_OUT
    return 0


def fit_summary(fit: Mapping[str, Any]) -> str:
    """One line on the retrieval settings the history gave (``Skillgrove.retrieval_fit``)."""
    rows = fit.get("history_rows", "?")
    if fit.get("from_run_log"):
        rows = f"{rows} ({fit['from_run_log']} from the run log)"
    if fit.get("skill_sample"):
        support = ""
        if "support_depth" in fit:
            depth = fit["support_depth"]
            support = (f", the group support rule on {fit.get('support_folds')} folds of them ("
                       + ("off" if depth is None else f"a step among the first {depth} skills")
                       + ")")
        return (f"retrieval settings: the selection floor {fit.get('select_min')} fitted on all "
                f"{fit['skill_sample']} rows of the history{support}, the rest {fit['kept']}")
    if fit.get("kept"):
        return f"retrieval settings: the defaults, from a history of {rows} rows ({fit['kept']})"
    said = [f"group threshold {fit.get('threshold')}",
            f"skill vector weight {fit.get('skill_vector_weight')}",
            f"selection cut {fit.get('select_ratio')} / {fit.get('select_min')}"]
    if fit.get("router") is False:
        said.append("groups chosen by their words (the router off, group vector weight "
                    f"{fit.get('group_vector_weight')})")
    if fit.get("referenced") is True:
        said.append("a task joins the one before it only where it refers back to its result")
    # When and how long: an index that found the history unchanged keeps the fit it stored.
    when = ", ".join(str(part) for part in (
        fit.get("fitted_at"), f"{fit['seconds']} s" if "seconds" in fit else None) if part)
    return (f"retrieval settings fitted on {fit.get('sample')} held-out rows of a history of "
            f"{rows}" + (f" ({when})" if when else "") + ": " + ", ".join(said)
            + " (`skillgrove index --json` lists every value)")


def _left_out(engine: Skillgrove) -> list[dict[str, Any]]:
    from skillgrove.runtime.views import left_out_groups

    return left_out_groups(engine.groups())


def _say_left_out(left_out: Sequence[Mapping[str, Any]], why: bool = True) -> None:
    """One stderr line per group file that is left out or served from its last good version,
    with its first error unless ``why`` is false (the errors were just listed): a search must
    not silently answer another group instead."""
    style = Style.for_stream(sys.stderr)
    for group in left_out:
        errors = group["errors"] if why else []
        name = f"group '{group['id']}'" if group.get("id") else "group file"
        what = ("served from its last good version" if group["status"] == "last-good"
                else "left out")
        first = f": {errors[0]}" if errors else ""
        more = f" (and {plural(len(errors) - 1, 'more error')})" if len(errors) > 1 else ""
        sys.stderr.write(style.warning(f"{name} in {group['location']} is {what}")
                         + f"{first}{more}\n")


MAX_CONTEXT_DEPTH = 64
"""Objects and lists a context file may nest (deeper ones would exhaust the recursion of the
code that reads the values later)."""


def load_context(path: Path | None) -> RequestContext:
    from skillgrove.graph.retrieval import RequestContext
    from skillgrove.runtime.engine import Skillgrove

    if path is None:
        return RequestContext()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SkillgroveError(f"cannot read context file {path}: {exc.strerror}") from exc
    too_deep = (f"{path}: context is nested more than {MAX_CONTEXT_DEPTH} levels deep (objects "
                "and lists): flatten it")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise SkillgroveError(f"{path}: context is not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                              f"offset {exc.start}): save the file as UTF-8") from None
    except RecursionError:
        raise SkillgroveError(too_deep) from None
    except json.JSONDecodeError as exc:
        raise SkillgroveError(f"{path}:{exc.lineno}:{exc.colno}: context is not JSON: "
                              f"{exc.msg}") from exc
    if not isinstance(data, dict):
        raise SkillgroveError(f"{path}: context must be a JSON object")
    if _nesting(data, MAX_CONTEXT_DEPTH) > MAX_CONTEXT_DEPTH:
        raise SkillgroveError(too_deep)
    try:
        return Skillgrove.context(data)
    except SkillgroveError as exc:
        raise SkillgroveError(f"{path}: {exc}") from exc


def _nesting(value: Any, limit: int) -> int:
    """How deeply objects and lists nest in ``value`` (counted without recursion; the count
    stops once it passes ``limit``)."""
    deepest = 0
    pending = [(value, 1)]
    while pending and deepest <= limit:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in item)
    return deepest


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        toolbox = engine.search(args.request, load_context(args.context), k=args.k)
        left_out = _left_out(engine)
        if args.json:
            view = engine.views.view(toolbox, args.detail)
            out.write(json.dumps({**view, "left_out_groups": left_out}, indent=2,
                                 ensure_ascii=False) + "\n")
        else:
            out.write(render_toolbox(toolbox, engine.views.where))
    finally:
        close(engine)
    _say_left_out(left_out)
    return EXIT_NOTHING_FITS if nothing_fits(toolbox) else 0


def nothing_fits(toolbox: Toolbox) -> bool:
    """No group and no single skill was chosen for the request."""
    return toolbox.group is None and not toolbox.selected


def render_toolbox(toolbox: Toolbox, where: Callable[[str, str], str] | None = None) -> str:
    """``where(id, name)``: a skill's short location, shown when not empty (a name two loaded
    skills share: ``ToolboxViews.where``)."""
    def at(skill_id: str, name: str) -> str:
        found = where(skill_id, name) if where is not None else ""
        return f"  [{found}]" if found else ""

    lines: list[str] = []
    group = toolbox.group
    if group is not None:
        state = "ready" if group.ready else "needs input: " + ", ".join(group.missing_inputs)
        ex = group.explanation
        said = (f"vector {ex.vector:.2f}, lexical {ex.lexical or 0.0:.2f}"
                if ex.vector is not None else f"router {ex.router or 0.0:.2f}, from its words")
        lines.append(f"Group  {group.id.removeprefix(GROUP_PREFIX)}  \"{group.name}\"  "
                     f"score {group.score:.2f} ({said})  {state}")
        lines.append("  steps: " + " -> ".join(group.member_names))
        if ex.demoted is not None:
            lines.append(f"  demoted by the quality filter: {ex.demoted}")
        if ex.router_first is not None:
            sibling = ex.sibling_evidence
            why = (f"the request's '{sibling.word}' is nearest its '{sibling.part}'"
                   if sibling is not None and sibling.lead > 0
                   else "its final steps fit the request better")
            lines.append(f"  chosen over \"{ex.router_first}\", the router's first: {why}")
    else:
        lines.append(f"No group: {toolbox.reason}")
    lines.append("")
    lines.append("  #  score  skill                            description")
    for rank, skill in enumerate(toolbox.skills, 1):
        mark = "*" if skill.id in toolbox.selected else " "
        avail = "" if skill.available else "  [unavailable]"
        desc = skill.description.replace("\n", " ")
        desc = desc[:60] + ("..." if len(desc) > 60 else "")
        if skill.explanation.demoted is not None:
            avail += f"  [demoted: {skill.explanation.demoted}]"
        if skill.explanation.gloss is not None:
            avail += "  [via gloss]"
        lines.append(f"{rank:>3}{mark} {skill.score:5.2f}  {skill.name[:32]:<32} {desc}{avail}"
                     + at(skill.id, skill.name))
    gloss = next((s.explanation.gloss for s in toolbox.skills
                  if s.explanation.gloss is not None), None)
    if gloss:
        lines.append(f"  [via gloss]: matched the request's English gloss (CC-CEDICT and our own office words): {gloss}")
    if toolbox.suggestions:
        lines.append("")
        lines.append("Usually used with:")
        for suggestion in toolbox.suggestions:
            lines.append(f"  {suggestion.name}: {suggestion.reason}"
                         + at(suggestion.id, suggestion.name))
    lines.append(f"\n({toolbox.latency_ms:.1f} ms; * = selected)")
    return "\n".join(lines) + "\n"


def cmd_neighbors(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        record, rows = engine.neighbors(args.id)
        views = engine.views
        located = {row["id"]: views.where(row["id"], row["name"]) for row in rows
                   if row["kind"] == "skill"}
    finally:
        close(engine)
    where = path_of(record)
    if args.json:
        out.write(json.dumps({
            "node": {"kind": record.kind.value, "name": record.name, "id": record.id,
                     "path": where},
            "edges": [{**row, "where": located.get(row["id"]) or None} for row in rows]},
            indent=2, ensure_ascii=False, default=str) + "\n")
        return 0
    out.write(f"{record.kind.value} {record.name} ({record.id})"
              + (f"  {where}" if where else "") + "\n")
    for row in rows:
        props = " ".join(f"{k}={v}" for k, v in row["props"].items())
        found = located.get(row["id"])
        name = f"{row['name']} [{found}]" if found else row["name"]
        out.write(f"  {row['direction']} {row['edge']:<10} {row['weight']:>6.2f}  "
                  f"{row['kind']:<5} {name}  {props}".rstrip() + "\n")
    return 0


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        out.write(engine.export(args.group, args.format))
    finally:
        close(engine)
    return 0


def cmd_compose(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        toolbox = engine.search(args.request, load_context(args.context))
        if toolbox.group is not None:
            raise SkillgroveError(f"'{args.request}' is served by the group "
                                  f"'{toolbox.group.id.removeprefix(GROUP_PREFIX)}': "
                                  "run it as it is")
        composed = engine.compose(toolbox)
    finally:
        close(engine)
    for diagnostic in composed.diagnostics:
        sys.stderr.write(diagnostic.format() + "\n")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(composed.text, encoding="utf-8")
        sys.stderr.write(f"wrote {args.out}" + ("" if composed.group else " (it does not "
                                                "validate yet: see above)") + "\n")
    if args.json:
        out.write(json.dumps({
            "text": composed.text, "valid": composed.group is not None,
            "group": composed.group.id if composed.group is not None else None,
            "errors": [d.format() for d in composed.diagnostics],
            "written": str(args.out) if args.out else None}, indent=2, ensure_ascii=False)
            + "\n")
    elif not args.out:
        out.write(composed.text)
    return 0 if composed.group is not None else 1


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    """A skill by name: its facts and instructions, or one file of its folder."""
    engine = engine_from_args(args)
    try:
        if args.file:
            data = engine.skill_file(args.name, args.file)
            out.write(data.decode("utf-8", errors="replace"))
            return 0
        details = engine.skill(args.name)
    finally:
        close(engine)
    if args.json:
        out.write(json.dumps(details.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return 0
    view = details.view
    state = "runs here" if view["runnable"] and view["available"] else (
        "instruction-only" if not view["runnable"] else
        "cannot run here: " + "; ".join(view["unavailable_reasons"]))
    out.write(f"{view['name']}  ({state})\n{view['location']}\n\n{view['description']}\n")
    props = view["input_schema"].get("properties") or {}
    if props:
        required = set(view["input_schema"].get("required") or [])
        out.write("\ninputs:\n")
        for key, spec in props.items():
            kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
            mark = " (required)" if key in required else ""
            desc = spec.get("description", "") if isinstance(spec, dict) else ""
            out.write(f"  {key}: {kind}{mark}  {desc}".rstrip() + "\n")
    out.write("\nfiles: " + ", ".join(f.path for f in details.files) + "\n\n")
    out.write(details.body.rstrip() + "\n")
    return 0


# -- running groups ---------------------------------------------------------------------------


def parse_inputs(pairs: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SkillgroveError(f"--input {pair!r}: write it as name=value")
        key, value = pair.split("=", 1)
        values[key.strip()] = value
    return values


class ProgressDisplay:
    """Prints the event stream as it happens (the CLI's live progress)."""

    SYMBOLS: ClassVar[dict[str, str]] = {
        "step_started": ">", "step_finished": "ok", "step_failed": "FAIL", "step_skipped": "skip",
        "step_retrying": "retry"}

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.style = Style.for_stream(stream)

    def __call__(self, event: Any) -> None:
        kind = event.kind.value
        if kind == "run_started" and not event.step:
            folder = event.data.get("run_dir")
            self.stream.write(f"run {event.run_id}: group {event.group}"
                              + (f" (files in {folder})" if folder else "") + "\n")
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
            symbol = "stop" if event.status == "cancelled" else self.SYMBOLS[kind]
            self.stream.write(f"  {self._paint(symbol)} {event.step}{detail}\n")
        self.stream.flush()

    def _paint(self, symbol: str) -> str:
        padded = f"{symbol:<5}"
        if symbol == "FAIL":
            return self.style.error(padded)
        if symbol in ("retry", "stop"):
            return self.style.warning(padded)
        return self.style.ok(padded) if symbol == "ok" else self.style.dim(padded)


def cmd_plan(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        plan = engine.plan(args.group, parse_inputs(args.input), load_context(args.context))
        effects = engine.effects(args.group)
    finally:
        close(engine)
    if args.json:
        from dataclasses import asdict

        out.write(json.dumps({**asdict(plan), "effects": effects}, indent=2,
                             ensure_ascii=False, default=str) + "\n")
        return 0
    _write_plan(plan, effects, out)
    return 0


def _write_plan(plan: Any, effects: Mapping[str, Sequence[str]], out: TextIO) -> None:
    """A plan as text: the group, its inputs and side effects, then each level's steps."""
    out.write(f"group {plan.group}\ninputs: {json.dumps(plan.inputs, ensure_ascii=False)}\n")
    if effects:
        out.write("effects: " + "; ".join(f"{effect} ({', '.join(names)})"
                                          for effect, names in effects.items()) + "\n")
    steps = {s.id: s for s in plan.steps}
    for level, ids in enumerate(plan.levels):
        out.write(f"level {level}:\n")
        for sid in ids:
            step = steps[sid]
            note = f"  [skipped: {step.skip_reason}]" if step.skip_reason else ""
            if step.decided_at_run_time:
                on = ", ".join(f"steps.{d}" for d in step.depends_on)
                note = "  [decided at run time" + (f" (depends on {on})" if on else "") + "]"
            out.write(f"  {sid}: {step.kind} {step.target}{note}\n")
            for key, value in step.inputs.items():
                out.write(f"      {key} = {json.dumps(value, ensure_ascii=False)[:120]}\n")


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    if getattr(args, "dry_run", False):
        return cmd_plan(args, out)
    engine = engine_from_args(args)
    events = ProgressDisplay(sys.stderr) if not args.json else None
    inputs = parse_inputs(args.input) if args.input or not args.resume else None
    context = load_context(args.context) if args.context or not args.resume else None
    try:
        record = engine.run(args.group, inputs, context, events, resume=args.resume)
    finally:
        close(engine)
    if args.json:
        out.write(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(json.dumps(dict(record.outputs), indent=2, ensure_ascii=False,
                             default=str) + "\n")
    if record.status in ("failure", "cancelled"):
        sys.stderr.write(f"skillgrove: run {record.id} {record.status}; continue it with "
                         f"`skillgrove run {record.group} --resume {record.id}`\n")
    return 0 if record.status == "success" else 1


def cmd_run_skill(args: argparse.Namespace, out: TextIO) -> int:
    """One executable skill on its own: inputs as name=value, or one JSON object."""
    engine = engine_from_args(args)
    inputs = parse_inputs(args.input)
    if args.json_input:
        try:
            given = json.loads(args.json_input)
        except json.JSONDecodeError as exc:
            raise SkillgroveError(f"--json-input is not JSON: {exc.msg} at character "
                                  f"{exc.pos}") from exc
        if not isinstance(given, dict):
            raise SkillgroveError("--json-input must be a JSON object")
        inputs = {**given, **inputs}
    events = ProgressDisplay(sys.stderr) if not args.json else None
    try:
        record = engine.run_skill(args.name, inputs, events)
    finally:
        close(engine)
    payload = record.to_dict() if args.json else dict(record.outputs)
    out.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
    if record.status != "success" and not args.json:
        sys.stderr.write(f"skillgrove: {record.error}\n")
    return 0 if record.status == "success" else 1


def cmd_runs(args: argparse.Namespace, out: TextIO) -> int:
    engine = engine_from_args(args)
    try:
        if args.runs_command == "show":
            record = engine.get_run(args.id)
            out.write(json.dumps(record.to_dict(), indent=2, ensure_ascii=False, default=str)
                      + "\n")
            return 0
        records = engine.runs(args.limit)
    finally:
        close(engine)
    if getattr(args, "json", False):
        out.write(json.dumps({"runs": [r.to_dict() for r in records]}, indent=2,
                             ensure_ascii=False, default=str) + "\n")
        return 0
    for record in records:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started_at))
        failed = [s.id for s in record.steps if s.status == "failure"]
        out.write(f"{record.id}  {when}  {record.group:<28} {record.status:<9} "
                  f"{record.seconds:6.2f} s" + (f"  failed: {', '.join(failed)}" if failed
                                                 else "") + "\n")
    return 0


def check_budget(budget: int | None) -> None:
    """Refuse a budget below one token before anything runs (a one-line error, exit 1)."""
    from skillgrove.runtime.limits import budget_problem

    problem = budget_problem(budget)
    if problem is not None:
        raise SkillgroveError(f"--budget: {problem} (got {budget})")


def cmd_inject(args: argparse.Namespace, out: TextIO) -> int:
    check_budget(args.budget)
    engine = engine_from_args(args)
    try:
        injection = engine.inject(args.request, run_id=args.run,
                                  context=load_context(args.context), budget=args.budget,
                                  fmt=args.format)
    finally:
        close(engine)
    if args.json:
        from skillgrove.runtime.views import injection_view

        out.write(json.dumps(injection_view(injection), indent=2, ensure_ascii=False) + "\n")
        return 0
    out.write(injection.text)
    sys.stderr.write(f"[{injection.tokens} tokens (cl100k_base), budget "
                     f"{injection.budget or 'none'}, level {injection.level}]\n")
    return 0


def cmd_ask(args: argparse.Namespace, out: TextIO) -> int:
    """Search, validate the chosen group against the context, run it (or fall back), inject."""
    check_budget(args.budget)
    engine = engine_from_args(args)
    try:
        answer = engine.ask(args.request, load_context(args.context), parse_inputs(args.input),
                            budget=args.budget, fmt=args.format,
                            on_event=None if args.json else ProgressDisplay(sys.stderr),
                            confirm=args.yes, plan_only=args.plan_only)
        left_out = _left_out(engine)
        if args.json:
            from skillgrove.runtime.views import answer_view

            view = answer_view(answer, engine.views, args.detail)
            out.write(json.dumps({**view, "left_out_groups": left_out,
                                  "exit_code": answer_exit_code(answer)},
                                 indent=2, ensure_ascii=False, default=str) + "\n")
    finally:
        close(engine)
    _say_left_out(left_out)
    if args.json:
        for note in answer.notes:
            sys.stderr.write(note + "\n")
        return answer_exit_code(answer)
    return _print_answer(answer, out)


def answer_exit_code(answer: Any) -> int:
    """0 done; 1 the run failed; 3 planned, not run (needs confirmation); 4 nothing fits."""
    if answer.run is not None:
        return 0 if answer.run.status == "success" else EXIT_FAILED
    if answer.needs_confirmation:
        return EXIT_NEEDS_CONFIRMATION
    if nothing_fits(answer.toolbox):
        return EXIT_NOTHING_FITS
    return 0


def _print_answer(answer: Any, out: TextIO) -> int:
    """The context block on stdout, notes and its size on stderr; the exit code of
    :func:`answer_exit_code`."""
    for note in answer.notes:
        sys.stderr.write(note + "\n")
    if answer.plan is not None:
        _write_plan(answer.plan, answer.needs_confirmation, sys.stderr)
    out.write(answer.injection.text)
    sys.stderr.write(f"[{answer.injection.tokens} tokens, cl100k_base; level "
                     f"{answer.injection.level}]\n")
    return answer_exit_code(answer)


# -- learning and benchmarks ------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace, out: TextIO) -> int:
    from skillgrove.graph.embedded import EmbeddedStore
    from skillgrove.runtime.bench import format_table, run_bench

    engine = engine_from_args(args)

    def make_store(scratch: Path) -> GraphStore:
        if args.store == "neo4j":
            return engine.store
        return EmbeddedStore(scratch / "graph.sqlite")

    def say(message: str) -> None:
        if not args.json:
            sys.stderr.write(message + "\n")

    from skillgrove.runtime.bench import STAGES

    unknown = [stage for stage in args.without if stage not in STAGES]
    if unknown:
        raise SkillgroveError(f"--without {unknown[0]}: no such stage; the stages are "
                              + ", ".join(sorted(STAGES)))
    if not 0.0 <= args.hide_sets < 1.0:
        raise SkillgroveError("--hide-sets must be a share from 0 up to (not including) 1")
    result = run_bench(args.dir, args.mode, engine.encoder, make_store, args.store,
                       limit=args.limit, progress=say, hide_sets=args.hide_sets,
                       without=args.without)
    if args.json:
        out.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    else:
        out.write(format_table(result))
    return 0


def cmd_groups_suggest(args: argparse.Namespace, out: TextIO) -> int:
    """Drafts into ``<library>/groups/drafts/`` (or ``--out``), each with what ``check`` says
    of it; the reason when there is none."""
    from skillgrove.groups.authoring import DRAFTS_FOLDER

    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise SkillgroveError(f"--out {args.out} is a file: it must be a folder (one YAML file "
                              "is written into it per draft group)")
    engine = engine_from_args(args)
    try:
        roots = engine.library.roots
        folder = args.out or (roots[0] / "groups" / DRAFTS_FOLDER if roots else None)
        if folder is None:
            raise SkillgroveError("no library folder to write the drafts into: name one with "
                                  "--out DIR (e.g. my-library/groups/drafts)")
        result = engine.suggest_groups(args.history, min_support=args.min_support,
                                       folder=folder)
    finally:
        close(engine)
    as_json = getattr(args, "json", False)
    listed: list[dict[str, Any]] = []
    if as_json:
        out, shown = io.StringIO(), out  # the text report is replaced by the JSON
    if not result.drafts:
        out.write(f"no draft groups: {result.reason}\n")
        if as_json:
            shown.write(json.dumps({"folder": str(folder), "drafts": [],
                                    "reason": result.reason, "covered": {}}, indent=2,
                                   ensure_ascii=False) + "\n")
        return 0
    written = 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suggestion in result.drafts[: args.limit]:
            draft = suggestion.draft
            target = folder / f"{draft.id}.yaml"
            entry = {"id": draft.id, "path": str(target), "steps": len(draft.members),
                     "edges": len(draft.edges), "examples": len(draft.examples),
                     "source": suggestion.source, "support": draft.support,
                     "errors": [e.format() for e in suggestion.errors]}
            if target.exists() and not args.force:
                out.write(f"skipped {target} (exists; --force replaces it)\n")
                listed.append({**entry, "written": False})
                continue
            target.write_text(suggestion.text, encoding="utf-8")
            listed.append({**entry, "written": True})
            edges = len(draft.edges)
            verdict = ("passes check" if not suggestion.errors else
                       f"{len(suggestion.errors)} error{'s' if len(suggestion.errors) != 1 else ''}"
                       " remain")
            out.write(f"wrote {target}: {len(draft.members)} steps, {edges} "
                      f"edge{'s' if edges != 1 else ''}, {len(draft.examples)} "
                      f"example{'s' if len(draft.examples) != 1 else ''}, from "
                      f"{suggestion.source}"
                      + ("" if suggestion.source == "co-references" else
                         f" (seen {draft.support} time{'s' if draft.support != 1 else ''})")
                      + f"; {verdict}\n")
            for error in suggestion.errors:
                out.write("    " + error.format().replace("\n", "\n    ") + "\n")
            written += 1
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise SkillgroveError(f"--out {folder}: cannot write the drafts there "
                              f"({exc.strerror}{where}): give a folder you can write to "
                              "with --out") from exc
    if result.covered:
        ran = ", ".join(f"{g} ({n})" for g, n in sorted(result.covered.items()))
        out.write(f"not drafted: {sum(result.covered.values())} tasks did what a group does "
                  f"already: {ran}\n")
    out.write(f"{written} draft group{'s' if written != 1 else ''} in {folder}; review them: "
              "`skillgrove check` reads and reports them as drafts; move one up into groups/ "
              "to approve it\n")
    if as_json:
        shown.write(json.dumps({"folder": str(folder), "drafts": listed, "reason": None,
                                "covered": dict(sorted(result.covered.items()))}, indent=2,
                               ensure_ascii=False) + "\n")
    return 0


def _library_engine(args: argparse.Namespace) -> Skillgrove:
    """An engine that reads the library named on the command line (else $SKILLGROVE_PATH,
    else the bundled one), as ``check`` does; no index."""
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.paths import default_paths

    return Skillgrove(library_paths(named_library(args)) or default_paths(),
                      allow_rules=getattr(args, "allow_rule", None) or ())


def cmd_groups_lock(args: argparse.Namespace, out: TextIO) -> int:
    with _library_engine(args) as engine:
        written = engine.lock_groups()
    if not written:
        raise SkillgroveError("no valid group to lock: `skillgrove check` says what is wrong")
    if getattr(args, "json", False):
        out.write(json.dumps({"written": [{"path": str(path), "groups": count}
                                          for path, count in written]}, indent=2) + "\n")
        return 0
    for path, count in written:
        out.write(f"wrote {path}: {count} group{'s' if count != 1 else ''} pinned (their "
                  "skills' content hashes and schemas); `skillgrove check` reports a skill that "
                  "changes after this\n")
    return 0


def cmd_impact(args: argparse.Namespace, out: TextIO) -> int:
    with _library_engine(args) as engine:
        report = engine.impact(args.skill)
    if args.json:
        out.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
        return 1 if report.broken else 0
    if not report.uses:
        state = "" if report.known else " (and the library has no such skill)"
        out.write(f"no group uses '{report.skill}'{state}\n")
        return 0
    for use in report.uses:
        how = (f"steps {', '.join(use.steps)}" if use.steps
               else "through " + " > ".join(use.via))
        verdict = "BREAKS" if use.breaks else "ok"
        out.write(f"{use.group}{' (draft)' if use.draft else ''}: {how}: {verdict}  "
                  f"[{use.path}]\n")
        if use.changed_since_lock:
            out.write(f"    changed since locked: {'; '.join(use.changed_since_lock)}\n")
        if use.steps:
            for problem in use.problems:
                out.write("    " + problem.format().replace("\n", "\n    ") + "\n")
        elif use.breaks:
            out.write(f"    breaks because {use.via[-1]} does\n")
    broken = len(report.broken)
    out.write(f"\n{len(report.uses)} group{'s' if len(report.uses) != 1 else ''} use "
              f"'{report.skill}'; {broken} break{'s' if broken == 1 else ''} under its current "
              "schema\n")
    return 1 if broken else 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    """The bundled library end to end, after a plain install: index, ask, run, inject."""
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.paths import bundled_library

    check_budget(args.budget)
    library = bundled_library()
    samples = library / "samples"
    values = {"pdf_path": str(samples / "quarterly_report.pdf"),
              "team_email": "team@example.com", "report_name": "Q3 demo"}
    request = "summarize the quarterly report PDF and email the key numbers to my team"
    out.write(f"$ skillgrove ask {json.dumps(request)} --yes  (context: "
              f"{json.dumps({'values': values})})\n\n")
    engine = Skillgrove([library], index=usable_index_dir(args), store=args.store,
                        model=args.model, concurrency=args.concurrency, log=_say,
                        encoder=AnnouncedEncoder(args.model, Status(sys.stderr)))
    try:
        # The demo's mail goes to the outbox (no SMTP_HOST), which is why it may run unasked.
        answer = engine.ask(request, {"values": values}, budget=args.budget, fmt=args.format,
                            on_event=ProgressDisplay(sys.stderr), confirm=True)
        code = _print_answer(answer, out)
        # What happens when no group fits, and a request in Chinese (README, Quick start).
        for other in DEMO_SEARCHES:
            out.write(f"\n$ skillgrove search {json.dumps(other, ensure_ascii=False)} -k 5\n")
            out.flush()
            out.write(render_toolbox(engine.search(other, k=5)))
    finally:
        close(engine)
    return code


DEMO_SEARCHES = ("translate this paragraph into German", "生成本周的工作周报")


# -- servers ----------------------------------------------------------------------------------


def cmd_serve_mcp(args: argparse.Namespace, out: TextIO) -> int:
    from skillgrove.runtime import mcp_server

    token = args.token or os.environ.get("SKILLGROVE_TOKEN") or None
    engine = engine_from_args(args)
    mcp_server.serve(engine, transport=args.transport, host=args.host, port=args.port,
                     watch=not args.no_watch, token=token, max_runs=args.max_runs)
    return 0


def cmd_serve_http(args: argparse.Namespace, out: TextIO) -> int:
    from skillgrove.runtime import http_server

    token = args.token or os.environ.get("SKILLGROVE_TOKEN") or None
    engine = engine_from_args(args)
    http_server.serve(engine, host=args.host, port=args.port, token=token,
                      max_body=args.max_body, watch=not args.no_watch,
                      max_runs=args.max_runs)
    return 0


def cmd_studio(args: argparse.Namespace, out: TextIO) -> int:
    """``skillgrove studio``: the HTTP API with the studio; prints the studio's address (with
    the token in its fragment, which the browser never sends to the server)."""
    from urllib.parse import quote

    from skillgrove.runtime import http_server

    token = args.token or os.environ.get("SKILLGROVE_TOKEN") or None
    engine = engine_from_args(args)

    def announce(base: str) -> None:
        url = f"{base}/studio/" + (f"#token={quote(token, safe='')}" if token else "")
        out.write(f"skillgrove studio: {url}\n")
        out.flush()
        if args.open:
            import webbrowser

            webbrowser.open(url)

    http_server.serve(engine, host=args.host, port=args.port, token=token, announce=announce)
    return 0
