"""The one event stream of a run: the CLI's progress display, MCP progress notifications and
HTTP server-sent events all read these values.

What ``data`` carries: ``run_started`` the inputs and the run folder (``run_dir``); a
``step_finished`` of a step reused by a resumed run ``resumed: true``; the first
``step_started`` of a step a resumed run could have reused but runs again ``rerun: true``, with
the reason in ``message``. A cancelled step ends with ``step_failed`` and status ``cancelled``;
a cancelled run with ``run_finished`` and status ``cancelled``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    RUN_STARTED = "run_started"
    STEP_STARTED = "step_started"
    STEP_RETRYING = "step_retrying"
    STEP_SKIPPED = "step_skipped"
    STEP_FINISHED = "step_finished"
    STEP_FAILED = "step_failed"
    RUN_FINISHED = "run_finished"


@dataclass(frozen=True)
class Event:
    kind: EventKind
    run_id: str
    group: str
    step: str | None = None
    """Step id; inside a sub-group call it is ``parent_step/child_step``."""
    attempt: int | None = None
    status: str | None = None
    message: str | None = None
    seconds: float | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {}, "")}


EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    """The sink for callers that do not listen."""
