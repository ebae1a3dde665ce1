"""What a skill is, once loaded: frozen values, with the body read only when asked for."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

SKILL_FILE = "SKILL.md"
ID_SIDECAR = ".skill_id"

EntrypointKind = Literal["python", "command", "http"]
IdSource = Literal["path", "sidecar"]


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
    id_source: IdSource = "path"
    """Where ``id`` came from: the folder's path below its root (:func:`path_id`), or a
    ``.skill_id`` sidecar the library holds."""

    @property
    def skill_file(self) -> Path:
        return self.folder / SKILL_FILE

    @property
    def relative_path(self) -> str:
        """The folder below its root, ``/``-separated (``"."`` for a skill at the root itself):
        what tells two same-named skills apart in a listing.

        >>> skill.relative_path
        'anthropics__skills/skills/mcp-builder'
        """
        return relative_folder(self.folder, self.root)

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


def relative_folder(folder: Path, root: Path) -> str:
    """``folder`` below ``root``, ``/``-separated and NFC-normalised (so a checkout on macOS
    names it as one on Linux); the absolute folder when it is not below ``root``."""
    try:
        relative = folder.resolve().relative_to(root.resolve()).as_posix()
    except (OSError, ValueError):
        relative = folder.absolute().as_posix()
    return unicodedata.normalize("NFC", relative or ".")


def path_id(relative: str, root: Path | None = None) -> str:
    """The id of a skill without a ``.skill_id`` sidecar: a digest of its folder's path below its
    root, so every checkout of a library, wherever it lives, gives the same ids. Letter case
    counts (``PDF/`` and ``pdf/`` are two skills); renaming or moving the folder inside the root
    changes the id. With ``root`` the digest names the root's folder too: the id of a skill
    whose relative path an earlier root already holds.

    >>> path_id("anthropics__skills/skills/mcp-builder")
    'sk-...'
    """
    key = relative if root is None else f"{root.resolve().name}\0{relative}"
    return "sk-" + content_hash(key.encode())[:20]
