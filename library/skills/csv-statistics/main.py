"""Descriptive statistics for the numeric columns of a CSV file."""

from __future__ import annotations

import csv
import re
import statistics
from datetime import date, datetime
from pathlib import Path
from typing import Any

_MISSING = {"", "n/a", "na", "-", "--", "null", "none", "nan"}


def run(path: str, columns: list[str] | None = None, date_column: str = "") -> dict[str, Any]:
    header, rows = read_csv(path)
    wanted = list(columns or [])
    unknown = [c for c in wanted + ([date_column] if date_column else []) if c not in header]
    if unknown:
        raise ValueError(f"columns: {', '.join(map(repr, unknown))} not in the file; "
                         f"columns are: {', '.join(header)}")
    if not wanted:
        wanted = [c for c in header if _mostly_numeric([r.get(c, "") for r in rows])]
    stats: dict[str, dict[str, Any]] = {}
    for column in wanted:
        values = [v for v in (to_number(r.get(column, "")) for r in rows) if v is not None]
        stats[column] = _describe(values, len(rows))
    date_column = date_column or next(
        (c for c in header if re.search(r"date|day|week|month", c, re.IGNORECASE)), "")
    dates = sorted(d for d in (to_date(r.get(date_column, "")) for r in rows) if d) \
        if date_column else []
    table = [{"column": c, **{k: _rounded(s[k]) for k in ("mean", "median", "min", "max", "sum")}}
             for c, s in stats.items()]
    return {
        "row_count": len(rows),
        "columns": header,
        "numeric_columns": wanted,
        "stats": stats,
        "table": table,
        "start_date": dates[0].isoformat() if dates else "",
        "end_date": dates[-1].isoformat() if dates else "",
    }


def read_csv(path: str) -> tuple[list[str], list[dict[str, str]]]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    text = file.read_text(encoding="utf-8-sig")
    if not text.strip():
        raise ValueError(f"path: {file.name} is empty")
    try:
        dialect: Any = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.DictReader(text.splitlines(), dialect=dialect)
    header = [h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    rows = [{k: (v or "").strip() for k, v in row.items() if k is not None} for row in reader]
    return header, rows


def to_number(text: str) -> float | None:
    cleaned = re.sub(r"[\s$€£¥,%]", "", text or "")
    if cleaned.lower() in _MISSING:
        return None
    if re.fullmatch(r"\(\d+(\.\d+)?\)", cleaned):  # accounting negative: (12.50)
        cleaned = "-" + cleaned[1:-1]
    try:
        return float(cleaned)
    except ValueError:
        return None


def to_date(text: str) -> date | None:
    text = (text or "").strip()
    for pattern in ("%Y-%m-%d", "%Y/%m/%d", "%d.%m.%Y", "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(text[:19], pattern).date()
        except ValueError:
            continue
    return None


def _rounded(value: float | None) -> float | None:
    return round(value, 2) if isinstance(value, float) else value


def _mostly_numeric(cells: list[str]) -> bool:
    present = [c for c in cells if c.strip().lower() not in _MISSING]
    if not present:
        return False
    numbers = sum(1 for c in present if to_number(c) is not None and not to_date(c))
    return numbers / len(present) >= 0.8


def _describe(values: list[float], total: int) -> dict[str, Any]:
    if not values:
        return {"count": 0, "missing": total, "sum": 0.0, "mean": None, "median": None,
                "min": None, "max": None, "stdev": None}
    return {
        "count": len(values),
        "missing": total - len(values),
        "sum": round(sum(values), 6),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
    }
