"""The DAG runner: validate, plan (topological levels), run.

Independent steps run in parallel under a concurrency cap. A step's ``with`` is resolved just
before it starts. A step runs when its ``if`` holds; without ``if`` it runs when every step it
needs succeeded (``success()``), and an ``if`` without a status function means
``success() && (if)``, as in GitHub Actions — so dependents of a skipped or failed step are
skipped unless they say ``always()`` or ``failure()``. A failed step with ``continue_on_error``
counts as done for its dependents. Any other failure stops the run (fail-fast): running steps
are cancelled (their process trees killed) and nothing new starts.

**Cancelling.** :meth:`Runner.cancel` (or the ``stop`` event a caller passes in) stops a run the
same way: running steps are killed, nothing new starts, and the run is recorded as
``cancelled``. :func:`cancel_active_runs` cancels every run of the process (the CLI calls it on
SIGINT and SIGTERM). A cancelled or failed run can be resumed.

**Resuming.** ``run(..., resume=record)`` takes the stored inputs and context, with any given
values laid over them, and keeps the run folder. A step that succeeded before is reused when
it is ready, unless its definition (see :func:`step_definition`) or its resolved inputs
changed: then it runs again, and its ``step_started`` event and record say why.

**Run folders.** With ``RunOptions.runs_dir`` each run gets ``<runs_dir>/<run id>/`` and each
step a folder inside it, passed to the skill as its :class:`Workspace`.

**Plans.** :meth:`Runner.plan` assumes that every step that runs succeeds. An ``if`` that reads
step outputs is neither true nor false before the run: such a step, and what needs it, is
*decided at run time*, and the plan names the steps it depends on.

>>> runner = Runner(library.groups, library.skills, SubprocessExecutor())
>>> record = runner.run("report-analysis", {"pdf_path": "q3.pdf"}, {"team_email": "t@x.io"})
>>> record.status, record.outputs["summary"][:30]
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from skillgrove.graph.runlog import RunLog, RunRecord, StepRecord
from skillgrove.groups.expressions import (
    STATUS_FUNCTIONS,
    Binary,
    Call,
    Node,
    StepStatuses,
    Unary,
    calls,
    evaluate,
    has_expression,
    parse_expression,
    parse_template,
    references,
    render_value,
    step_budget,
    truthy,
)
from skillgrove.groups.loader import matches_type
from skillgrove.groups.model import Group, RetryPolicy, Step
from skillgrove.runtime.errors import EngineError
from skillgrove.runtime.events import Event, EventKind, EventSink, ignore
from skillgrove.runtime.executors import Cancel, ExecResult, Executor, Outcome, Workspace
from skillgrove.skills import boundedjson
from skillgrove.skills.boundedjson import JSONLimitError, value_problem
from skillgrove.skills.diagnostics import did_you_mean
from skillgrove.skills.errors import ExpressionError
from skillgrove.skills.model import Skill


class RunError(EngineError):
    """A run cannot start: unknown group, missing or ill-typed inputs."""

    code = "run_error"


@dataclass(frozen=True)
class RunOptions:
    max_concurrency: int = 4
    default_timeout: float | None = None
    """Per-attempt timeout when neither the step nor the skill gives one (None: the executor's)."""
    workdir: Path | None = None
    """Where relative paths in inputs point (default: the current directory at run time).
    Skills run inside their own folder, so inputs declared ``format: path`` are made absolute
    against this before a skill sees them."""
    runs_dir: Path | None = None
    """The parent of the run folders (``<runs_dir>/<run id>/``); None: runs get no folder, and
    skills that write files fall back to their own defaults."""
    library: str | None = None
    """Recorded with each run (:attr:`RunRecord.library`): which library it came from."""


POLL_SECONDS = 0.1
"""How often a waiting run looks at its cancel flag."""


@dataclass(frozen=True)
class PlannedStep:
    id: str
    target: str
    kind: str
    level: int
    needs: tuple[str, ...]
    inputs: Mapping[str, Any]
    """``with`` resolved as far as inputs and context allow; step outputs stay as expressions."""
    skip_reason: str | None = None
    """Why the step will not run, when that is known before the run."""
    decided_at_run_time: bool = False
    """Whether it runs depends on what earlier steps return (its ``if`` reads their outputs,
    or a step it needs is itself decided at run time)."""
    depends_on: tuple[str, ...] = ()
    """The steps that decide it, when ``decided_at_run_time``."""


@dataclass(frozen=True)
class Plan:
    group: str
    inputs: Mapping[str, Any]
    levels: tuple[tuple[str, ...], ...]
    steps: tuple[PlannedStep, ...]


def topological_levels(group: Group) -> tuple[tuple[str, ...], ...]:
    """Steps grouped by depth: level 0 needs nothing, level n needs something at level n-1.

    Kahn's algorithm, linear in steps and needs; each level keeps the file's order."""
    order = [s.id for s in group.steps]
    waiting = {s.id: len(set(s.needs)) for s in group.steps}
    needed_by: dict[str, list[str]] = {sid: [] for sid in order}
    for step in group.steps:
        for need in set(step.needs):
            if need not in needed_by:
                raise RunError(f"group '{group.id}': step '{step.id}' needs unknown step "
                               f"'{need}'")
            needed_by[need].append(step.id)
    level: dict[str, int] = {}
    ready = [sid for sid in order if waiting[sid] == 0]
    for sid in ready:
        level[sid] = 0
    while ready:
        sid = ready.pop()
        for later in needed_by[sid]:
            level[later] = max(level.get(later, 0), level[sid] + 1)
            waiting[later] -= 1
            if waiting[later] == 0:
                ready.append(later)
    if len(level) < len(order) or any(waiting.values()):
        stuck = sorted(sid for sid, count in waiting.items() if count)
        raise RunError(f"group '{group.id}' has a cycle among {stuck}")
    depth = max(level.values(), default=-1) + 1
    rows: list[list[str]] = [[] for _ in range(depth)]
    for sid in order:
        rows[level[sid]].append(sid)
    return tuple(tuple(row) for row in rows)


def resolve_inputs(group: Group, given: Mapping[str, Any]) -> dict[str, Any]:
    """The group's inputs: given values, then defaults; raises RunError for what is wrong."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    declared = {spec.name for spec in group.inputs}
    for name in given:
        if name not in declared:
            problems.append(f"unknown input '{name}' ("
                            + (did_you_mean(str(name), declared) or (
                                f"inputs: {', '.join(sorted(declared))}" if declared
                                else "the group takes no inputs")) + ")")
    for spec in group.inputs:
        if spec.name in given and given[spec.name] is not None:
            try:
                value = _coerce(given[spec.name], spec.type)
            except JSONLimitError as exc:
                problems.append(f"input '{spec.name}': {exc}")
                continue
            too_big = value_problem(value)
            if too_big is not None:
                problems.append(f"input '{spec.name}': {too_big}")
            elif not matches_type(value, spec.type):
                problems.append(f"input '{spec.name}' must be {spec.type}, got {value!r}")
            elif spec.enum is not None and value not in spec.enum:
                meant = did_you_mean(value, [str(v) for v in spec.enum]) if isinstance(
                    value, str) else None
                problems.append(f"input '{spec.name}' must be one of {list(spec.enum)}"
                                + (f" ({meant})" if meant else ""))
            values[spec.name] = value
        elif spec.has_default:
            values[spec.name] = spec.default
        elif spec.required:
            problems.append(f"missing required input '{spec.name}'"
                            + (f" ({spec.description})" if spec.description else ""))
        else:
            values[spec.name] = None
    if problems:
        raise RunError(f"group '{group.id}': " + "; ".join(problems))
    return values


def _coerce(value: Any, type_name: str) -> Any:
    """Command-line values arrive as strings; turn '3' into 3 where an integer is declared.
    JSON text beyond the limits of :mod:`skillgrove.skills.boundedjson` raises JSONLimitError."""
    if not isinstance(value, str):
        return value
    try:
        if type_name == "integer":
            return int(value)
        if type_name == "number":
            return float(value)
        if type_name == "boolean" and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if type_name in ("array", "object"):
            return boundedjson.loads(value)
    except JSONLimitError:
        raise
    except ValueError:
        return value
    return value


def condition_of(step: Step) -> Node:
    """The step's effective condition, with the implicit ``success()`` made explicit."""
    implicit = Call("success", (), 0)
    if step.if_ is None:
        return implicit
    text = step.if_
    if has_expression(text):
        node = parse_template(text).expressions[0].node
    else:
        node = parse_expression(text)
    if any(c.func in STATUS_FUNCTIONS for c in calls(node)):
        return node
    return Binary("&&", implicit, node, 0)


@dataclass(frozen=True)
class _Unknown:
    """A value the plan cannot know before the run, and the steps it waits for."""

    depends_on: frozenset[str]


def _decide(node: Node, scope: Mapping[str, Any], planned: Mapping[str, str],
            needs: tuple[str, ...]) -> Any:
    """Evaluate a condition before the run, in three values: a known value, or
    :class:`_Unknown` when it reads what a step returns. ``planned`` holds each earlier step's
    state (``runs``, ``skipped`` or ``conditional``); steps that run are taken to succeed.
    ``unknown && false`` is false and ``unknown || true`` is true, as they will be at run time.
    """
    if isinstance(node, Binary) and node.op in ("&&", "||"):
        left = _decide(node.left, scope, planned, needs)
        if not isinstance(left, _Unknown):
            if truthy(left) == (node.op == "||"):
                return left
            return _decide(node.right, scope, planned, needs)
        right = _decide(node.right, scope, planned, needs)
        if not isinstance(right, _Unknown):
            if truthy(right) == (node.op == "||"):
                return right
            return left
        return _Unknown(left.depends_on | right.depends_on)
    if isinstance(node, Unary) and node.op == "!":
        operand = _decide(node.operand, scope, planned, needs)
        return operand if isinstance(operand, _Unknown) else not truthy(operand)
    if isinstance(node, Call) and node.func == "success":
        states = {n: planned.get(n, "runs") for n in needs}
        if any(state == "skipped" for state in states.values()):
            return False
        pending = frozenset(n for n, state in states.items() if state == "conditional")
        return _Unknown(pending) if pending else True
    if isinstance(node, Call) and node.func in ("always", "failure"):
        return node.func == "always"  # no step that runs fails, in a plan
    waiting: set[str] = set()
    for ref in references(node):
        if ref.root != "steps":
            continue
        if not ref.path:  # steps[...] with a computed key: any step it needs may be meant
            waiting.update(n for n in needs if planned.get(n) != "skipped")
            continue
        sid = str(ref.path[0])
        state = planned.get(sid, "runs")
        reads_status = len(ref.path) > 1 and ref.path[1] == "status"
        if state == "conditional" or (state == "runs" and not reads_status):
            waiting.add(sid)
    if waiting:
        return _Unknown(frozenset(waiting))
    try:
        return evaluate(node, scope)
    except ExpressionError:
        return _Unknown(frozenset(needs))


def _plan_scope(values: Mapping[str, Any], context: Mapping[str, Any],
                planned: Mapping[str, str]) -> dict[str, Any]:
    """What is known of the steps before the run: a skipped step has no outputs, a step that
    runs is taken to succeed."""
    steps: dict[str, Any] = {
        sid: {"outputs": {}, "status": "skipped" if state == "skipped" else "success"}
        for sid, state in planned.items() if state != "conditional"}
    return {"inputs": dict(values), "context": dict(context), "steps": steps}


def step_definition(step: Step, skills: Mapping[str, Skill],
                    groups: Mapping[str, Group]) -> str:
    """A digest of what a step runs: its target and ``with`` as written, and the skill's
    ``SKILL.md`` and Python entrypoint file (or the sub-group's file). When and how often it
    runs (``needs``, ``if``, ``retry``, ``timeout``) is left out: changing those changes no
    result."""
    parts: dict[str, Any] = {"kind": step.kind, "target": step.target, "with": step.with_}
    if step.skill:
        skill = skills.get(step.skill)
        if skill is not None:
            parts["skill"] = skill.content_hash
            entry = skill.entrypoint
            if entry is not None and entry.kind == "python":
                source = skill.folder / entry.target.rsplit(":", 1)[0]
                with contextlib.suppress(OSError):
                    parts["source"] = hashlib.sha256(source.read_bytes()).hexdigest()
    elif step.group:
        sub = groups.get(step.group.removeprefix("group:"))
        if sub is not None:
            parts["group"] = sub.content_hash
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _same(a: Any, b: Any) -> bool:
    """Equal once both are JSON (a stored record holds lists where a fresh value has tuples)."""
    def dump(x: Any) -> str:
        return json.dumps(x, sort_keys=True, ensure_ascii=False, default=str)

    return dump(a) == dump(b)


class _RunState:
    def __init__(self, group: Group, previous: RunRecord | None, run_dir: Path | None,
                 outer: Cancel | None) -> None:
        self.status: dict[str, str] = {s.id: "pending" for s in group.steps}
        # Scheduling in time linear in the steps: each step counts the needs not yet settled;
        # a step whose count reaches zero goes on the heap of ready steps (in file order).
        self.position = {s.id: i for i, s in enumerate(group.steps)}
        self.waiting = {s.id: len(set(s.needs)) for s in group.steps}
        self.dependents: dict[str, list[str]] = {s.id: [] for s in group.steps}
        for step in group.steps:
            for need in set(step.needs):  # a need that names no step keeps it waiting
                self.dependents.setdefault(need, []).append(step.id)
        self.ready = [(self.position[sid], sid) for sid, count in self.waiting.items()
                      if count == 0]
        self.scope_steps: dict[str, dict[str, Any]] = {
            s.id: {"outputs": {}, "status": "pending"} for s in group.steps}
        """What ``steps`` holds in expressions; an entry is replaced, never changed, so a
        shallow copy is a snapshot."""
        self.outputs: dict[str, Mapping[str, Any]] = {}
        self.records: dict[str, StepRecord] = {}
        self.failed: str | None = None
        self.cancelled: str | None = None
        """Why the run was cancelled (a signal, the caller, the parent step)."""
        self.cancels: dict[str, Cancel] = {}
        self.lock = threading.Lock()
        self.previous = previous
        """The run being resumed: its successful steps may be reused."""
        self.run_dir = run_dir
        self.outer = outer
        """The cancel flag of the step that runs this (sub-)group, if any."""

    def settle(self, sid: str, status: str) -> None:
        """Record the step's new status; when it leaves pending and running, the steps that
        need it count one need fewer."""
        before = self.status[sid]
        self.status[sid] = status
        self.scope_steps[sid] = {"outputs": dict(self.outputs.get(sid, {})), "status": status}
        if before in ("pending", "running") and status not in ("pending", "running"):
            for other in self.dependents[sid]:
                self.waiting[other] -= 1
                if self.waiting[other] == 0:
                    heapq.heappush(self.ready, (self.position[other], other))


_ACTIVE: dict[int, Runner] = {}
_ACTIVE_LOCK = threading.Lock()


def cancel_active_runs(reason: str) -> int:
    """Cancel every run in progress in this process; returns how many runs there were.
    Safe to call from a signal handler: it takes no lock and only sets flags."""
    runners = list(_ACTIVE.values())
    for runner in runners:
        runner.cancel(reason)
    return len(runners)


class Runner:
    """Runs groups of one library. ``stop``: an event the caller may set (from any thread) to
    cancel the runs of this runner, as :meth:`cancel` does."""

    def __init__(self, groups: Mapping[str, Group], skills: Mapping[str, Skill],
                 executor: Executor, *, run_log: RunLog | None = None, events: EventSink = ignore,
                 options: RunOptions | None = None,
                 sleep: Callable[[float], None] | None = None,
                 rng: Callable[[], float] = random.random,
                 stop: threading.Event | None = None) -> None:
        self.groups = groups
        self.skills = skills
        self.executor = executor
        self.run_log = run_log
        self._sink = events
        self._sink_lock = threading.Lock()
        self.options = options or RunOptions()
        self._sleep = sleep
        self._rng = rng
        self.stop = stop or threading.Event()
        self._cancel_reason: str | None = None
        self._interrupted: BaseException | None = None

    def cancel(self, reason: str = "cancelled by the caller") -> None:
        """Cancel the runs in progress and any later run of this runner: running steps are
        killed, nothing new starts, and each run is recorded as ``cancelled``. It only sets a
        flag (the runs notice within :data:`POLL_SECONDS`), so a signal handler may call it."""
        if self._cancel_reason is None:
            self._cancel_reason = reason

    def _cancel_requested(self, state: _RunState) -> str | None:
        if self._cancel_reason is not None:
            return self._cancel_reason
        if self.stop.is_set():
            return "cancelled by the caller"
        if state.outer is not None and state.outer.is_set():
            return state.outer.reason or "the step running this group was cancelled"
        return None

    # -- planning -----------------------------------------------------------------------------

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id.removeprefix("group:"))
        if group is None:
            raise RunError(f"unknown group '{group_id}'; `skillgrove check` lists the valid ones")
        return group

    def plan(self, group_id: str, inputs: Mapping[str, Any] | None = None,
             context: Mapping[str, Any] | None = None) -> Plan:
        """How the group would run: its levels, each step's ``with`` as far as it is known,
        and whether the step runs, is skipped, or is decided at run time (and by what)."""
        group = self._group(group_id)
        values = resolve_inputs(group, inputs or {})
        ctx = dict(context or {})
        levels = topological_levels(group)
        depth = {sid: i for i, ids in enumerate(levels) for sid in ids}
        steps = {s.id: s for s in group.steps}
        order = [s.id for s in group.steps]
        planned: dict[str, str] = {}
        found: dict[str, PlannedStep] = {}
        for sid in (sid for ids in levels for sid in ids):
            step = steps[sid]
            scope = _plan_scope(values, ctx, planned)
            decision = _decide(condition_of(step), scope, planned, step.needs)
            reason = None
            depends_on: tuple[str, ...] = ()
            if isinstance(decision, _Unknown):
                planned[sid] = "conditional"
                depends_on = tuple(sorted(decision.depends_on, key=order.index))
            elif truthy(decision):
                planned[sid] = "runs"
            else:
                planned[sid] = "skipped"
                reason = self._skip_reason(step, planned)
            with step_budget():  # every value of the step's preview, together
                preview = _preview(step.with_, {**scope, "steps": {}})
            found[sid] = PlannedStep(step.id, step.target, step.kind, depth[sid], step.needs,
                                     preview, reason, isinstance(decision, _Unknown), depends_on)
        return Plan(group.id, values, levels, tuple(found[s.id] for s in group.steps))

    @staticmethod
    def _skip_reason(step: Step, planned: Mapping[str, str]) -> str:
        own_status_check = step.if_ is not None and any(
            c.func in STATUS_FUNCTIONS for c in calls(condition_of(step)))
        need_skipped = any(planned.get(n) == "skipped" for n in step.needs)
        if step.if_ is None or (need_skipped and not own_status_check):
            return "a step it needs is skipped"
        reason = f"if {step.if_} is false"
        read = sorted({str(r.path[0]) for r in references(condition_of(step))
                       if r.root == "steps" and r.path})
        if read:
            reason += (", whatever " + " and ".join(f"steps.{sid}" for sid in read)
                       + (" returns" if len(read) == 1 else " return"))
        if any(c.func == "failure" for c in calls(condition_of(step))):
            reason += " (a plan takes the steps it needs to succeed)"
        return reason

    # -- running ------------------------------------------------------------------------------

    def run(self, group_id: str, inputs: Mapping[str, Any] | None = None,
            context: Mapping[str, Any] | None = None, *, resume: RunRecord | None = None,
            request: str | None = None) -> RunRecord:
        """Run a group and record it. With ``resume``, given inputs and context are laid over
        the stored ones, the run folder is kept, and unchanged successful steps are reused.
        A KeyboardInterrupt (or SystemExit) while it waits cancels the run, records it, then
        propagates."""
        group = self._group(group_id)
        if resume is not None:
            if resume.group != group.id:
                raise RunError(f"run {resume.id} belongs to group '{resume.group}', not "
                               f"'{group.id}'; resume it with `skillgrove run {resume.group} "
                               f"--resume {resume.id}`")
            declared = {spec.name for spec in group.inputs}
            stored = {k: v for k, v in resume.inputs.items() if k in declared}
            inputs = {**stored, **(inputs or {})}
            context = {**resume.context, **(context or {})}
        values = resolve_inputs(group, inputs or {})
        refusal = getattr(self.executor, "refusal", None)
        why = refusal() if callable(refusal) else None
        if why is not None:
            raise RunError(why)  # the sandbox cannot start: nothing runs unsandboxed unasked
        run_id = uuid.uuid4().hex[:12]
        run_dir = self._run_dir(run_id, resume)
        token = object()
        with _ACTIVE_LOCK:
            _ACTIVE[id(token)] = self
        try:
            state = _RunState(group, resume, run_dir, None)
            record = self._run_group(group, values, dict(context or {}), run_id, "", state,
                                     request)
        finally:
            with _ACTIVE_LOCK:
                del _ACTIVE[id(token)]
        if self.options.library is not None:
            record = replace(record, library=self.options.library)
        if self.run_log is not None:
            self.run_log.record(record)
        if self._interrupted is not None:
            interrupted, self._interrupted = self._interrupted, None
            raise interrupted
        return record

    def _run_dir(self, run_id: str, resume: RunRecord | None) -> Path | None:
        """The run's folder: the resumed run's (made again if it was deleted), else a new one."""
        if resume is not None and resume.run_dir:
            folder = Path(resume.run_dir)
        elif self.options.runs_dir is not None:
            folder = self.options.runs_dir / run_id
        else:
            return None
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return folder

    def _emit(self, event: Event) -> None:
        with self._sink_lock:
            self._sink(event)

    def _run_group(self, group: Group, values: Mapping[str, Any], context: Mapping[str, Any],
                   run_id: str, prefix: str, state: _RunState,
                   request: str | None) -> RunRecord:
        started_at = time.time()
        started = time.perf_counter()
        data: dict[str, Any] = {"inputs": dict(values)}
        if state.run_dir is not None and not prefix:
            data["run_dir"] = str(state.run_dir)
        self._emit(Event(EventKind.RUN_STARTED, run_id, group.id, prefix or None, data=data))
        steps = {s.id: s for s in group.steps}
        with ThreadPoolExecutor(max_workers=max(1, self.options.max_concurrency)) as pool:
            running: dict[Future[StepRecord], str] = {}
            while True:
                reason = self._cancel_requested(state)
                if reason is not None and state.cancelled is None:
                    state.cancelled = reason
                    with state.lock:
                        cancels = list(state.cancels.values())
                    for cancel in cancels:
                        cancel.set(reason)
                progressed = self._start_ready(group, steps, state, values, context, run_id,
                                               prefix, pool, running)
                if not running:
                    if progressed:
                        continue
                    break
                try:
                    done, _ = wait(list(running), timeout=POLL_SECONDS,
                                   return_when=FIRST_COMPLETED)
                except (KeyboardInterrupt, SystemExit) as exc:
                    # Stop the steps and record the run before the exception goes on.
                    self._interrupted = self._interrupted or exc
                    self.cancel("interrupted")
                    continue
                for future in done:
                    sid = running.pop(future)
                    step_record = future.result()
                    with state.lock:
                        state.records[sid] = step_record
                        if step_record.status == "success" or step_record.continued:
                            state.outputs[sid] = step_record.outputs
                        state.settle(sid, step_record.status)
                        if step_record.status == "failure" and not step_record.continued \
                                and state.failed is None:
                            state.failed = sid
                            for other, cancel in state.cancels.items():
                                if other != sid:
                                    cancel.set("another step failed")
        stopped = state.failed or state.cancelled
        for sid, status in state.status.items():
            if status == "pending":
                state.status[sid] = "cancelled" if stopped else "skipped"
                state.records[sid] = StepRecord(sid, steps[sid].target, steps[sid].kind,
                                                state.status[sid])
        outputs, output_error = self._group_outputs(group, values, context, state)
        error = None
        if state.failed:
            status = "failure"
            error = f"step '{state.failed}' failed: {state.records[state.failed].error}"
        elif state.cancelled:
            status = "cancelled"
            error = f"cancelled: {state.cancelled}"
        elif output_error:
            status = "failure"
            error = output_error
        else:
            status = "success"
        seconds = time.perf_counter() - started
        self._emit(Event(EventKind.RUN_FINISHED, run_id, group.id, prefix or None,
                         status=status, seconds=seconds, message=error))
        previous = state.previous
        return RunRecord(run_id, group.id, status, dict(values), dict(context), outputs,
                         tuple(state.records[s.id] for s in group.steps), started_at, seconds,
                         request, previous.id if previous else None, error,
                         str(state.run_dir) if state.run_dir is not None and not prefix
                         else None, sandboxed=_sandboxed(self.executor))

    def _scope(self, values: Mapping[str, Any], context: Mapping[str, Any],
               state: _RunState) -> dict[str, Any]:
        return {"inputs": dict(values), "context": dict(context),
                "steps": dict(state.scope_steps)}

    def _start_ready(self, group: Group, steps: Mapping[str, Step], state: _RunState,
                     values: Mapping[str, Any], context: Mapping[str, Any], run_id: str,
                     prefix: str, pool: ThreadPoolExecutor,
                     running: dict[Future[StepRecord], str]) -> bool:
        """Start, skip or reuse every step whose needs are settled; True if anything changed."""
        changed = False
        if state.failed or state.cancelled:
            return False
        while state.ready:
            _, sid = heapq.heappop(state.ready)
            step = steps[sid]
            if state.status[sid] != "pending":
                continue
            needs = {n: state.status[n] for n in step.needs}
            seen = {n: ("success" if state.records[n].continued else s)
                    for n, s in needs.items()}
            scope = self._scope(values, context, state)
            try:
                go = truthy(evaluate(condition_of(step), scope, StepStatuses(seen)))
            except ExpressionError as exc:
                state.records[step.id] = StepRecord(step.id, step.target, step.kind, "failure",
                                                    error=f"if: {exc}")
                state.settle(step.id, "failure")
                self._emit(Event(EventKind.STEP_FAILED, run_id, group.id, prefix + step.id,
                                 message=f"if: {exc}"))
                state.failed = state.failed or step.id
                return True
            changed = True
            if not go:
                reason = (f"if {step.if_} is false" if step.if_ else
                          "a step it needs did not succeed")
                state.records[step.id] = StepRecord(step.id, step.target, step.kind, "skipped",
                                                    error=None)
                state.settle(step.id, "skipped")
                self._emit(Event(EventKind.STEP_SKIPPED, run_id, group.id, prefix + step.id,
                                 message=reason))
                continue
            definition = step_definition(step, self.skills, self.groups)
            rerun: str | None = None
            note: str | None = None
            previous = state.previous
            earlier = previous.step(step.id) if previous is not None else None
            if previous is not None and earlier is not None and earlier.status != "success":
                note = f"not reused: it was {earlier.status} in run {previous.id}".replace(
                    "was failure", "failed")
            elif previous is not None and earlier is not None:
                rerun = note = self._changed(step, earlier, definition, scope, previous)
                if rerun is None:
                    reused = f"reused from run {previous.id}"
                    state.outputs[step.id] = dict(earlier.outputs)
                    state.records[step.id] = replace(earlier, note=reused)
                    state.settle(step.id, "success")
                    self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id,
                                     prefix + step.id, status="success", seconds=0.0,
                                     message=reused, data={"resumed": True}))
                    continue
            state.settle(step.id, "running")
            cancel = Cancel()
            with state.lock:
                state.cancels[step.id] = cancel
            future = pool.submit(self._run_recorded, group, step, scope, context, run_id,
                                 prefix, cancel, state.run_dir, definition, rerun, note)
            running[future] = step.id
        return changed

    def _changed(self, step: Step, earlier: StepRecord, definition: str,
                 scope: Mapping[str, Any], previous: RunRecord) -> str | None:
        """Why a step that succeeded in the resumed run must run again, or None to reuse it.
        (A record from before digests were kept has none: its inputs alone decide.)"""
        since = f"since run {previous.id}"
        if earlier.definition is not None and earlier.definition != definition:
            return f"re-run: its definition changed {since}"
        try:
            inputs = self._step_inputs(step, scope)
        except ExpressionError:
            return f"re-run: its inputs cannot be resolved as they were {since}"
        if _same(inputs, earlier.inputs):
            return None
        names = sorted(k for k in {*inputs, *earlier.inputs}
                       if not _same(inputs.get(k), earlier.inputs.get(k)))
        return f"re-run: its inputs changed {since} ({', '.join(names)})"

    def _step_inputs(self, step: Step, scope: Mapping[str, Any]) -> dict[str, Any]:
        """The step's ``with`` rendered, with a skill's path inputs made absolute."""
        inputs = render_value(dict(step.with_), scope)
        skill = self.skills.get(step.skill) if step.skill else None
        if skill is not None and skill.is_executable:
            inputs = absolute_paths(skill, inputs, self.options.workdir or Path.cwd())
        return dict(inputs)

    def _run_recorded(self, group: Group, step: Step, scope: Mapping[str, Any],
                      context: Mapping[str, Any], run_id: str, prefix: str, cancel: Cancel,
                      run_dir: Path | None, definition: str, changed: str | None,
                      note: str | None) -> StepRecord:
        """The step's record with its digest and what the resume did with it (``changed``:
        why a step that could have been reused runs again, which its start event says too)."""
        record = self._run_step(group, step, scope, context, run_id, prefix, cancel, run_dir,
                                changed)
        return replace(record, definition=definition, note=note)

    def _run_step(self, group: Group, step: Step, scope: Mapping[str, Any],
                  context: Mapping[str, Any], run_id: str, prefix: str,
                  cancel: Cancel, run_dir: Path | None, note: str | None) -> StepRecord:
        name = prefix + step.id
        started_at = time.time()
        started = time.perf_counter()
        rerun: dict[str, Any] = {"message": note, "data": {"rerun": True}} if note else {}
        try:
            inputs = self._step_inputs(step, scope)
        except ExpressionError as exc:
            return self._failed(group, step, name, run_id, {}, f"with: {exc}", 0, started_at,
                                started)
        step_dir = run_dir / name if run_dir is not None else None
        if step.group:
            sub = self._group(step.group)
            self._emit(Event(EventKind.STEP_STARTED, run_id, group.id, name, attempt=1,
                             **rerun))
            try:
                sub_values = resolve_inputs(sub, inputs)
            except RunError as exc:
                return self._failed(group, step, name, run_id, inputs, str(exc), 1, started_at,
                                    started)
            sub_state = _RunState(sub, None, run_dir, cancel)
            sub_record = self._run_group(sub, sub_values, context, run_id, name + "/",
                                         sub_state, None)
            _remove_if_empty(step_dir)
            if sub_record.status == "cancelled":
                return self._cancelled(group, step, name, run_id, inputs, 1, started_at,
                                       started, sub_state.cancelled or "cancelled")
            if sub_record.status != "success":
                return self._failed(group, step, name, run_id, inputs,
                                    sub_record.error or "sub-group failed", 1, started_at,
                                    started)
            seconds = time.perf_counter() - started
            self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id, name, status="success",
                             seconds=seconds))
            return StepRecord(step.id, step.target, "group", "success", inputs,
                              dict(sub_record.outputs), None, 1, started_at, seconds)
        skill = self.skills.get(step.skill or "")
        if skill is None:
            return self._failed(group, step, name, run_id, inputs,
                                f"unknown skill '{step.skill}'", 0, started_at, started)
        if not skill.is_executable:
            # Instruction-only: nothing to execute; its instructions go to the injected context.
            seconds = time.perf_counter() - started
            self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id, name, status="success",
                             seconds=seconds, message="instruction-only skill: nothing to run",
                             data={"instruction_only": True}))
            return StepRecord(step.id, step.target, "skill", "success", inputs, {}, None, 0,
                              started_at, seconds)
        workspace = None
        if run_dir is not None and step_dir is not None:
            step_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            workspace = Workspace(run_dir, step_dir)
        try:
            return self._attempts(group, step, skill, inputs, name, run_id, cancel, workspace,
                                  started_at, started, rerun)
        finally:
            _remove_if_empty(step_dir)

    def _attempts(self, group: Group, step: Step, skill: Skill, inputs: dict[str, Any],
                  name: str, run_id: str, cancel: Cancel, workspace: Workspace | None,
                  started_at: float, started: float,
                  rerun: Mapping[str, Any]) -> StepRecord:
        """Execute a skill step, retrying as its policy says."""
        policy = step.retry or RetryPolicy(max_attempts=1)
        timeout = step.timeout or (skill.entrypoint.timeout if skill.entrypoint else None) \
            or self.options.default_timeout
        attempt = 0
        result: ExecResult | None = None
        while True:
            attempt += 1
            first = rerun if attempt == 1 else {}
            self._emit(Event(EventKind.STEP_STARTED, run_id, group.id, name, attempt=attempt,
                             **first))
            try:
                result = self.executor.execute(skill, inputs, timeout=timeout, cancel=cancel,
                                               workspace=workspace)
            except Exception as exc:  # an executor that breaks fails this step, not the run
                result = ExecResult(Outcome.ERROR,
                                    error=f"the executor failed: {type(exc).__name__}: {exc}")
            if result.ok:
                seconds = time.perf_counter() - started
                self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id, name,
                                 attempt=attempt, status="success", seconds=seconds))
                return StepRecord(step.id, step.target, "skill", "success", inputs,
                                  dict(result.outputs), None, attempt, started_at, seconds)
            if result.outcome is Outcome.CANCELLED or cancel.is_set():
                return self._cancelled(group, step, name, run_id, inputs, attempt, started_at,
                                       started, cancel.reason or "cancelled")
            if attempt < policy.max_attempts and _retry_applies(policy, result):
                delay = self._delay(policy, attempt)
                self._emit(Event(EventKind.STEP_RETRYING, run_id, group.id, name,
                                 attempt=attempt, message=result.error,
                                 data={"delay": round(delay, 3), "outcome": result.outcome}))
                if self._wait(delay, cancel):
                    continue
                return self._cancelled(group, step, name, run_id, inputs, attempt, started_at,
                                       started, cancel.reason or "cancelled")
            return self._failed(group, step, name, run_id, inputs, result.error or "failed",
                                attempt, started_at, started)

    def _cancelled(self, group: Group, step: Step, name: str, run_id: str,
                   inputs: Mapping[str, Any], attempts: int, started_at: float, started: float,
                   reason: str) -> StepRecord:
        seconds = time.perf_counter() - started
        message = f"cancelled: {reason}"
        self._emit(Event(EventKind.STEP_FAILED, run_id, group.id, name, attempt=attempts,
                         status="cancelled", message=message, seconds=seconds))
        return StepRecord(step.id, step.target, step.kind, "cancelled", dict(inputs), {},
                          message, attempts, started_at, seconds)

    def _failed(self, group: Group, step: Step, name: str, run_id: str,
                inputs: Mapping[str, Any], error: str, attempts: int, started_at: float,
                started: float) -> StepRecord:
        seconds = time.perf_counter() - started
        self._emit(Event(EventKind.STEP_FAILED, run_id, group.id, name, attempt=attempts or None,
                         status="failure", message=error, seconds=seconds,
                         data={"continue_on_error": step.continue_on_error}))
        return StepRecord(step.id, step.target, step.kind, "failure", dict(inputs), {}, error,
                          attempts, started_at, seconds, continued=step.continue_on_error)

    def _delay(self, policy: RetryPolicy, attempt: int) -> float:
        delay = policy.delay(attempt)
        if policy.jitter:
            delay *= 0.5 + self._rng()
        return float(min(delay, policy.max_interval))

    def _wait(self, seconds: float, cancel: Cancel) -> bool:
        """Sleep before a retry; False when the run was cancelled meanwhile."""
        if self._sleep is not None:
            self._sleep(seconds)
            return not cancel.is_set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if cancel.is_set():
                return False
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return not cancel.is_set()

    def _group_outputs(self, group: Group, values: Mapping[str, Any],
                       context: Mapping[str, Any], state: _RunState,
                       ) -> tuple[dict[str, Any], str | None]:
        scope = self._scope(values, context, state)
        try:
            return {k: render_value(v, scope) for k, v in group.outputs.items()}, None
        except ExpressionError as exc:
            return {}, f"outputs: {exc}"


def _sandboxed(executor: Executor) -> bool | None:
    """Whether the executor runs skill processes in the sandbox (None: it has no say)."""
    value = getattr(executor, "sandbox", None)
    return value if isinstance(value, bool) else None


def _remove_if_empty(folder: Path | None) -> None:
    """A step that wrote nothing leaves no folder behind."""
    if folder is not None:
        with contextlib.suppress(OSError):
            folder.rmdir()


def absolute_paths(skill: Skill, inputs: Mapping[str, Any], workdir: Path) -> dict[str, Any]:
    """Inputs declared ``format: path`` (a string, or a list of strings) made absolute."""
    out = dict(inputs)
    for name, schema in skill.input_properties().items():
        if name not in out or not isinstance(schema, Mapping):
            continue
        items = schema.get("items")
        is_path = schema.get("format") == "path" or (
            isinstance(items, Mapping) and items.get("format") == "path")
        if not is_path:
            continue
        value = out[name]
        if isinstance(value, str):
            out[name] = _absolute(value, workdir)
        elif isinstance(value, list):
            out[name] = [_absolute(v, workdir) if isinstance(v, str) else v for v in value]
    return out


def _absolute(value: str, workdir: Path) -> str:
    if not value or "://" in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (workdir / path).resolve())


def _retry_applies(policy: RetryPolicy, result: ExecResult) -> bool:
    if "error" in policy.retry_on:
        return True
    if result.outcome is Outcome.TIMEOUT:
        return "timeout" in policy.retry_on
    return result.retryable and "retryable" in policy.retry_on


def _preview(value: Any, scope: Mapping[str, Any]) -> Any:
    """Render what can be rendered before the run; leave step references as written."""
    if isinstance(value, str) and has_expression(value):
        if "steps." in value:
            return value
        try:
            return render_value(value, scope)
        except ExpressionError:
            return value
    if isinstance(value, dict):
        return {k: _preview(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [_preview(v, scope) for v in value]
    return value


@dataclass
class EventRecorder:
    """An event sink that keeps the events (tests, servers buffering for late listeners)."""

    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self, step: str | None = None) -> list[str]:
        return [e.kind.value for e in self.events if step is None or e.step == step]
