"""A Markdown KPI report: headline, alerts, changes, chart and statistics."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

ARROWS = {"up": "▲", "down": "▼", "flat": "→"}


def run(title: str = "Weekly KPI report", headline: str = "", period: str = "",
        changes: list[dict[str, Any]] | None = None,
        stats_table: list[dict[str, Any]] | None = None,
        alerts: list[dict[str, Any]] | None = None, chart_path: str = "",
        output_dir: str = "") -> dict[str, Any]:
    folder = Path(output_dir).expanduser() if output_dir else _default_folder("skillgrove-kpi-")
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"# {title or 'KPI report'}", ""]
    if period:
        lines += [f"_Period: {period}_", ""]
    if headline:
        lines += [f"**{headline}**", ""]
    lines += ["## Alerts", ""]
    if alerts:
        lines += [f"- ⚠️ {a.get('message', a)}" for a in alerts] + [""]
    else:
        lines += ["No alerts: every KPI is within its limits.", ""]
    if changes:
        lines += ["## Change on the previous period", "",
                  "| Metric | Current | Previous | Change | Change % |", "| --- | ---: | ---: | ---: | ---: |"]
        for row in changes:
            pct = row.get("change_pct")
            arrow = ARROWS.get(str(row.get("direction")), "")
            lines.append(f"| {row.get('metric', '')} | {_num(row.get('current'))} | "
                         f"{_num(row.get('previous'))} | {_num(row.get('change'), sign=True)} | "
                         f"{arrow} {'n/a' if pct is None else _num(pct, sign=True) + '%'} |")
        lines.append("")
    chart_file = ""
    if chart_path:
        source = Path(chart_path).expanduser()
        if not source.is_file():
            raise ValueError(f"chart_path: no such file: {source}")
        target = folder / source.name
        if source.resolve() != target.resolve():
            shutil.copyfile(source, target)
        chart_file = str(target)
        lines += ["## Trend", "", f"![Chart]({target.name})", ""]
    if stats_table:
        lines += ["## Summary statistics", "", "| Column | Mean | Median | Min | Max | Total |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for row in stats_table:
            lines.append(f"| {row.get('column', '')} | {_num(row.get('mean'))} | "
                         f"{_num(row.get('median'))} | {_num(row.get('min'))} | "
                         f"{_num(row.get('max'))} | {_num(row.get('sum'))} |")
        lines.append("")
    markdown = "\n".join(lines).rstrip() + "\n"
    path = folder / "kpi-report.md"
    path.write_text(markdown, encoding="utf-8")
    return {"markdown": markdown, "path": str(path), "output_dir": str(folder),
            "chart_file": chart_file}


def _num(value: Any, sign: bool = False) -> str:
    if value is None or value == "":
        return "–"
    if not isinstance(value, int | float):
        return str(value)
    text = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}".rstrip("0")
    return ("+" + text if sign and value > 0 else text)


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
