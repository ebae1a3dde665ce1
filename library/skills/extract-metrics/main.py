"""Labelled figures from business text, found with regular expressions."""

from __future__ import annotations

import re
from typing import Any

_CURRENCY = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "usd": "USD", "eur": "EUR",
             "gbp": "GBP", "jpy": "JPY", "cny": "CNY", "rmb": "CNY"}
_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9,
          "bn": 1e9, "b": 1e9}
_VALUE = (r"(?P<cur>[$€£¥]|\b(?:USD|EUR|GBP|JPY|CNY|RMB)\s?)?"
          r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
          r"(?:\s?(?P<scale>thousand|million|billion|bn|mn|[kKmMbB])\b)?"
          r"(?P<pct>\s?%|\s?percent\b)?")
_LABELLED = re.compile(r"^\s*(?P<label>[A-Za-z][A-Za-z &/()'-]{1,48}?)\s*[:=]\s*" + _VALUE
                       + r"\s*(?:\([^)]*\))?\s*$", re.MULTILINE)
_VERBS = (r"reached|rose to|grew to|increased to|fell to|dropped to|declined to|climbed to|"
          r"improved to|came in at|stood at|totall?ed|was|were|is|are|of|at|to|held at|hit")
_PROSE = re.compile(r"(?P<label>(?:[A-Za-z][\w'-]*\s){0,3}[A-Za-z][\w'-]*)\s+(?:" + _VERBS
                    + r")\s+" + _VALUE, re.IGNORECASE)
_CHANGE = re.compile(r"^\s*,?\s*\(?\s*(?P<change>(?:up|down|an? (?:increase|decrease) of)\s+"
                     r"\d+(?:\.\d+)?\s?(?:%|percent|points|pp))", re.IGNORECASE)
_STOP_LABEL = {"the", "a", "an", "our", "we", "it", "this", "that", "which", "and", "while",
               "as", "with", "from", "its", "their", "at", "to", "of", "in", "for", "on", "by",
               "rose", "fell", "grew", "climbed", "increased", "dropped", "declined", "stayed",
               "held", "reached", "came", "stood", "remained", "improved", "was", "were", "is",
               "are", "hit", "plan", "planned", "expect", "expected", "low", "high", "flat"}


def run(text: str, limit: int = 10) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: nothing to scan; pass the report text (e.g. from pdf-to-text)")
    if limit is not None and limit < 1:
        raise ValueError(f"limit: must be at least 1, not {limit}")
    found: list[tuple[int, dict[str, Any]]] = []
    seen: set[str] = set()
    flat = re.sub(r"\s*\n\s*", " ", text)
    for match in _PROSE.finditer(flat):
        _add(found, seen, match, _clean_label(match["label"]), flat, match.start())
    # Then "Label: value" lines, as in a key-figures box; labels already seen are skipped.
    for match in _LABELLED.finditer(text):
        position = flat.find(match.group(0).strip()[:20])
        _add(found, seen, match, _clean_label(match["label"]), text, position
             if position >= 0 else len(flat))
    found.sort(key=lambda item: item[0])
    metrics: list[dict[str, Any]] = []
    for _, metric in found:
        # "monthly churn fell to 2.1%" and "Customer churn: 2.1%" are the same figure.
        if not any(_same_figure(metric, kept) for kept in metrics):
            metrics.append(metric)
    metrics = metrics[: limit or 10]
    return {"metrics": metrics, "count": len(metrics)}


def _add(found: list[tuple[int, dict[str, Any]]], seen: set[str], match: re.Match[str],
         label: str, source: str, position: int) -> None:
    if not label or label.lower() in seen:
        return
    number = float(match["num"].replace(",", ""))
    scale_word = (match["scale"] or "").lower()
    currency = _CURRENCY.get((match["cur"] or "").strip().lower(), "")
    is_pct = bool(match["pct"])
    if not (currency or is_pct or scale_word) and 1900 <= number <= 2100 and "." not in match["num"]:
        return  # a year, not a figure
    value = number * _SCALE.get(scale_word, 1)
    unit = "%" if is_pct else currency
    start = match.start("cur") if match["cur"] else match.start("num")
    end = max(match.end(group) for group in ("num", "scale", "pct") if match[group])
    display = source[start:end].strip()
    change = _CHANGE.match(source[end:end + 60])  # ", up 12.4% ..." or " (up 5%)"
    seen.add(label.lower())
    found.append((position, {
        "label": label,
        "value": int(value) if value.is_integer() else round(value, 6),
        "unit": unit,
        "display": display,
        "change": change["change"] if change else "",
    }))


def _same_figure(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a["value"], a["unit"]) == (b["value"], b["unit"]) and \
        a["label"].split()[-1].lower() == b["label"].split()[-1].lower()


def _clean_label(raw: str) -> str:
    """The noun phrase just before the number: 'Operating expenses rose' -> 'Operating expenses'."""
    words = raw.strip().split()
    while words and words[-1].lower() in _STOP_LABEL:
        words.pop()
    start = max((i + 1 for i, w in enumerate(words) if w.lower() in _STOP_LABEL), default=0)
    words = words[start:][-4:]
    if not words or all(w.isdigit() for w in words):
        return ""
    label = " ".join(words)
    return label[0].upper() + label[1:]
