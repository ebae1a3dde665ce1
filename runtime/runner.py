"""The DAG runner: validate, plan (topological levels), run.

Independent steps run in parallel under a concurrency cap. A step's ``with`` is resolved just
before it starts. A step runs when its ``if`` holds; without ``if`` it runs when every step it
needs succeeded (``success()``), and an ``if`` without a status function means
``success() && (if)``, as in GitHub Actions — so dependents of a skipped or failed step are
skipped unless they say ``always()`` or ``failure()``. A failed step with ``continue_on_error``
counts as done for its dependents. Any other failure stops the run (fail-fast): running steps
are cancelled (their process trees killed) and nothing new starts.

>>> runner = Runner(library.groups, library.skills, SubprocessExecutor())
>>> record = runner.run("report-analysis", {"pdf_path": "q3.pdf"}, {"team_email": "t@x.io"})
>>> record.status, record.outputs["summary"][:30]
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrove.graph.runlog import RunLog, RunRecord, StepRecord
from skillgrove.groups.expressions import (
    STATUS_FUNCTIONS,
    Binary,
    Call,
    Node,
    StepStatuses,
    calls,
    evaluate,
    has_expression,
    parse_expression,
    parse_template,
    render_value,
    truthy,
)
from skillgrove.groups.loader import matches_type
from skillgrove.groups.model import Group, RetryPolicy, Step
from skillgrove.runtime.errors import EngineError
from skillgrove.runtime.events import Event, EventKind, EventSink, ignore
from skillgrove.runtime.executors import Cancel, ExecResult, Executor, Outcome
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


@dataclass(frozen=True)
class Plan:
    group: str
    inputs: Mapping[str, Any]
    levels: tuple[tuple[str, ...], ...]
    steps: tuple[PlannedStep, ...]


def topological_levels(group: Group) -> tuple[tuple[str, ...], ...]:
    """Steps grouped by depth: level 0 needs nothing, level n needs something at level n-1."""
    level: dict[str, int] = {}
    remaining = {s.id: set(s.needs) for s in group.steps}
    order = [s.id for s in group.steps]
    current = 0
    while remaining:
        ready = [sid for sid in order if sid in remaining and not remaining[sid]]
        if not ready:
            raise RunError(f"group '{group.id}' has a cycle among {sorted(remaining)}")
        for sid in ready:
            level[sid] = current
            del remaining[sid]
        for deps in remaining.values():
            deps.difference_update(ready)
        current += 1
    depth = max(level.values(), default=-1) + 1
    return tuple(tuple(sid for sid in order if level[sid] == d) for d in range(depth))


def resolve_inputs(group: Group, given: Mapping[str, Any]) -> dict[str, Any]:
    """The group's inputs: given values, then defaults; raises RunError for what is wrong."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    declared = {spec.name for spec in group.inputs}
    for name in given:
        if name not in declared:
            problems.append(f"unknown input '{name}' (inputs: {', '.join(sorted(declared))})")
    for spec in group.inputs:
        if spec.name in given and given[spec.name] is not None:
            value = _coerce(given[spec.name], spec.type)
            if not matches_type(value, spec.type):
                problems.append(f"input '{spec.name}' must be {spec.type}, got {value!r}")
            elif spec.enum is not None and value not in spec.enum:
                problems.append(f"input '{spec.name}' must be one of {list(spec.enum)}")
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
    """Command-line values arrive as strings; turn '3' into 3 where an integer is declared."""
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
            import json

            return json.loads(value)
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


class _RunState:
    def __init__(self, group: Group) -> None:
        self.status: dict[str, str] = {s.id: "pending" for s in group.steps}
        self.outputs: dict[str, Mapping[str, Any]] = {}
        self.records: dict[str, StepRecord] = {}
        self.failed: str | None = None
        self.cancels: dict[str, Cancel] = {}
        self.lock = threading.Lock()


class Runner:
    def __init__(self, groups: Mapping[str, Group], skills: Mapping[str, Skill],
                 executor: Executor, *, run_log: RunLog | None = None, events: EventSink = ignore,
                 options: RunOptions | None = None,
                 sleep: Callable[[float], None] | None = None,
                 rng: Callable[[], float] = random.random) -> None:
        self.groups = groups
        self.skills = skills
        self.executor = executor
        self.run_log = run_log
        self._sink = events
        self._sink_lock = threading.Lock()
        self.options = options or RunOptions()
        self._sleep = sleep
        self._rng = rng

    # -- planning -----------------------------------------------------------------------------

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id.removeprefix("group:"))
        if group is None:
            raise RunError(f"unknown group '{group_id}'; `skillgrove check` lists the valid ones")
        return group

    def plan(self, group_id: str, inputs: Mapping[str, Any] | None = None,
             context: Mapping[str, Any] | None = None) -> Plan:
        group = self._group(group_id)
        values = resolve_inputs(group, inputs or {})
        scope = {"inputs": values, "context": dict(context or {}), "steps": {}}
        levels = topological_levels(group)
        depth = {sid: i for i, ids in enumerate(levels) for sid in ids}
        skipped: dict[str, str] = {}
        planned = []
        for step in group.steps:
            reason = None
            if any(n in skipped for n in step.needs) and step.if_ is None:
                reason = "a step it needs is skipped"
            elif step.if_ is not None:
                try:
                    node = condition_of(step)
                    statuses = StepStatuses({n: "success" for n in step.needs})
                    if not truthy(evaluate(node, scope, statuses)):
                        reason = f"if {step.if_} is false"
                except ExpressionError:
                    reason = None  # depends on step outputs: decided at run time
            if reason:
                skipped[step.id] = reason
            planned.append(PlannedStep(step.id, step.target, step.kind, depth[step.id],
                                       step.needs, _preview(step.with_, scope), reason))
        return Plan(group.id, values, levels, tuple(planned))

    # -- running ------------------------------------------------------------------------------

    def run(self, group_id: str, inputs: Mapping[str, Any] | None = None,
            context: Mapping[str, Any] | None = None, *, resume: RunRecord | None = None,
            request: str | None = None) -> RunRecord:
        group = self._group(group_id)
        if resume is not None:
            inputs = dict(resume.inputs) if inputs is None else inputs
            context = dict(resume.context) if context is None else context
        values = resolve_inputs(group, inputs or {})
        run_id = uuid.uuid4().hex[:12]
        record = self._run_group(group, values, dict(context or {}), run_id, "", resume, request)
        if self.run_log is not None:
            self.run_log.record(record)
        return record

    def _emit(self, event: Event) -> None:
        with self._sink_lock:
            self._sink(event)

    def _run_group(self, group: Group, values: Mapping[str, Any], context: Mapping[str, Any],
                   run_id: str, prefix: str, resume: RunRecord | None,
                   request: str | None) -> RunRecord:
        started_at = time.time()
        started = time.perf_counter()
        state = _RunState(group)
        self._emit(Event(EventKind.RUN_STARTED, run_id, group.id, prefix or None,
                         data={"inputs": dict(values)}))
        if resume is not None:
            for old in resume.steps:
                if old.status == "success" and old.id in state.status:
                    state.status[old.id] = "success"
                    state.outputs[old.id] = dict(old.outputs)
                    state.records[old.id] = old
                    self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id,
                                     prefix + old.id, status="success", seconds=0.0,
                                     message="reused from run " + resume.id,
                                     data={"resumed": True}))
        steps = {s.id: s for s in group.steps}
        with ThreadPoolExecutor(max_workers=max(1, self.options.max_concurrency)) as pool:
            running: dict[Future[StepRecord], str] = {}
            while True:
                progressed = self._start_ready(group, steps, state, values, context, run_id,
                                               prefix, pool, running)
                if not running:
                    if progressed:
                        continue
                    break
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    sid = running.pop(future)
                    step_record = future.result()
                    with state.lock:
                        state.records[sid] = step_record
                        state.status[sid] = step_record.status
                        if step_record.status == "success" or step_record.continued:
                            state.outputs[sid] = step_record.outputs
                        if step_record.status == "failure" and not step_record.continued \
                                and state.failed is None:
                            state.failed = sid
                            for other, cancel in state.cancels.items():
                                if other != sid:
                                    cancel.set()
        for sid, status in state.status.items():
            if status == "pending":
                state.status[sid] = "cancelled" if state.failed else "skipped"
                state.records[sid] = StepRecord(sid, steps[sid].target, steps[sid].kind,
                                                state.status[sid])
        outputs, output_error = self._group_outputs(group, values, context, state)
        status = "failure" if state.failed or output_error else "success"
        error = None
        if state.failed:
            error = f"step '{state.failed}' failed: {state.records[state.failed].error}"
        elif output_error:
            error = output_error
        seconds = time.perf_counter() - started
        self._emit(Event(EventKind.RUN_FINISHED, run_id, group.id, prefix or None,
                         status=status, seconds=seconds, message=error))
        return RunRecord(run_id, group.id, status, dict(values), dict(context), outputs,
                         tuple(state.records[s.id] for s in group.steps), started_at, seconds,
                         request, resume.id if resume else None, error)

    def _scope(self, values: Mapping[str, Any], context: Mapping[str, Any],
               state: _RunState) -> dict[str, Any]:
        steps = {sid: {"outputs": dict(state.outputs.get(sid, {})), "status": status}
                 for sid, status in state.status.items()}
        return {"inputs": dict(values), "context": dict(context), "steps": steps}

    def _start_ready(self, group: Group, steps: Mapping[str, Step], state: _RunState,
                     values: Mapping[str, Any], context: Mapping[str, Any], run_id: str,
                     prefix: str, pool: ThreadPoolExecutor,
                     running: dict[Future[StepRecord], str]) -> bool:
        """Start (or skip) every step whose needs are settled; True if anything changed."""
        changed = False
        if state.failed:
            return False
        for step in group.steps:
            if state.status[step.id] != "pending":
                continue
            needs = {n: state.status[n] for n in step.needs}
            if any(s in ("pending", "running") for s in needs.values()):
                continue
            seen = {n: ("success" if state.records[n].continued else s)
                    for n, s in needs.items()}
            scope = self._scope(values, context, state)
            try:
                go = truthy(evaluate(condition_of(step), scope, StepStatuses(seen)))
            except ExpressionError as exc:
                state.status[step.id] = "failure"
                state.records[step.id] = StepRecord(step.id, step.target, step.kind, "failure",
                                                    error=f"if: {exc}")
                self._emit(Event(EventKind.STEP_FAILED, run_id, group.id, prefix + step.id,
                                 message=f"if: {exc}"))
                state.failed = state.failed or step.id
                return True
            changed = True
            if not go:
                reason = (f"if {step.if_} is false" if step.if_ else
                          "a step it needs did not succeed")
                state.status[step.id] = "skipped"
                state.records[step.id] = StepRecord(step.id, step.target, step.kind, "skipped",
                                                    error=None)
                self._emit(Event(EventKind.STEP_SKIPPED, run_id, group.id, prefix + step.id,
                                 message=reason))
                continue
            state.status[step.id] = "running"
            cancel = Cancel()
            state.cancels[step.id] = cancel
            future = pool.submit(self._run_step, group, step, scope, context, run_id, prefix,
                                 cancel)
            running[future] = step.id
        return changed

    def _run_step(self, group: Group, step: Step, scope: Mapping[str, Any],
                  context: Mapping[str, Any], run_id: str, prefix: str,
                  cancel: Cancel) -> StepRecord:
        name = prefix + step.id
        started_at = time.time()
        started = time.perf_counter()
        try:
            inputs = render_value(dict(step.with_), scope)
        except ExpressionError as exc:
            return self._failed(group, step, name, run_id, {}, f"with: {exc}", 0, started_at,
                                started)
        if step.group:
            sub = self._group(step.group)
            self._emit(Event(EventKind.STEP_STARTED, run_id, group.id, name, attempt=1))
            try:
                sub_values = resolve_inputs(sub, inputs)
            except RunError as exc:
                return self._failed(group, step, name, run_id, inputs, str(exc), 1, started_at,
                                    started)
            sub_record = self._run_group(sub, sub_values, context, run_id, name + "/", None, None)
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
        inputs = absolute_paths(skill, inputs, self.options.workdir or Path.cwd())
        policy = step.retry or RetryPolicy(max_attempts=1)
        timeout = step.timeout or (skill.entrypoint.timeout if skill.entrypoint else None) \
            or self.options.default_timeout
        attempt = 0
        result: ExecResult | None = None
        while True:
            attempt += 1
            self._emit(Event(EventKind.STEP_STARTED, run_id, group.id, name, attempt=attempt))
            result = self.executor.execute(skill, inputs, timeout=timeout, cancel=cancel)
            if result.ok:
                seconds = time.perf_counter() - started
                self._emit(Event(EventKind.STEP_FINISHED, run_id, group.id, name,
                                 attempt=attempt, status="success", seconds=seconds))
                return StepRecord(step.id, step.target, "skill", "success", inputs,
                                  dict(result.outputs), None, attempt, started_at, seconds)
            if result.outcome is Outcome.CANCELLED or cancel.is_set():
                seconds = time.perf_counter() - started
                self._emit(Event(EventKind.STEP_FAILED, run_id, group.id, name, attempt=attempt,
                                 status="cancelled", message="cancelled: another step failed"))
                return StepRecord(step.id, step.target, "skill", "cancelled", inputs, {},
                                  "cancelled: another step failed", attempt, started_at, seconds)
            if attempt < policy.max_attempts and _retry_applies(policy, result):
                delay = self._delay(policy, attempt)
                self._emit(Event(EventKind.STEP_RETRYING, run_id, group.id, name,
                                 attempt=attempt, message=result.error,
                                 data={"delay": round(delay, 3), "outcome": result.outcome}))
                if self._wait(delay, cancel):
                    continue
            return self._failed(group, step, name, run_id, inputs, result.error or "failed",
                                attempt, started_at, started)

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
