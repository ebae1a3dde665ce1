"""The ``skillgrove`` command line.

Exit codes: 0 success (``check``: no errors), 1 problems found or the command failed, 2 usage error,
141 the reader of the output went away (``skillgrove runs | head``): the command stops quietly,
with the status a shell reports for git or grep killed by SIGPIPE (128 + 13), 130 and 143 a run
stopped by SIGINT (Ctrl-C) or SIGTERM (128 + the signal).
A user mistake is printed as a diagnostic, never as a traceback.

Stopping a run: while ``run``, ``run-skill``, ``ask`` or ``demo`` runs a group, the first SIGINT
or SIGTERM cancels it: the running skills' process trees are killed, the run is recorded as
``cancelled``, and ``skillgrove run GROUP --resume RUN_ID`` continues it. A second signal, or
one that comes while nothing runs, acts as usual.

The library is named one way on every command that reads one: ``--library PATH``, repeatable,
earliest first, each value may join folders with ``os.pathsep`` as ``$SKILLGROVE_PATH`` does
(``--library ~/skills:library``); without it the folders the index was built from (``check``:
never those), else ``$SKILLGROVE_PATH``, else the bundled library. A folder that does not exist is
an error. ``check``, ``index`` and ``serve`` also take the folders as PATH arguments, an alias
kept for older scripts.

Results go to stdout, diagnostics and progress to stderr; colour and live progress appear only
on a terminal (see :mod:`skillgrove.runtime.terminal`). Values that cannot be meant (``-k 0``,
an empty request, a negative limit) are refused by the parser with the reason, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from skillgrove.runtime import commands
from skillgrove.runtime.limits import DEFAULT_K, MAX_K, MIN_K
from skillgrove.runtime.terminal import Style, plural, safe
from skillgrove.skills.diagnostics import Severity
from skillgrove.skills.errors import SkillgroveError
from skillgrove.skills.safety import RULES_BY_ID

if TYPE_CHECKING:
    from skillgrove.groups.library import Library
    from skillgrove.runtime.engine import Skillgrove


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return _bounded_int(text, 1, "at least 1")


def skill_count(text: str) -> int:
    """An argparse type: how many skills a search ranks (``MIN_K`` to ``MAX_K``)."""
    value = _bounded_int(text, MIN_K, f"from {MIN_K} to {MAX_K}")
    if value > MAX_K:
        raise argparse.ArgumentTypeError(f"must be from {MIN_K} to {MAX_K} (got {value})")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    return _bounded_int(text, 0, "0 or more")


def port_number(text: str) -> int:
    """An argparse type: a TCP port (0 lets the system pick one)."""
    port = _bounded_int(text, 0, "from 0 to 65535")
    if port > 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535 (got {port})")
    return port


def _bounded_int(text: str, least: int, wanted: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number {wanted} (got {text!r})"
                                         ) from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {wanted} (got {value})")
    return value


def share(text: str) -> float:
    """An argparse type: a share from 0 up to (not including) 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 up to 1 (got {text!r})"
                                         ) from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 up to (not including) 1 (got {text})")
    return value


def request_text(text: str) -> str:
    """An argparse type: a request with something in it (surrounding blanks are dropped)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the request is empty: say in words what you want done "
                                         "(for example \"summarize this PDF\")")
    return text.strip()


class Parser(argparse.ArgumentParser):
    """argparse, with its one-line usage errors coloured on a terminal."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        style = Style.for_stream(sys.stderr)
        self.exit(2, f"{self.prog}: {style.error('error')}: {message}\n")


EXAMPLES = """\
examples:
  skillgrove check --library ~/skills                 every problem of a library, with fixes
  skillgrove index --library ~/skills                 build the skill graph (./.skillgrove)
  skillgrove search "summarize the quarterly report PDF" -k 5
  skillgrove ask "summarize the quarterly report PDF and email the key numbers to my team" \\
      --context library/samples/context_report.json --yes
  skillgrove run report-analysis --input pdf_path=report.pdf --dry-run
  skillgrove inject "turn markdown into HTML" --budget 800
  skillgrove serve mcp --library ~/skills             an MCP server on stdio
  skillgrove demo                                     the bundled library end to end

The library: --library PATH on every command that reads one (repeatable, earliest first; folders
may be joined with ':'), else the folders the index was built from, else $SKILLGROVE_PATH,
else the bundled library. Results go to stdout, diagnostics and progress to stderr. Colour
only on a terminal (NO_COLOR=1 switches it off, FORCE_COLOR=1 on). `skillgrove COMMAND --help`
for each command.
"""


def _add_library_args(parser: argparse.ArgumentParser, default: str = "") -> None:
    _add_library_option(parser, default)
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="the same as --library PATH (kept for older scripts)")
    parser.add_argument("--allow-rule", action="append", default=[], metavar="RULE",
                        choices=sorted(RULES_BY_ID),
                        help="switch off one safety rule for a library you trust (repeatable; "
                             "one of: %(choices)s)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="skillgrove",
        description="Group-structured skill graph: find the toolbox for a task, run it, inject it.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser("check", help="list every problem of a library of skills and groups")
    _add_library_args(check, default="$SKILLGROVE_PATH, else the bundled library; never the "
                                     "folders of an index")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--quiet", "-q", action="store_true", help="errors only, no warnings")
    _epilog(check, "skillgrove check --library ~/skills",
            "skillgrove check --library ~/skills --json --quiet")
    check.set_defaults(handler=cmd_check)

    index = sub.add_parser("index", help="index a library into the skill graph")
    _add_library_args(index)
    _add_store_args(index)
    index.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    index.add_argument("--json", action="store_true",
                       help="machine-readable summary (counts, errors, left-out groups)")
    index.add_argument("--write-ids", action="store_true",
                       help="write a .skill_id file holding its id into each skill folder that "
                            "has none (ids otherwise live in the index only)")
    index.add_argument("--history", type=Path, default=None, metavar="FILE",
                       help="a run log in the benchmark format (JSON lines: request, skills, "
                            "edges): kept in the index folder, and this and every later index "
                            "learns co-use and the order skills run in from it")
    _epilog(index, "skillgrove index --library ~/skills",
            "skillgrove index --library ~/skills --index /tmp/skills-index",
            exit_codes=INDEX_EXIT_CODES)
    index.set_defaults(handler=commands.cmd_index)

    search = sub.add_parser("search", help="find the toolbox (a group, or skills) for a request")
    search.add_argument("request", type=request_text, help="what the user wants done")
    search.add_argument("--context", type=Path, metavar="FILE",
                        help="JSON: {values: {...}, recent_skills: [...], conversation: [...]}")
    search.add_argument("--json", action="store_true", help="machine-readable output")
    search.add_argument("--detail", choices=["compact", "full"], default="compact",
                        help="with --json: compact (the default; what to use, in what order, "
                             "with which inputs, and why) or full (every ranked skill with its "
                             "scores, explanations and complete schemas)")
    search.add_argument("-k", type=skill_count, default=DEFAULT_K, metavar="N",
                        help=f"how many skills to rank ({MIN_K} to {MAX_K}; default {DEFAULT_K})")
    _add_library_option(search)
    _add_store_args(search)
    _epilog(search, 'skillgrove search "summarize the quarterly report PDF" -k 5',
            'skillgrove search "生成本周的工作周报" --json', exit_codes=SEARCH_EXIT_CODES)
    search.set_defaults(handler=commands.cmd_search)

    graph = sub.add_parser("graph", help="look at the skill graph")
    graph_sub = graph.add_subparsers(dest="graph_command", metavar="COMMAND")
    graph_sub.required = True
    neighbors = graph_sub.add_parser("neighbors", help="edges and neighbours of a skill or group")
    neighbors.add_argument("id", help="skill name or id, or group id")
    neighbors.add_argument("--json", action="store_true", help="machine-readable output")
    _add_library_option(neighbors)
    _add_store_args(neighbors)
    neighbors.set_defaults(handler=commands.cmd_neighbors)
    export = graph_sub.add_parser("export", help="a group's DAG as Mermaid or DOT")
    export.add_argument("group", help="group id")
    export.add_argument("--format", choices=["mermaid", "dot"], default="mermaid",
                        help="Mermaid flowchart or Graphviz DOT (default mermaid)")
    _add_library_option(export)
    _add_store_args(export)
    export.set_defaults(handler=commands.cmd_export)
    impact = graph_sub.add_parser("impact", help="the groups that use a skill, and which its "
                                  "current schema breaks")
    impact.add_argument("skill", help="skill name")
    impact.add_argument("--json", action="store_true", help="machine-readable output")
    _add_library_args(impact)
    _epilog(impact, "skillgrove graph impact pdf-to-text --library my-library")
    impact.set_defaults(handler=commands.cmd_impact)

    plan = sub.add_parser("plan", help="show how a group would run: levels, inputs, skips")
    _add_run_args(plan)
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    _epilog(plan, "skillgrove plan report-analysis --input pdf_path=report.pdf")
    plan.set_defaults(handler=commands.cmd_plan)

    run = sub.add_parser("run", help="run a group (live progress on stderr, outputs on stdout)")
    _add_run_args(run)
    run.add_argument("--resume", metavar="RUN_ID",
                     help="re-run only what did not succeed in that run")
    run.add_argument("--json", action="store_true", help="print the whole run record")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan and the group's side effects; run nothing")
    _epilog(run, "skillgrove run report-analysis --input pdf_path=report.pdf",
            "skillgrove run report-analysis --resume RUN_ID")
    run.set_defaults(handler=commands.cmd_run)

    runs = sub.add_parser("runs", help="list past runs; `runs show ID` shows one")
    runs.add_argument("--limit", type=positive_int, default=20,
                      help="list at most this many runs, newest first (default 20)")
    runs.add_argument("--json", action="store_true", help="machine-readable output")
    _add_store_args(runs)
    runs_sub = runs.add_subparsers(dest="runs_command", metavar="COMMAND")
    show = runs_sub.add_parser("show", help="one run record")
    show.add_argument("id", help="the run id (the first column of `skillgrove runs`)")
    _add_store_args(show)
    runs.set_defaults(handler=commands.cmd_runs, runs_command=None)

    compose = sub.add_parser("compose", help="write the toolbox for a request as a group file "
                             "(a composed toolbox, ready to review and save)")
    compose.add_argument("request", type=request_text, help="what the user wants done")
    compose.add_argument("--out", type=Path, metavar="FILE",
                         help="write the group file here (default: print it)")
    compose.add_argument("--json", action="store_true", help="machine-readable output")
    compose.add_argument("--context", type=Path, metavar="FILE",
                         help="JSON: {values: {...}, recent_skills: [...], conversation: [...]}")
    _add_library_option(compose)
    _add_store_args(compose)
    compose.set_defaults(handler=commands.cmd_compose)

    show = sub.add_parser("show", help="a skill by name: its inputs, files and instructions")
    show.add_argument("name", help="skill name (or id)")
    show.add_argument("file", nargs="?", help="print this file of the skill's folder instead")
    _add_library_option(show)
    show.add_argument("--json", action="store_true", help="machine-readable output")
    _add_store_args(show)
    show.set_defaults(handler=commands.cmd_show)

    run_skill = sub.add_parser("run-skill", help="run one executable skill on its own")
    run_skill.add_argument("name", help="skill name (or id)")
    run_skill.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                           help="an input of the skill (repeatable; values are strings)")
    run_skill.add_argument("--json-input", metavar="JSON",
                           help="all inputs as one JSON object (typed values)")
    _add_library_option(run_skill)
    run_skill.add_argument("--json", action="store_true", help="print the whole run record")
    _add_store_args(run_skill)
    run_skill.set_defaults(handler=commands.cmd_run_skill)

    inject = sub.add_parser("inject", help="print the context block for a request (and a run)")
    inject.add_argument("request", type=request_text, help="what the user wants done")
    inject.add_argument("--run", metavar="RUN_ID", help="include this run's results")
    inject.add_argument("--json", action="store_true",
                        help="machine-readable: {text, tokens, budget, level, left_out}")
    _add_inject_args(inject)
    _epilog(inject, 'skillgrove inject "turn markdown into HTML" --budget 800',
            'skillgrove inject "summarize the report" --run RUN_ID --format xml')
    inject.set_defaults(handler=commands.cmd_inject)

    ask = sub.add_parser("ask", help="search, run the chosen group (or fall back), inject")
    ask.add_argument("request", type=request_text, help="what the user wants done")
    ask.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                     help="an input of the chosen group (repeatable)")
    ask.add_argument("--concurrency", type=positive_int, default=4, metavar="N",
                     help="parallel steps (default 4)")
    ask.add_argument("--yes", "-y", action="store_true",
                     help="run the chosen group even if it sends mail, writes your files or has "
                          "other side effects (without it such a group is planned, not run)")
    ask.add_argument("--plan-only", action="store_true",
                     help="plan the chosen group, never run it")
    ask.add_argument("--json", action="store_true",
                     help="machine-readable: {toolbox, run, injection, notes, plan, "
                          "needs_confirmation, left_out_groups, exit_code}")
    ask.add_argument("--detail", choices=["compact", "full"], default="compact",
                     help="the toolbox in --json: compact (the default) or full")
    _add_inject_args(ask)
    _epilog(ask, 'skillgrove ask "summarize the quarterly report PDF and email the key numbers '
                 'to my team" --context library/samples/context_report.json --yes',
            'skillgrove ask "translate this paragraph into German" --plan-only',
            exit_codes=ASK_EXIT_CODES)
    ask.set_defaults(handler=commands.cmd_ask)

    demo = sub.add_parser("demo", help="the bundled library end to end: index, ask, run, inject")
    demo.add_argument("--concurrency", type=positive_int, default=4, metavar="N",
                      help="parallel steps (default 4)")
    demo.add_argument("--budget", type=positive_int, default=1500, metavar="TOKENS",
                      help="token budget for the injected block (default 1500)")
    demo.add_argument("--format", choices=["markdown", "xml"], default="markdown",
                      help="the injected block as Markdown or XML (default markdown)")
    _add_store_args(demo)
    demo.set_defaults(handler=commands.cmd_demo)

    bench = sub.add_parser("bench", help="run a retrieval benchmark folder (see FORMAT.md)")
    bench.add_argument("dir", type=Path, help="folder with skills/history/queries .jsonl")
    bench.add_argument("--mode", choices=["groups", "flat"], default="groups",
                       help="groups: mine groups from the history and search them first; flat: "
                            "skills only, the baseline (default groups)")
    bench.add_argument("--json", action="store_true", help="one JSON object on stdout")
    bench.add_argument("--limit", type=positive_int, default=None, metavar="N",
                       help="only the first N queries")
    bench.add_argument("--without", action="append", default=[], metavar="STAGE",
                       help="turn a retrieval stage off, to see what it is worth (repeatable; "
                       "e.g. parts, planner, groups: an unknown name lists them all)")
    bench.add_argument("--hide-sets", type=share, default=0.0, metavar="SHARE",
                       help="hide this share of the recurring skill sets from history (seeded) "
                            "and score only the queries that need one: the composition figure")
    _add_store_args(bench)
    _epilog(bench, "skillgrove bench shared/benchmarks/skills-500 --mode flat --limit 100")
    bench.set_defaults(handler=commands.cmd_bench)

    groups_cmd = sub.add_parser("groups", help="work with groups")
    groups_sub = groups_cmd.add_subparsers(dest="groups_command", metavar="COMMAND")
    groups_sub.required = True
    suggest = groups_sub.add_parser("suggest", help="mine draft groups from run history")
    suggest.add_argument("--history", type=Path, metavar="FILE",
                         help="a history .jsonl (benchmark format); default: the run log")
    suggest.add_argument("--out", type=Path, default=None, metavar="DIR",
                         help="folder for the draft YAML files (default: <library>/groups/"
                              "drafts, which `check` reads and reports as drafts)")
    suggest.add_argument("--min-support", type=positive_int, default=None, metavar="N",
                         help="runs a skill set needs before it becomes a draft (default 2; 1 "
                              "in a history of under 300 rows)")
    suggest.add_argument("--limit", type=positive_int, default=50, metavar="N",
                         help="at most this many drafts (default 50)")
    suggest.add_argument("--force", action="store_true", help="replace existing files")
    suggest.add_argument("--json", action="store_true", help="machine-readable output")
    _add_library_option(suggest)
    _add_store_args(suggest)
    suggest.set_defaults(handler=commands.cmd_groups_suggest)
    _epilog(suggest, "skillgrove groups suggest --library my-library",
            "skillgrove groups suggest --library my-library --history history.jsonl")
    lock = groups_sub.add_parser("lock", help="pin each group's skills (content hash and "
                                 "schemas) in <library>/groups/skillgrove.lock")
    _add_library_args(lock)
    lock.add_argument("--json", action="store_true", help="machine-readable output")
    _epilog(lock, "skillgrove groups lock --library my-library")
    lock.set_defaults(handler=commands.cmd_groups_lock)
    serve = sub.add_parser("serve", help="serve the engine to agents: MCP or HTTP")
    serve_sub = serve.add_subparsers(dest="serve_command", metavar="COMMAND")
    serve_sub.required = True
    mcp = serve_sub.add_parser("mcp", help="an MCP server (stdio, or streamable HTTP)")
    _add_library_args(mcp)
    _add_store_args(mcp)
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                     help="stdio (default: a host starts it as a subprocess) or streamable HTTP")
    mcp.add_argument("--host", default="127.0.0.1", help="with --transport http (default "
                     "127.0.0.1)")
    mcp.add_argument("--port", type=port_number, default=8765,
                     help="with --transport http (default 8765)")
    mcp.add_argument("--token", default=None,
                     help="with --transport http: bearer token clients must send (default "
                          "$SKILLGROVE_TOKEN); any address but loopback needs one")
    mcp.add_argument("--max-runs", type=positive_int, default=8, metavar="N",
                     help="runs carried at once; a run tool called beyond is a too_many_runs "
                          "error (default 8)")
    mcp.add_argument("--no-watch", action="store_true",
                     help="do not watch the library folders for changes")
    mcp.set_defaults(handler=commands.cmd_serve_mcp)
    http = serve_sub.add_parser("http", help="the HTTP API (OpenAPI at /openapi.json)")
    _add_library_args(http)
    _add_store_args(http)
    http.add_argument("--host", default="127.0.0.1",
                      help="address to bind (default 127.0.0.1; any other needs --token)")
    http.add_argument("--port", type=port_number, default=8787, help="port (default 8787)")
    http.add_argument("--token", default=None,
                      help="bearer token clients must send (default $SKILLGROVE_TOKEN)")
    http.add_argument("--max-body", type=positive_int, default=1024 * 1024, metavar="BYTES",
                      help="largest request body accepted (default 1 MiB)")
    http.add_argument("--max-runs", type=positive_int, default=8, metavar="N",
                      help="runs carried at once; more are answered 429 (default 8)")
    http.add_argument("--no-watch", action="store_true",
                      help="do not watch the library folders for changes")
    http.set_defaults(handler=commands.cmd_serve_http)
    studio = sub.add_parser("studio", help="serve the HTTP API with skillgrove studio, the "
                            "browser editor for groups, and print its address")
    _add_library_args(studio)
    _add_store_args(studio)
    studio.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; any other needs --token)")
    studio.add_argument("--port", type=port_number, default=8787, help="port (default 8787; 0 picks "
                        "a free one)")
    studio.add_argument("--token", default=None,
                        help="bearer token the page and clients must send (default "
                             "$SKILLGROVE_TOKEN); the address printed carries it")
    studio.add_argument("--open", action="store_true", help="also open it in a web browser")
    studio.set_defaults(handler=commands.cmd_studio)
    return parser


def _add_library_option(parser: argparse.ArgumentParser, default: str = "") -> None:
    default = default or ("the folders the index was built from, else $SKILLGROVE_PATH, else "
                          "the bundled library")
    parser.add_argument("--library", action="append", type=Path, metavar="PATH",
                        help="a library folder (or group file); repeatable, earliest first, "
                             f"folders may be joined with ':' (default: {default})")


def _epilog(parser: argparse.ArgumentParser, *examples: str,
            exit_codes: Sequence[tuple[int, str]] = ()) -> None:
    """Examples at the end of a command's ``--help``, and its exit codes."""
    parser.epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)
    if exit_codes:
        parser.epilog += "\n\nexit codes:\n" + "\n".join(f"  {code}  {meaning}"
                                                         for code, meaning in exit_codes)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


SEARCH_EXIT_CODES = ((0, "a group or single skills were chosen"),
                     (commands.EXIT_FAILED, "a mistake (the error is on stderr)"),
                     (commands.EXIT_NOTHING_FITS, "nothing fits: no group, no single skill"))
ASK_EXIT_CODES = ((0, "done: the group ran, or the block lists what to use"),
                  (commands.EXIT_FAILED, "a mistake, or the run failed"),
                  (commands.EXIT_NEEDS_CONFIRMATION,
                   "planned, not run: the group needs confirmation (--yes) for its effects"),
                  (commands.EXIT_NOTHING_FITS, "nothing fits: no group, no single skill"))
INDEX_EXIT_CODES = ((0, "indexed, nothing left out"),
                    (commands.EXIT_FAILED, "a mistake (the error is on stderr)"),
                    (commands.EXIT_LEFT_OUT,
                     "indexed, but skills or groups with errors were left out (listed on "
                     "stderr; `skillgrove check` shows them all)"))


def _add_run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", help="group id")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                        help="a group input (repeatable)")
    parser.add_argument("--context", type=Path, metavar="FILE",
                        help="JSON: {values: {...}}; the steps read each value as "
                             "context.<key>")
    _add_library_option(parser)
    parser.add_argument("--concurrency", type=positive_int, default=4, metavar="N",
                        help="parallel steps (default 4)")
    _add_store_args(parser)


def _add_inject_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context", type=Path, metavar="FILE",
                        help="JSON: {values: {...}, recent_skills: [...], conversation: [...]}")
    parser.add_argument("--budget", type=int, default=None, metavar="TOKENS",
                        help="token budget for the injected block (cl100k_base tokens)")
    parser.add_argument("--format", choices=["markdown", "xml"], default="markdown",
                        help="the block as Markdown or XML (default markdown)")
    _add_library_option(parser)
    _add_store_args(parser)


def _add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", type=Path, default=None, metavar="DIR",
                        help="where the embedded index lives (default: $SKILLGROVE_INDEX, "
                             "else ./.skillgrove)")
    parser.add_argument("--store", choices=["embedded", "neo4j"], default="embedded",
                        help="graph store (default: embedded, no server)")
    parser.add_argument("--model", default=None,
                        help="sentence-transformers model folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--no-sandbox", action=_NoSandboxAction, nargs=0,
                        help="run skills without the operating-system sandbox, for a library "
                             "you trust (as SKILLGROVE_SANDBOX=off)")


class _NoSandboxAction(argparse.Action):
    """``--no-sandbox``: this process's runs go without the sandbox (its executors read
    ``SKILLGROVE_SANDBOX``), and the run records say so."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        os.environ["SKILLGROVE_SANDBOX"] = "off"


class _VersionAction(argparse.Action):
    """``--version``, its number read from the installed metadata only when asked for (reading
    it costs every other command tens of milliseconds)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(f"skillgrove {_version()}\n")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillgrove")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


def summarize(library: Library) -> dict[str, Any]:
    catalog = library.catalog
    rejected = Counter(rule for load in catalog.rejected for rule in load.rejected_by)
    return {
        "skill_files": len(catalog.loads),
        "skills_loaded": len(catalog.skills),
        "skills_unavailable": sum(1 for s in catalog.skills if not s.available),
        "skills_rejected": len(catalog.rejected),
        "rejected_by_rule": dict(sorted(rejected.items())),
        "shadowed": len(catalog.shadowed),
        "group_files": len(library.group_loads),
        "groups_valid": len(library.groups),
        "drafts": len(library.drafts),
        "drafts_valid": sum(1 for g in library.drafts.values()
                            if not any(d.is_error and d.path == g.path for d in library.errors)),
        "errors": len(library.errors),
        "warnings": len(library.warnings),
    }


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    library = _explicit_engine(args).check()
    summary = summarize(library)
    if args.json:
        payload = {
            "ok": not library.errors,
            "roots": [str(r) for r in library.roots],
            "summary": summary,
            "groups": [{"id": group.id, "path": str(group.path)}
                       for group in sorted(library.groups.values(), key=lambda g: g.id)],
            "duplicates": [{"name": sh.winner.name, "used": str(sh.winner.skill_file),
                            "also": str(sh.hidden.skill_file), "also_id": sh.hidden.id,
                            "same_root": sh.same_root} for sh in library.catalog.shadowed],
            "diagnostics": [d.to_dict() for d in library.diagnostics
                            if not (args.quiet and d.severity is not Severity.ERROR)],
            "sandbox": _sandbox_report(library),
        }
        out.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
        return 1 if library.errors else 0
    style = Style.for_stream(out)
    for diagnostic in library.diagnostics:
        if args.quiet and diagnostic.severity is not Severity.ERROR:
            continue
        out.write(style.diagnostic(diagnostic.format()) + "\n")
    if not args.quiet:
        _print_sandbox(library, out)
    rejected = ", ".join(f"{rule} {n}" for rule, n in summary["rejected_by_rule"].items())
    errors = plural(summary["errors"], "error")
    warnings = plural(summary["warnings"], "warning")
    out.write(
        f"\n{plural(summary['skill_files'], 'SKILL.md file')}: {summary['skills_loaded']} loaded "
        f"({summary['skills_unavailable']} unavailable here), {summary['skills_rejected']} rejected"
        + (f" ({rejected})" if rejected else "")
        + f"; {plural(summary['group_files'], 'group file')}: {summary['groups_valid']} valid"
        + (f" (drafts in groups/drafts/: {summary['drafts_valid']} valid of {summary['drafts']})"
           if summary["drafts"] else "") + "\n"
        + (style.error(errors) if summary["errors"] else errors) + ", "
        + (style.warning(warnings) if summary["warnings"] else warnings) + "\n")
    return 1 if library.errors else 0


def _sandbox_report(library: Any) -> dict[str, Any]:
    """What the sandbox lets each skill that runs as a process reach (``check --json``)."""
    from skillgrove.runtime import sandbox

    problem = sandbox.problem() if sandbox.sandbox_wanted() else None
    return {"on": sandbox.sandbox_wanted(), "problem": problem,
            "skills": {skill.name: sandbox.allowances(skill)
                       for skill in library.catalog.active.values()
                       if skill.entrypoint is not None and skill.entrypoint.kind != "http"}}


def _print_sandbox(library: Any, out: TextIO) -> None:
    from skillgrove.runtime import sandbox

    skills = [s for s in library.catalog.active.values()
              if s.entrypoint is not None and s.entrypoint.kind != "http"]
    if not skills:
        return
    if not sandbox.sandbox_wanted():
        out.write("\nsandbox: off (SKILLGROVE_SANDBOX=off): skills run with the user's rights\n")
    elif (problem := sandbox.problem()) is not None:
        out.write(f"\nsandbox: {problem}\n")
    else:
        out.write("\n")
    for skill in sorted(skills, key=lambda s: s.name):
        out.write(sandbox.describe(skill, sandbox.allowances(skill)) + "\n")


def _explicit_engine(args: argparse.Namespace) -> Skillgrove:
    """``check`` reads the paths it is given, else $SKILLGROVE_PATH, else the bundled library
    (never the folders of an index)."""
    from skillgrove.runtime.engine import Skillgrove
    from skillgrove.runtime.paths import default_paths

    return Skillgrove(commands.library_paths(commands.named_library(args)) or default_paths(),
                      allow_rules=args.allow_rule)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    # A library's or a skill's text never reaches a terminal raw (terminal.SafeText, #26).
    errors, sys.stderr = sys.stderr, safe(sys.stderr)
    try:
        args = build_parser().parse_args(argv)
        return _main(args, safe(out or sys.stdout))
    finally:
        sys.stderr = errors


def _main(args: argparse.Namespace, stream: TextIO) -> int:
    interrupts = _Interrupts(args.command in RUNNING_COMMANDS)
    try:
        with interrupts:
            code: int = args.handler(args, stream)
        stream.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        if interrupts.received is not None:
            return 128 + interrupts.received
    except BrokenPipeError:
        return _reader_went_away()
    except SkillgroveError as exc:
        sys.stderr.write(f"skillgrove: {Style.for_stream(sys.stderr).error(str(exc))}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("skillgrove: interrupted\n")
        return 130
    return code


RUNNING_COMMANDS = frozenset({"run", "run-skill", "ask", "demo"})


class _Interrupts:
    """SIGINT and SIGTERM during a command that runs groups: the first one cancels the runs in
    progress (see the module docstring); ``received`` is the signal that did."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupts:
        if self.enabled:
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        first = self.received is None
        # Runs exist only once the runner is imported: a command that never ran one (a search,
        # an ask that fell back) does not import it for the signal's sake.
        runner = sys.modules.get("skillgrove.runtime.runner")
        if first and runner is not None and runner.cancel_active_runs(
                f"interrupted by {signal.Signals(signum).name}"):
            self.received = signum
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)


EXIT_CLOSED_PIPE = 141


def _reader_went_away() -> int:
    """What is left to print goes to the null device: Python flushes stdout once more at exit,
    and that would fail on the closed pipe too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (a test's buffer)
        pass
    return EXIT_CLOSED_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
