"""A Chinese work log: dated entries with project, task, hours and status, plus next week's plan."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

_DATE = re.compile(r"^\s*(?:(\d{4})-(\d{1,2})-(\d{1,2})|(\d{4})年(\d{1,2})月(\d{1,2})日)")
_ITEM = re.compile(r"^\s*[-*•]\s*(?P<body>.+)$")
_PROJECT = re.compile(r"^[\[【](?P<project>[^\]】]+)[\]】]\s*")
_HOURS = re.compile(r"[（(]?\s*(?P<amount>\d+(?:\.\d+)?)\s*(?P<unit>h|小时|hrs?|分钟|min)\s*[)）]?\s*$",
                    re.IGNORECASE)
_BLOCKED = ("阻塞", "卡住", "等待", "受阻")
_ONGOING = ("进行中", "继续", "跟进", "未完成")
_PLAN_HEADING = re.compile(r"^\s*#*\s*(下周计划|下周工作计划|下周安排)")


def run(path: str) -> dict[str, Any]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"path: no such file: {file}")
    author = ""
    current: date | None = None
    in_plans = False
    entries: list[dict[str, Any]] = []
    plans: list[str] = []
    for line in file.read_text(encoding="utf-8-sig").splitlines():
        if m := re.match(r"^\s*(?:作者|姓名|填写人)\s*[:：]\s*(.+)$", line):
            author = m.group(1).strip()
            continue
        if _PLAN_HEADING.match(line):
            in_plans = True
            continue
        if m := _DATE.match(line):
            parts = [int(g) for g in m.groups() if g]
            current, in_plans = date(*parts), False
            continue
        item = _ITEM.match(line)
        if not item:
            continue
        if in_plans:
            plans.append(item["body"].strip())
        elif current is not None:
            entries.append(_entry(item["body"], current))
    if not entries:
        raise ValueError(f"path: {file.name} has no dated work entries "
                         "(a YYYY-MM-DD line followed by '- ...' items)")
    totals: dict[str, dict[str, Any]] = {}
    for entry in entries:
        project = totals.setdefault(entry["project"], {"project": entry["project"], "hours": 0.0,
                                                       "tasks": 0})
        project["hours"] = round(project["hours"] + entry["hours"], 2)
        project["tasks"] += 1
    dates = sorted(e["date"] for e in entries)
    return {
        "author": author,
        "entries": entries,
        "total_hours": round(sum(e["hours"] for e in entries), 2),
        "by_project": sorted(totals.values(), key=lambda p: (-p["hours"], p["project"])),
        "blocked": [e["task"] for e in entries if e["status"] == "阻塞"],
        "plans": plans,
        "start_date": dates[0],
        "end_date": dates[-1],
    }


def _entry(body: str, day: date) -> dict[str, Any]:
    text = body.strip()
    project = "其他"
    if m := _PROJECT.match(text):
        project, text = m["project"].strip(), text[m.end():]
    hours = 0.0
    if m := _HOURS.search(text):
        amount = float(m["amount"])
        hours = amount / 60 if m["unit"].lower() in ("分钟", "min") else amount
        text = text[:m.start()]
    task = text.strip(" ，,;；")
    status = "阻塞" if any(w in task for w in _BLOCKED) else (
        "进行中" if any(w in task for w in _ONGOING) else "完成")
    task = re.sub(r"[，,]\s*(进行中|阻塞)$", "", task)
    return {"date": day.isoformat(), "project": project, "task": task, "hours": round(hours, 2),
            "status": status}
