"""Where things are: the bundled library and the user's default library paths."""

from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def bundled_library() -> Path:
    """The example library shipped with skillgrove (inside the wheel, or the source checkout)."""
    packaged = _HERE / "_bundled_library"
    if packaged.is_dir():
        return packaged
    return _HERE.parent / "library"


def default_paths() -> list[Path]:
    """``$SKILLGROVE_PATH`` (os.pathsep-separated, earliest first), else the bundled library."""
    configured = os.environ.get("SKILLGROVE_PATH", "")
    paths = [Path(p).expanduser() for p in configured.split(os.pathsep) if p.strip()]
    return paths or [bundled_library()]
