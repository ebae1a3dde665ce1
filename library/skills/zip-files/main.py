"""Several files in one ZIP archive."""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any


def run(files: list[str], archive_name: str = "bundle.zip", output_dir: str = "") -> dict[str, Any]:
    if not isinstance(files, list):
        raise ValueError("files: must be a list of file paths")
    if not re.fullmatch(r"[\w.-]+\.zip", archive_name or ""):
        raise ValueError(f"archive_name: {archive_name!r} must be a plain file name ending in .zip")
    sources = []
    for index, item in enumerate(files):
        if not item:
            continue
        file = Path(str(item)).expanduser()
        if not file.is_file():
            raise ValueError(f"files[{index}]: no such file: {file}")
        sources.append(file)
    if not sources:
        raise ValueError("files: nothing to archive")
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-zip-")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / archive_name
    names: list[str] = []
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in sources:
            if file.resolve() == target.resolve():
                continue
            name, number = file.name, 2
            while name in names:
                name = f"{file.stem}-{number}{file.suffix}"
                number += 1
            archive.write(file, arcname=name)
            names.append(name)
    return {"path": str(target), "file_count": len(names), "names": names,
            "bytes": target.stat().st_size}


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
