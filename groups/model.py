"""What a group is: a validated DAG of skill (and sub-group) steps, as frozen values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrove.skills._yaml import SourceMap

INPUT_TYPES = ("string", "integer", "number", "boolean", "array", "object")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how a failed step is tried again.

    Defaults follow LangGraph's: ``RetryPolicy(max_attempts=3, initial_interval=0.5,
    backoff_factor=2.0, max_interval=128, jitter=True)``. ``retry_on`` names the failure kinds
    that are worth another attempt: ``retryable`` (the skill said so), ``timeout``, ``error`` (any).
    """

    max_attempts: int = 3
    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    jitter: bool = True
    retry_on: tuple[str, ...] = ("retryable", "timeout")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1), no jitter."""
        return float(min(self.max_interval,
                         self.initial_interval * self.backoff_factor ** (attempt - 1)))


RETRY_KINDS = ("retryable", "timeout", "error")


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    type: str = "string"
    required: bool = False
    default: Any = None
    has_default: bool = False
    description: str = ""
    enum: tuple[Any, ...] | None = None


@dataclass(frozen=True, slots=True)
class Step:
    id: str
    skill: str | None = None
    group: str | None = None
    with_: Mapping[str, Any] = field(default_factory=dict, hash=False)
    needs: tuple[str, ...] = ()
    if_: str | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    continue_on_error: bool = False
    index: int = 0
    """Position in the group file's ``steps`` list (for messages and stable ordering)."""

    @property
    def target(self) -> str:
        return self.skill or self.group or ""

    @property
    def kind(self) -> str:
        return "group" if self.group else "skill"


@dataclass(frozen=True)
class Group:
    """A loaded group.

    >>> group.id, [s.id for s in group.steps]
    ('report-analysis', ['extract_text', 'metrics', 'summarize', 'notify'])
    """

    id: str
    name: str
    description: str
    path: Path
    content_hash: str
    examples: tuple[str, ...] = ()
    inputs: tuple[InputSpec, ...] = ()
    steps: tuple[Step, ...] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    tags: tuple[str, ...] = ()
    version: str | None = None
    expose: tuple[str, ...] = ()
    """Where the group is offered as an entry point of its own: ``tool`` makes it an MCP tool
    whose input schema is the group's inputs."""
    source: SourceMap = field(default_factory=SourceMap, hash=False, compare=False, repr=False)

    def step(self, step_id: str) -> Step:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def input(self, name: str) -> InputSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)

    @property
    def skills(self) -> tuple[str, ...]:
        """Names of the skills its steps call, in step order (sub-groups not expanded)."""
        return tuple(s.skill for s in self.steps if s.skill)

    def edges(self) -> tuple[tuple[str, str], ...]:
        """Step dependencies as ``(upstream step id, downstream step id)``."""
        return tuple((need, step.id) for step in self.steps for need in step.needs)


GROUP_TOOL_PREFIX = "group_"


def group_tool_name(group_id: str) -> str:
    """The MCP tool of a group that says ``expose: tool``: ``report-analysis`` ->
    ``group_report_analysis`` (names hosts accept everywhere). Two ids can give one name
    (``daily-report``, ``daily_report``): the library reports that as an error.

    >>> group_tool_name("report-analysis")
    'group_report_analysis'
    """
    return GROUP_TOOL_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", group_id)
