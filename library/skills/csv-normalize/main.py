"""A cleaned copy of a messy CSV: headers, whitespace, emails, phones, dates, numbers, case."""

from __future__ import annotations

import csv
import os
import re
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

MISSING = {"n/a", "na", "-", "--", "null", "none", "nil", "?"}
DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%d %b %Y", "%d %B %Y", "%b %d %Y", "%B %d %Y",
                "%b %d, %Y", "%B %d, %Y", "%d.%m.%Y", "%Y%m%d")


def run(path: str, day_first: bool = False, output_dir: str = "") -> dict[str, Any]:
    source = Path(path).expanduser()
    if not source.is_file():
        raise ValueError(f"path: no such file: {source}")
    with source.open(encoding="utf-8-sig", newline="") as handle:
        table = [row for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    if not table:
        raise ValueError(f"path: {source.name} is empty")
    old_header, rows = table[0], table[1:]
    header = _unique([snake_case(h) or f"column_{i + 1}" for i, h in enumerate(old_header)])
    width = len(header)
    rows = [(row + [""] * width)[:width] for row in rows]
    changes: dict[str, int] = {}
    unparsed = 0
    cleaned_columns = []
    for index, name in enumerate(header):
        column = [_tidy(row[index]) for row in rows]
        role = _role(name, column)
        if role == "date":
            converted = [to_iso_date(v, day_first) if v else "" for v in column]
            unparsed += sum(1 for v, c in zip(column, converted, strict=True) if v and c is None)
            column = [c if c is not None else v for v, c in zip(column, converted, strict=True)]
        elif role == "email":
            column = [v.lower().replace(" ", "") for v in column]
        elif role == "phone":
            column = [("+" if v.startswith(("+", "00")) else "") + re.sub(r"\D", "", v).removeprefix(
                "00" if v.startswith("00") else "") if v else "" for v in column]
        elif role == "number":
            column = _numbers(column)
        elif role == "proper":
            column = [_proper(v) for v in column]
        changed = sum(1 for row, new in zip(rows, column, strict=True) if row[index] != new)
        if changed:
            changes[name] = changed
        cleaned_columns.append(column)
    cleaned = [list(cells) for cells in zip(*cleaned_columns, strict=True)] if rows else []
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-csv-")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{source.stem}.normalized.csv"
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(cleaned)
    return {
        "path": str(target), "rows": len(cleaned), "columns": header,
        "header_changes": {o: n for o, n in zip(old_header, header, strict=True) if o != n},
        "changed_cells": sum(changes.values()), "changes_by_column": changes,
        "unparsed_dates": unparsed,
    }


def snake_case(text: str) -> str:
    text = re.sub(r"(?<=[a-z])-(?=[a-z])", "", text.strip().lower())  # e-mail -> email
    return re.sub(r"[^0-9a-z]+", "_", text).strip("_")


def to_iso_date(text: str, day_first: bool) -> str | None:
    value = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text.strip())
    for pattern in DATE_FORMATS:
        try:
            return datetime.strptime(value, pattern).date().isoformat()
        except ValueError:
            continue
    match = re.fullmatch(r"(\d{1,2})[/-](\d{1,2})[/-](\d{4})", value)
    if match:
        first, second, year = (int(g) for g in match.groups())
        day, month = (first, second) if day_first or first > 12 else (second, first)
        try:
            return date(year, month, day).isoformat()
        except ValueError:
            return None
    return None


def _tidy(cell: str) -> str:
    value = " ".join(cell.split())
    return "" if value.lower() in MISSING else value


def _role(name: str, column: list[str]) -> str:
    if "mail" in name:
        return "email"
    if re.search(r"phone|mobile|(^|_)tel($|_)", name):
        return "phone"
    if re.search(r"date|(^|_)day($|_)|_at$|dob|birth", name):
        return "date"
    present = [v for v in column if v]
    if present and sum(1 for v in present if _as_number(v) is not None) / len(present) >= 0.8:
        return "number"
    if re.search(r"name|country|city", name):
        return "proper"
    return "text"


def _as_number(text: str) -> float | None:
    cleaned = re.sub(r"[\s$€£¥,]", "", text)
    if not re.fullmatch(r"[+-]?\d+(\.\d+)?", cleaned):
        return None
    return float(cleaned)


def _numbers(column: list[str]) -> list[str]:
    decimals = max((len(v.split(".")[1]) for v in (re.sub(r"[^\d.]", "", c) for c in column)
                    if "." in v), default=0)
    out = []
    for value in column:
        number = _as_number(value) if value else None
        out.append(f"{number:.{min(decimals, 4)}f}" if number is not None else value)
    return out


def _proper(value: str) -> str:
    if not value or not (value.isupper() or value.islower()):
        return value
    if len(value) <= 3 and value.isalpha():
        return value.upper()
    return " ".join(w.capitalize() for w in value.split(" "))


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
