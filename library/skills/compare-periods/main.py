"""Current period against the one before it, per numeric column of a dated CSV."""

from __future__ import annotations

import csv
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any


def run(path: str, date_column: str = "date", columns: list[str] | None = None,
        period_days: int = 7, end_date: str = "", aggregate: str = "sum") -> dict[str, Any]:
    if period_days is None or period_days < 1:
        raise ValueError(f"period_days: must be at least 1, not {period_days}")
    if aggregate not in ("sum", "mean"):
        raise ValueError(f"aggregate: expected 'sum' or 'mean', not {aggregate!r}")
    header, rows = _read(path)
    if date_column not in header:
        raise ValueError(f"date_column: {date_column!r} not in the file; columns are: "
                         f"{', '.join(header)}")
    metrics = list(columns or [c for c in header if c != date_column and _numeric(rows, c)])
    missing = [c for c in metrics if c not in header]
    if missing:
        raise ValueError(f"columns: {', '.join(map(repr, missing))} not in the file")
    dated = []
    for number, row in enumerate(rows, start=2):
        try:
            dated.append((date.fromisoformat(row[date_column][:10]), row))
        except ValueError as exc:
            raise ValueError(f"date_column: line {number} has {row[date_column]!r}, not an ISO "
                             "date (YYYY-MM-DD)") from exc
    if not dated:
        raise ValueError("path: the file has no data rows")
    try:
        end = date.fromisoformat(end_date) if end_date else max(d for d, _ in dated)
    except ValueError as exc:
        raise ValueError(f"end_date: {end_date!r} is not an ISO date") from exc
    span = timedelta(days=period_days)
    current = [r for d, r in dated if end - span < d <= end]
    previous = [r for d, r in dated if end - 2 * span < d <= end - span]
    if not current or not previous:
        raise ValueError(f"period_days: no rows in the {'current' if not current else 'previous'}"
                         f" {period_days}-day window ending {end if not current else end - span}")
    changes = []
    for metric in metrics:
        now, before = _combine(current, metric, aggregate), _combine(previous, metric, aggregate)
        delta = now - before
        pct = round(delta / before * 100, 1) if before else None
        flat = delta == 0 or (pct is not None and abs(pct) < 0.5)
        direction = "flat" if flat else "up" if delta > 0 else "down"
        changes.append({"metric": metric, "current": round(now, 2), "previous": round(before, 2),
                        "change": round(delta, 2), "change_pct": pct, "direction": direction})
    return {
        "current_start": (end - span + timedelta(days=1)).isoformat(),
        "current_end": end.isoformat(),
        "previous_start": (end - 2 * span + timedelta(days=1)).isoformat(),
        "previous_end": (end - span).isoformat(),
        "changes": changes,
        "headline": _headline(changes, period_days),
    }


def _headline(changes: list[dict[str, Any]], days: int) -> str:
    moving = sorted((c for c in changes if c["change_pct"] is not None and c["direction"] != "flat"),
                    key=lambda c: abs(c["change_pct"]), reverse=True)[:3]
    period = {7: "week over week", 30: "month over month", 1: "day over day"}.get(
        days, f"over the previous {days} days")
    if not moving:
        return f"All metrics were flat {period}."
    parts = [f"{c['metric']} {c['direction']} {abs(c['change_pct'])}%" for c in moving]
    return ", ".join(parts).capitalize() + f" {period}."


def _read(path: str) -> tuple[list[str], list[dict[str, str]]]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    with file.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in reader.fieldnames or []]
        reader.fieldnames = header
        rows = [{k: (v or "").strip() for k, v in row.items() if k} for row in reader]
    return header, rows


def _number(text: str) -> float | None:
    cleaned = re.sub(r"[\s$€£¥,%]", "", text)
    try:
        return float(cleaned) if cleaned else None
    except ValueError:
        return None


def _numeric(rows: list[dict[str, str]], column: str) -> bool:
    cells = [r.get(column, "") for r in rows if r.get(column, "")]
    return bool(cells) and all(_number(c) is not None for c in cells)


def _combine(rows: list[dict[str, str]], column: str, aggregate: str) -> float:
    values = [v for v in (_number(r.get(column, "")) for r in rows) if v is not None]
    if not values:
        return 0.0
    return sum(values) if aggregate == "sum" else sum(values) / len(values)
