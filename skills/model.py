"""What a skill is, once loaded: frozen values, with the body read only when asked for."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

SKILL_FILE = "SKILL.md"
ID_SIDECAR = ".skill_id"

EntrypointKind = Literal["python", "command", "http"]


@dataclass(frozen=True, slots=True)
class Entrypoint:
    """How an executable skill runs.

    - ``python``: ``target`` is ``"file.py:function"`` inside the skill folder; the function takes
      the inputs as keyword arguments and returns a JSON-able mapping.
    - ``command``: ``argv`` is run without a shell; JSON inputs on stdin, JSON outputs on stdout.
    - ``http``: ``target`` is a URL; JSON inputs are sent with ``method``, JSON outputs come back.
    """

    kind: EntrypointKind
    target: str = ""
    argv: tuple[str, ...] = ()
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    """Default timeout in seconds for one execution; a group step may override it."""
    env: tuple[str, ...] = ()
    """Environment variables passed through when set (besides ``requires.env``); no others are."""


@dataclass(frozen=True, slots=True)
class Requirements:
    """What must hold on this machine for the skill to be usable (OpenClaw-style gating)."""

    bins: tuple[str, ...] = ()
    any_bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    os: tuple[str, ...] = ()
    mcp: tuple[str, ...] = ()
    """MCP servers the skill talks to; informational, since they cannot be checked locally."""


@dataclass(frozen=True, slots=True)
class Availability:
    available: bool = True
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skill:
    """A loaded skill.

    >>> skill.name, skill.is_executable, skill.available
    ('extract-metrics', True, True)
    >>> skill.body()[:20]
    '# Extract metrics...'
    """

    id: str
    name: str
    description: str
    folder: Path
    root: Path
    content_hash: str
    """sha256 of the SKILL.md bytes: the skill's version as far as caches are concerned."""
    body_line: int
    """1-based line of SKILL.md where the Markdown body starts."""
    declared_version: str | None = None
    tags: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    """Names of skills whose results this one needs first (declared prerequisites)."""
    effects: tuple[str, ...] = ()
    """What running it changes outside its own run folder (``sends-email``, ``writes-files``,
    ...; see ``KNOWN_EFFECTS``). A group that holds it runs from ``ask`` only when confirmed."""
    inputs: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    outputs: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    entrypoint: Entrypoint | None = None
    requires: Requirements = Requirements()
    enabled: bool = True
    availability: Availability = Availability()
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    """Unknown frontmatter fields, kept as they were (and reported as warnings)."""

    @property
    def skill_file(self) -> Path:
        return self.folder / SKILL_FILE

    @property
    def is_executable(self) -> bool:
        return self.entrypoint is not None

    @property
    def available(self) -> bool:
        return self.availability.available

    @cached_property
    def _body(self) -> str:
        text = self.skill_file.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        return "".join(lines[self.body_line - 1 :]).strip("\n")

    def body(self) -> str:
        """The Markdown body, read from disk on first use."""
        return self._body

    def input_properties(self) -> Mapping[str, Any]:
        return _properties(self.inputs)

    def output_properties(self) -> Mapping[str, Any]:
        return _properties(self.outputs)

    def required_inputs(self) -> tuple[str, ...]:
        required = (self.inputs or {}).get("required", [])
        return tuple(r for r in required if isinstance(r, str))


def _properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not schema:
        return {}
    props = schema.get("properties")
    return props if isinstance(props, Mapping) else {}


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
