"""Checksums and sizes of files, with identical files grouped."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

ALGORITHMS = ("sha256", "sha1", "md5", "blake2b")


def run(paths: str | list[str], algorithm: str = "sha256") -> dict[str, Any]:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: expected one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    items = [paths] if isinstance(paths, str) else list(paths or [])
    if not items:
        raise ValueError("paths: give at least one file")
    files = []
    for index, item in enumerate(items):
        file = Path(str(item)).expanduser()
        if not file.is_file():
            raise ValueError(f"paths[{index}]: no such file: {file}")
        digest = hashlib.new(algorithm)
        with file.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        files.append({"path": str(file), "digest": digest.hexdigest(),
                      "bytes": file.stat().st_size})
    groups: dict[str, list[str]] = {}
    for entry in files:
        groups.setdefault(entry["digest"], []).append(entry["path"])
    return {"files": files, "digest": files[0]["digest"],
            "duplicates": [g for g in groups.values() if len(g) > 1]}
