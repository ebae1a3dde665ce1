"""Keyword-rule triage of a support ticket: category and priority, with reasons."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

RULES = Path(__file__).resolve().parent / "rules.json"
PRIORITIES = ("urgent", "high", "normal", "low")


def run(text: str, rules_path: str = "") -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: the ticket text is empty")
    rules = _load_rules(Path(rules_path).expanduser() if rules_path else RULES)
    lowered = text.lower()
    reasons: list[str] = []

    scores: dict[str, int] = {}
    for category, words in rules["categories"].items():
        hits = _hits(lowered, words)
        scores[category] = len(hits)
        if hits:
            reasons.append(f"category {category}: {', '.join(hits)}")
    best = max(scores.items(), key=lambda item: item[1], default=("general", 0))
    category = best[0] if best[1] > 0 else "general"

    levels = rules["priority"]
    urgent = _hits(lowered, levels.get("urgent", []))
    first_line = text.strip().splitlines()[0]
    letters = [c for c in first_line if c.isalpha()]
    if letters and sum(c.isupper() for c in letters) / len(letters) > 0.6 and len(letters) > 8:
        urgent.append("subject in capitals")
    if text.count("!") >= 3:
        urgent.append("many exclamation marks")
    high = _hits(lowered, levels.get("high", []))
    low = _hits(lowered, levels.get("low", []))
    thresholds = rules.get("thresholds", {})
    if len(urgent) >= thresholds.get("urgent", 2):
        priority = "urgent"
    elif urgent or len(high) >= thresholds.get("high", 1):
        priority = "high"
    elif low:
        priority = "low"
    else:
        priority = "normal"
    for level, hits in (("urgent", urgent), ("high", high), ("low", low)):
        if hits:
            reasons.append(f"{level} signals: {', '.join(hits)}")
    return {"category": category, "priority": priority, "is_urgent": priority == "urgent",
            "scores": scores, "reasons": reasons}


def _hits(text: str, phrases: list[str]) -> list[str]:
    return [p for p in phrases if re.search(r"(?<!\w)" + re.escape(p.lower()) + r"(?!\w)", text)]


def _load_rules(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"rules_path: no such file: {path}")
    try:
        rules = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"rules_path: {path.name} is not valid JSON ({exc.msg})") from exc
    if not isinstance(rules, dict) or not isinstance(rules.get("categories"), dict) \
            or not isinstance(rules.get("priority"), dict):
        raise ValueError(f"rules_path: {path.name} needs 'categories' and 'priority' objects")
    return rules
