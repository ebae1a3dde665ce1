"""Row-by-row validation of a CSV file into valid and rejected files."""

from __future__ import annotations

import csv
import os
import re
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

TYPES = ("string", "email", "number", "integer", "date", "phone")
RULE_KEYS = ("required", "type", "pattern", "allowed", "min", "max")
_EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")


def run(path: str, rules: dict[str, Any] | None = None, output_dir: str = "") -> dict[str, Any]:
    source = Path(path).expanduser()
    if not source.is_file():
        raise ValueError(f"path: no such file: {source}")
    with source.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = [(number, row) for number, row in enumerate(reader, start=2)
                if any((v or "").strip() for v in row.values())]
    if not header:
        raise ValueError(f"path: {source.name} is empty")
    rules = dict(rules or {}) or _infer(header, [r for _, r in rows])
    _check_rules(rules, header)
    valid, rejected, problems = [], [], []
    for number, row in rows:
        messages = []
        for column, rule in rules.items():
            value = (row.get(column) or "").strip()
            message = _check(value, rule)
            if message:
                messages.append(f"{column}: {message}")
                problems.append({"row": number, "column": column, "value": value,
                                 "message": message})
        if messages:
            rejected.append({**row, "errors": "; ".join(messages)})
        else:
            valid.append(row)
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-csv-")
    folder.mkdir(parents=True, exist_ok=True)
    valid_path, rejected_path = folder / "valid.csv", folder / "rejected.csv"
    _write(valid_path, header, valid)
    _write(rejected_path, [*header, "errors"], rejected)
    return {"ok": not rejected, "valid_path": str(valid_path), "rejected_path": str(rejected_path),
            "valid_rows": len(valid), "rejected_rows": len(rejected), "errors": problems[:100],
            "rules_used": rules}


def _check(value: str, rule: dict[str, Any]) -> str:
    if not value:
        return "is required" if rule.get("required") else ""
    kind = rule.get("type", "string")
    number = None
    if kind == "email" and not _EMAIL.match(value):
        return f"{value!r} is not a valid email address"
    if kind == "phone" and not re.fullmatch(r"\+?\d{7,15}", re.sub(r"[\s().-]", "", value)):
        return f"{value!r} is not a phone number"
    if kind == "date":
        try:
            date.fromisoformat(value)
        except ValueError:
            return f"{value!r} is not a YYYY-MM-DD date"
    if kind in ("number", "integer") or "min" in rule or "max" in rule:
        try:
            number = float(value)
        except ValueError:
            return f"{value!r} is not a number"
        if kind == "integer" and not number.is_integer():
            return f"{value!r} is not a whole number"
    if "pattern" in rule and not re.fullmatch(str(rule["pattern"]), value):
        return f"{value!r} does not match {rule['pattern']}"
    if "allowed" in rule and value not in [str(a) for a in rule["allowed"]]:
        return f"{value!r} is not one of {', '.join(map(str, rule['allowed']))}"
    if number is not None and "min" in rule and number < rule["min"]:
        return f"{value} is below the minimum {rule['min']}"
    if number is not None and "max" in rule and number > rule["max"]:
        return f"{value} is above the maximum {rule['max']}"
    return ""


def _check_rules(rules: dict[str, Any], header: list[str]) -> None:
    for column, rule in rules.items():
        if column not in header:
            raise ValueError(f"rules.{column}: the file has no such column; columns are: "
                             f"{', '.join(header)}")
        if not isinstance(rule, dict):
            raise ValueError(f"rules.{column}: must be an object such as {{\"type\": \"email\"}}")
        unknown = [k for k in rule if k not in RULE_KEYS]
        if unknown:
            raise ValueError(f"rules.{column}: unknown {', '.join(unknown)}; use "
                             f"{', '.join(RULE_KEYS)}")
        if rule.get("type", "string") not in TYPES:
            raise ValueError(f"rules.{column}.type: {rule['type']!r} is not one of "
                             f"{', '.join(TYPES)}")
        if "pattern" in rule:
            try:
                re.compile(str(rule["pattern"]))
            except re.error as exc:
                raise ValueError(f"rules.{column}.pattern: not a valid regular expression "
                                 f"({exc})") from exc


def _infer(header: list[str], rows: list[dict[str, str]]) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    for column in header:
        name = column.lower()
        values = [(r.get(column) or "").strip() for r in rows if (r.get(column) or "").strip()]
        if "mail" in name:
            rules[column] = {"type": "email", "required": True}
        elif "name" in name:
            rules[column] = {"type": "string", "required": True}
        elif "date" in name:
            rules[column] = {"type": "date"}
        elif "phone" in name or "mobile" in name:
            rules[column] = {"type": "phone"}
        elif values and sum(1 for v in values if re.fullmatch(r"-?\d+(\.\d+)?", v)) >= 0.8 * len(values):
            rules[column] = {"type": "number"}
    return rules


def _write(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
