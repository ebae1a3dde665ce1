"""Invoice fields from invoice text, found by their labels."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

_AMOUNT = r"(?P<cur>[$€£¥]|\b[A-Z]{3}\b)?\s?(?P<amount>-?\d{1,3}(?:[,.\s]\d{3})*(?:[.,]\d{2})?|-?\d+(?:[.,]\d{2})?)\s?(?P<cur2>[$€£¥]|\b[A-Z]{3}\b)?"
_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_LABELS = {
    "invoice_number": r"(?:invoice\s*(?:number|no\.?|num\.?|#)|inv\.?\s*(?:no\.?|#))\s*[:#]?\s*(?P<value>[A-Z0-9][A-Z0-9/_-]{2,})",
    "invoice_date": r"(?:invoice\s*date|date\s*of\s*issue|issue\s*date|issued(?:\s*on)?|^\s*date)\s*[:]?\s*(?P<value>[^\n]+)",
    "due_date": r"(?:due\s*date|payment\s*due|due\s*by|pay\s*by)\s*[:]?\s*(?P<value>[^\n]+)",
    "total": r"(?:total\s*(?:due|amount|payable)|amount\s*(?:due|payable)|balance\s*due|grand\s*total|(?<!sub)(?<!sub-)total)\s*(?:\([^)]*\))?\s*[:]?\s*" + _AMOUNT,
    "subtotal": r"(?:sub-?\s*total|net\s*(?:amount|total)?)\s*[:]?\s*" + _AMOUNT,
    "tax": r"\b(?:tax|vat|gst|sales\s*tax)\s*(?:\([^)]*\))?\s*[:]?\s*" + _AMOUNT,
}
_MONTHS = {m: i for i, m in enumerate(
    "jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
_COMPANY = re.compile(r"\b(ltd|limited|inc|llc|gmbh|plc|corp|co\.|company|s\.a\.|sarl|bv|ag|pty)\b",
                      re.IGNORECASE)
_ITEM = re.compile(r"^(?P<description>.*?[A-Za-z].*?)\s+(?P<qty>\d+(?:\.\d+)?)\s+"
                   r"(?P<price>\d{1,3}(?:,\d{3})*\.\d{2})\s+(?P<amount>\d{1,3}(?:,\d{3})*\.\d{2})$")


def run(text: str, default_currency: str = "USD") -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text: the invoice text is empty")
    if not re.fullmatch(r"[A-Z]{3}", default_currency or ""):
        raise ValueError(f"default_currency: {default_currency!r} is not an ISO code like USD")
    found: dict[str, Any] = {}
    currency = ""
    for field, pattern in _LABELS.items():
        match = re.search(pattern, text, re.IGNORECASE | re.MULTILINE)
        if not match:
            found[field] = None
        elif field in ("total", "subtotal", "tax"):
            found[field] = parse_amount(match["amount"])
            code = match["cur"] or match["cur2"] or ""
            currency = currency or _SYMBOLS.get(code, code if code.isupper() else "")
        elif field.endswith("_date"):
            found[field] = parse_date(match["value"])
        else:
            found[field] = match["value"].strip()
    if found["due_date"] is None and found["invoice_date"]:
        terms = re.search(r"(?:payment\s*terms|net)\s*[:]?\s*(\d{1,3})\s*days", text, re.I)
        if terms:
            due = date.fromisoformat(found["invoice_date"]) + timedelta(days=int(terms.group(1)))
            found["due_date"] = due.isoformat()
    found["vendor"] = _vendor(text)
    found["currency"] = currency or default_currency
    found["line_items"] = [
        {"description": m["description"].strip(), "quantity": float(m["qty"]),
         "unit_price": parse_amount(m["price"]), "amount": parse_amount(m["amount"])}
        for m in (_ITEM.match(line.strip()) for line in text.splitlines()) if m]
    invoice = {k: found.get(k) for k in ("invoice_number", "invoice_date", "due_date", "vendor",
                                          "currency", "subtotal", "tax", "total", "line_items")}
    missing = [k for k in ("invoice_number", "invoice_date", "vendor", "total") if not invoice[k]]
    return {"invoice": invoice, "invoice_number": invoice["invoice_number"] or "",
            "vendor": invoice["vendor"] or "", "total": invoice["total"] or 0.0,
            "currency": invoice["currency"], "missing": missing}


def parse_amount(text: str) -> float:
    """'1,274.94', '1.274,94', '1 274.94' -> 1274.94."""
    cleaned = text.replace(" ", "")
    if re.search(r",\d{2}$", cleaned):  # decimal comma
        cleaned = cleaned.replace(".", "").replace(",", ".")
    return round(float(cleaned.replace(",", "")), 2)


def parse_date(text: str) -> str | None:
    value = text.strip().rstrip(".")
    if m := re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", value):
        return date(int(m[1]), int(m[2]), int(m[3])).isoformat()
    if m := re.search(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,})\.?,?\s+(\d{4})\b", value):
        month = _MONTHS.get(m[2][:3].lower())
        return date(int(m[3]), month, int(m[1])).isoformat() if month else None
    if m := re.search(r"\b([A-Za-z]{3,})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b", value):
        month = _MONTHS.get(m[1][:3].lower())
        return date(int(m[3]), month, int(m[2])).isoformat() if month else None
    if m := re.search(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b", value):
        try:
            return datetime(int(m[3]), int(m[2]), int(m[1])).date().isoformat()
        except ValueError:
            return None
    return None


def _vendor(text: str) -> str | None:
    labelled = re.search(r"^(?:from|vendor|supplier|seller|bill\s*from)\s*:\s*(.+)$", text,
                         re.IGNORECASE | re.MULTILINE)
    if labelled:
        return labelled.group(1).strip()
    for line in text.splitlines():
        if re.match(r"^\s*(bill|ship)\s*to\b", line, re.IGNORECASE):
            continue
        if _COMPANY.search(line) and len(line) < 80:
            return line.strip().rstrip(",")
    return None
