"""Mask emails, phones, cards, IBANs, IPs, Chinese IDs and SSNs in text, with checksums."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

KINDS = ("card", "iban", "cn_id", "ssn", "email", "ip", "phone")  # earlier kinds win overlaps


def _luhn(text: str) -> bool:
    digits = [int(d) for d in re.sub(r"\D", "", text)]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _iban(text: str) -> bool:
    compact = re.sub(r"\s", "", text).upper()
    moved = compact[4:] + compact[:4]
    return 15 <= len(compact) <= 34 and int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _cn_id(text: str) -> bool:
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    total = sum(int(d) * w for d, w in zip(text[:17], weights, strict=True))
    return "10X98765432"[total % 11] == text[17].upper()


def _ip(text: str) -> bool:
    return all(0 <= int(part) <= 255 for part in text.split("."))


def _phone(text: str) -> bool:
    if re.fullmatch(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{4}", text):
        return False  # a date
    if re.search(r"\.\d{2}(?!\d)", text):
        return False  # amounts such as "189.00 756.00"
    digits = len(re.sub(r"\D", "", text))
    international = text.startswith(("+", "00", "("))
    return (8 if international else 9) <= digits <= 15


PATTERNS: dict[str, tuple[re.Pattern[str], Callable[[str], bool] | None]] = {
    "card": (re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)"), _luhn),
    "iban": (re.compile(r"\b[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,4})?\b"), _iban),
    "cn_id": (re.compile(r"(?<!\d)\d{17}[\dXx](?!\d)"), _cn_id),
    "ssn": (re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)"), None),
    "email": (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"), None),
    "ip": (re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])"), _ip),
    "phone": (re.compile(r"(?<![A-Za-z0-9+/-])(?:\+|00|\()?\d[\d ().-]{6,17}\d(?!\d)"), _phone),
}


def run(text: str, kinds: list[str] | None = None, style: str = "label") -> dict[str, Any]:
    if not isinstance(text, str):
        raise ValueError("text: must be a string")
    wanted = list(kinds or KINDS)
    unknown = [k for k in wanted if k not in KINDS]
    if unknown:
        raise ValueError(f"kinds: unknown {', '.join(unknown)}; use {', '.join(KINDS)}")
    if style not in ("label", "partial"):
        raise ValueError(f"style: expected 'label' or 'partial', not {style!r}")
    spans: list[tuple[int, int, str]] = []
    for kind in KINDS:
        if kind not in wanted:
            continue
        pattern, check = PATTERNS[kind]
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e, _ in spans):
                continue
            if check is None or check(match.group(0)):
                spans.append((start, end, kind))
    counts: dict[str, int] = {}
    out, last = [], 0
    for start, end, kind in sorted(spans):
        out.append(text[last:start])
        out.append(_mask(text[start:end], kind, style))
        counts[kind] = counts.get(kind, 0) + 1
        last = end
    out.append(text[last:])
    return {"text": "".join(out), "counts": counts, "total": sum(counts.values()),
            "found_kinds": [k for k in KINDS if k in counts]}


def _mask(value: str, kind: str, style: str) -> str:
    if style == "label":
        return f"[{kind.upper()}]"
    if kind == "email":
        local, _, domain = value.partition("@")
        return f"{local[:1]}***@{domain}"
    compact = re.sub(r"[\s().-]", "", value)
    return "*" * max(len(compact) - 4, 4) + compact[-4:]
