"""Records to a GitHub-flavoured Markdown table."""

from __future__ import annotations

import json
from typing import Any


def run(rows: list[dict[str, Any]], columns: list[str] | None = None,
        headers: dict[str, str] | None = None, decimals: int = 2) -> dict[str, Any]:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("rows: must be a list of objects (one per table row)")
    keys = list(columns or [])
    if not keys:
        for row in rows:
            keys.extend(k for k in row if k not in keys)
    else:
        known = {k for row in rows for k in row}
        unknown = [k for k in keys if rows and k not in known]
        if unknown:
            raise ValueError(f"columns: no row has {', '.join(map(repr, unknown))}; "
                             f"keys present: {', '.join(sorted(known))}")
    if not rows:
        return {"markdown": "_No rows._", "row_count": 0, "columns": keys}
    labels = headers or {}
    numeric = {k: all(_is_number(r.get(k)) for r in rows if r.get(k) not in (None, ""))
               for k in keys}
    head = "| " + " | ".join(_escape(str(labels.get(k, k))) for k in keys) + " |"
    rule = "| " + " | ".join("---:" if numeric[k] else "---" for k in keys) + " |"
    body = ["| " + " | ".join(_cell(row.get(k), decimals) for k in keys) + " |" for row in rows]
    return {"markdown": "\n".join([head, rule, *body]), "row_count": len(rows), "columns": keys}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: Any, decimals: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.{decimals}f}"
    if isinstance(value, list):
        return _escape(", ".join(_cell(v, decimals) for v in value))
    if isinstance(value, dict):
        return _escape(json.dumps(value, ensure_ascii=False))
    return _escape(str(value))


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")
