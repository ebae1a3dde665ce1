"""Validation of an extracted invoice: completeness, arithmetic, dates, duplicates."""

from __future__ import annotations

import csv
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REQUIRED = ("invoice_number", "invoice_date", "vendor", "total")


def run(invoice: dict[str, Any], ledger_path: str = "", approval_limit: float = 10000,
        tolerance: float = 0.02, as_of: str = "") -> dict[str, Any]:
    if not isinstance(invoice, dict):
        raise ValueError("invoice: must be the invoice object from extract-invoice-fields")
    try:
        today = date.fromisoformat(as_of) if as_of else date.today()
    except ValueError as exc:
        raise ValueError(f"as_of: {as_of!r} is not a YYYY-MM-DD date") from exc
    errors: list[str] = []
    warnings: list[str] = []
    for field in REQUIRED:
        if invoice.get(field) in (None, ""):
            errors.append(f"{field} is missing")
    total = _number(invoice.get("total"), "total", errors)
    subtotal = _number(invoice.get("subtotal"), "subtotal", errors)
    tax = _number(invoice.get("tax"), "tax", errors)
    if total is not None and total <= 0:
        errors.append(f"total must be positive, not {total:.2f}")
    if total is not None and subtotal is not None:
        expected = subtotal + (tax or 0)
        if abs(expected - total) > tolerance:
            errors.append(f"subtotal {subtotal:.2f} + tax {tax or 0:.2f} = {expected:.2f}, "
                          f"but the total is {total:.2f}")
    items = invoice.get("line_items") or []
    if items and subtotal is not None:
        item_sum = sum(float(i.get("amount") or 0) for i in items if isinstance(i, dict))
        if abs(item_sum - subtotal) > tolerance:
            errors.append(f"line items add up to {item_sum:.2f}, not the subtotal {subtotal:.2f}")
    elif not items:
        warnings.append("no line items were found; check the invoice by eye")

    issued = _date(invoice.get("invoice_date"), "invoice_date", errors)
    due = _date(invoice.get("due_date"), "due_date", errors)
    if issued and due and due < issued:
        errors.append(f"due date {due} is before the invoice date {issued}")
    if issued and issued > today + timedelta(days=1):
        warnings.append(f"invoice date {issued} is in the future")
    if issued and issued < today - timedelta(days=365):
        warnings.append(f"invoice date {issued} is more than a year ago")
    if due and due < today:
        warnings.append(f"payment was due on {due}")
    if approval_limit and total is not None and total > approval_limit:
        warnings.append(f"total {total:,.2f} is above the approval limit of "
                        f"{approval_limit:,.2f}: a second approver must sign off")

    duplicate = bool(ledger_path) and _in_ledger(Path(ledger_path).expanduser(), invoice)
    if duplicate:
        errors.append(f"invoice {invoice.get('invoice_number')} from {invoice.get('vendor')} is "
                      "already in the ledger")
    lines = [f"ERROR: {e}" for e in errors] + [f"WARNING: {w}" for w in warnings]
    return {"valid": not errors, "errors": errors, "warnings": warnings, "duplicate": duplicate,
            "report": "\n".join(lines) if lines else "Invoice is valid."}


def _number(value: Any, field: str, errors: list[str]) -> float | None:
    if value in (None, ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        errors.append(f"{field} {value!r} is not a number")
        return None


def _date(value: Any, field: str, errors: list[str]) -> date | None:
    if value in (None, ""):
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        errors.append(f"{field} {value!r} is not a YYYY-MM-DD date")
        return None


def _in_ledger(ledger: Path, invoice: dict[str, Any]) -> bool:
    if not ledger.exists():
        return False
    key = (str(invoice.get("vendor", "")).strip().lower(),
           str(invoice.get("invoice_number", "")).strip().lower())
    with ledger.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if (row.get("vendor", "").strip().lower(),
                    row.get("invoice_number", "").strip().lower()) == key:
                return True
    return False
