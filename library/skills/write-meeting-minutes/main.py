"""Meeting minutes as a Markdown file."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any


def run(title: str, date: str = "", attendees: list[dict[str, Any]] | None = None,
        action_items: list[dict[str, Any]] | None = None, decisions: list[str] | None = None,
        summary: str = "", next_meeting: str = "", output_dir: str = "") -> dict[str, Any]:
    if not str(title or "").strip():
        raise ValueError("title: the minutes need a meeting title")
    items = sorted(action_items or [], key=lambda i: (not i.get("due"), str(i.get("due", ""))))
    names = [str(a.get("name") or a.get("email") or "") for a in attendees or []
             if isinstance(a, dict)]
    lines = [f"# Minutes: {title}", ""]
    if date:
        lines.append(f"**Date:** {date}  ")
    if names:
        lines.append(f"**Attendees:** {', '.join(n for n in names if n)}")
    lines.append("")
    if summary:
        lines += ["## Summary", "", summary.strip(), ""]
    lines += ["## Decisions", ""]
    lines += [f"- {d}" for d in decisions or []] or ["- No decisions were recorded."]
    lines += ["", "## Action items", ""]
    if items:
        lines += ["| Owner | Task | Due |", "| --- | --- | --- |"]
        for item in items:
            cells = [item.get("owner") or "unassigned", item.get("task", ""),
                     item.get("due") or item.get("due_text") or "—"]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    else:
        lines.append("No action items were recorded.")
    if next_meeting:
        lines += ["", "## Next meeting", "", next_meeting.replace("T", " at ")]
    markdown = "\n".join(lines).rstrip() + "\n"
    folder = (Path(output_dir).expanduser() if output_dir
              else _default_folder("skillgrove-minutes-"))
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:50] or "meeting"
    path = folder / (f"{date}-{slug}.md" if date else f"{slug}.md")
    path.write_text(markdown, encoding="utf-8")
    return {"markdown": markdown, "path": str(path), "open_items": len(items)}


def _default_folder(prefix: str) -> Path:
    """This step's folder when the skillgrove runner runs the skill, else a new temporary one."""
    step_dir = os.environ.get("SKILLGROVE_STEP_DIR")
    return Path(step_dir) if step_dir else Path(tempfile.mkdtemp(prefix=prefix))
