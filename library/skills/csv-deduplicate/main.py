"""Drop duplicate CSV rows by whole row or key columns."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path
from typing import Any


def run(path: str, key_columns: list[str] | None = None, keep: str = "first",
        ignore_case: bool = True, output_dir: str = "") -> dict[str, Any]:
    source = Path(path).expanduser()
    if not source.is_file():
        raise ValueError(f"path: no such file: {source}")
    if keep not in ("first", "last"):
        raise ValueError(f"keep: expected 'first' or 'last', not {keep!r}")
    with source.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"path: {source.name} is empty")
        rows = [row for row in reader if any(cell.strip() for cell in row)]
    keys = list(key_columns or [])
    unknown = [k for k in keys if k not in header]
    if unknown:
        raise ValueError(f"key_columns: {', '.join(map(repr, unknown))} not in the file; "
                         f"columns are: {', '.join(header)}")
    positions = [header.index(k) for k in keys] or list(range(len(header)))

    def key_of(row: list[str]) -> tuple[str, ...]:
        values = tuple(" ".join((row[i] if i < len(row) else "").split()) for i in positions)
        return tuple(v.lower() for v in values) if ignore_case else values

    ordered = rows if keep == "first" else list(reversed(rows))
    seen: dict[tuple[str, ...], int] = {}
    kept: list[list[str]] = []
    for row in ordered:
        key = key_of(row)
        if any(key) and key in seen:
            seen[key] += 1
            continue
        seen[key] = 1
        kept.append(row)
    if keep == "last":
        kept.reverse()
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-csv-")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{source.stem.removesuffix('.normalized')}.deduplicated.csv"
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(kept)
    repeated = [" | ".join(k) for k, n in seen.items() if n > 1][:50]
    return {"path": str(target), "rows_in": len(rows), "rows_out": len(kept),
            "duplicates_removed": len(rows) - len(kept), "duplicate_keys": repeated}


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
