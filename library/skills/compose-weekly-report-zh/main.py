"""A Chinese weekly report in Markdown from parsed work-log entries."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any


def run(entries: list[dict[str, Any]], by_project: list[dict[str, Any]] | None = None,
        plans: list[str] | None = None, author: str = "", start_date: str = "",
        end_date: str = "", output_dir: str = "") -> dict[str, Any]:
    if not isinstance(entries, list) or not entries:
        raise ValueError("entries: 没有工作条目，无法生成周报（请先运行 parse-work-log）")
    if not all(isinstance(e, dict) and "task" in e for e in entries):
        raise ValueError("entries: 每个条目都必须是包含 task 的对象")
    total = round(sum(float(e.get("hours") or 0) for e in entries), 2)
    projects = by_project or _totals(entries)
    period = f"{start_date} 至 {end_date}" if start_date and end_date else ""
    title = f"{author + ' ' if author else ''}工作周报" + (f"（{period}）" if period else "")
    done = [e for e in entries if e.get("status", "完成") == "完成"]
    ongoing = [e for e in entries if e.get("status") == "进行中"]
    blocked = [e for e in entries if e.get("status") == "阻塞"]
    top = projects[0]["project"] if projects else ""
    lines = [f"# {title}", "", "## 本周概况", "",
             f"本周共投入 **{_hours(total)} 小时**，涉及 {len(projects)} 个项目，完成 {len(done)} 项工作，"
             f"{len(ongoing)} 项进行中，{len(blocked)} 项受阻。"
             + (f"投入最多的是「{top}」（{_hours(projects[0]['hours'])} 小时）。" if top else ""),
             "", "## 项目工时", "", "| 项目 | 工时（小时） | 条目数 | 占比 |", "| --- | ---: | ---: | ---: |"]
    for project in projects:
        share = f"{project['hours'] / total * 100:.0f}%" if total else "–"
        lines.append(f"| {project['project']} | {_hours(project['hours'])} | {project['tasks']} | "
                     f"{share} |")
    lines += ["", "## 本周完成", ""]
    for name in dict.fromkeys(e.get("project", "其他") for e in done):
        lines.append(f"- **{name}**")
        lines += [f"  - {e['task']}（{e.get('date', '')}）" for e in done
                  if e.get("project", "其他") == name]
    if not done:
        lines.append("- 无")
    lines += ["", "## 进行中", ""]
    lines += [f"- 【{e.get('project', '其他')}】{e['task']}" for e in ongoing] or ["- 无"]
    lines += ["", "## 风险与阻塞", ""]
    lines += [f"- ⚠️ 【{e.get('project', '其他')}】{e['task']}" for e in blocked] or ["- 无"]
    lines += ["", "## 下周计划", ""]
    lines += [f"- {p}" for p in plans or []] or ["- 待定"]
    markdown = "\n".join(lines) + "\n"
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-weekly-")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9-]", "", end_date or start_date) or "weekly"
    path = folder / f"weekly-report-{stamp}.md"
    path.write_text(markdown, encoding="utf-8")
    return {"title": title, "markdown": markdown, "path": str(path), "total_hours": total}


def _totals(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, Any]] = {}
    for entry in entries:
        name = entry.get("project", "其他")
        item = totals.setdefault(name, {"project": name, "hours": 0.0, "tasks": 0})
        item["hours"] += float(entry.get("hours") or 0)
        item["tasks"] += 1
    return sorted(totals.values(), key=lambda p: -p["hours"])


def _hours(value: float) -> str:
    return f"{value:g}"


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
