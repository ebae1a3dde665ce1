"""Append an invoice to a CSV ledger, once per vendor and invoice number."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

COLUMNS = ["invoice_number", "vendor", "invoice_date", "due_date", "currency", "subtotal", "tax",
           "total", "source_file", "source_sha256", "recorded_at"]


def run(invoice: dict[str, Any], ledger_path: str, source_file: str = "",
        source_sha256: str = "") -> dict[str, Any]:
    if not isinstance(invoice, dict):
        raise ValueError("invoice: must be the invoice object from extract-invoice-fields")
    missing = [f for f in ("invoice_number", "vendor", "total") if invoice.get(f) in (None, "")]
    if missing:
        raise ValueError(f"invoice: cannot record an invoice without {', '.join(missing)}")
    if not ledger_path:
        raise ValueError("ledger_path: give the ledger CSV file to append to")
    ledger = Path(ledger_path).expanduser()
    rows = _existing(ledger)
    key = (str(invoice["vendor"]).strip().lower(), str(invoice["invoice_number"]).strip().lower())
    position = next((i for i, r in enumerate(rows, start=1)
                     if (r["vendor"].strip().lower(), r["invoice_number"].strip().lower()) == key),
                    None)
    appended = position is None
    if appended:
        row = {
            "invoice_number": str(invoice["invoice_number"]).strip(),
            "vendor": str(invoice["vendor"]).strip(),
            "invoice_date": invoice.get("invoice_date") or "",
            "due_date": invoice.get("due_date") or "",
            "currency": invoice.get("currency") or "",
            "subtotal": _money(invoice.get("subtotal")),
            "tax": _money(invoice.get("tax")),
            "total": _money(invoice["total"]),
            "source_file": source_file,
            "source_sha256": source_sha256,
            "recorded_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        }
        ledger.parent.mkdir(parents=True, exist_ok=True)
        new_file = not ledger.exists() or ledger.stat().st_size == 0
        with ledger.open("a", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            if new_file:
                writer.writeheader()
            writer.writerow(row)
        rows.append(row)
        position = len(rows)
    currency = invoice.get("currency") or ""
    total = sum(float(r["total"] or 0) for r in rows if r["currency"] == currency)
    return {"appended": appended, "row_number": position, "row_count": len(rows),
            "ledger_path": str(ledger), "currency_total": round(total, 2)}


def _existing(ledger: Path) -> list[dict[str, str]]:
    if not ledger.exists() or ledger.stat().st_size == 0:
        return []
    with ledger.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != COLUMNS:
            raise ValueError(f"ledger_path: {ledger} has columns {reader.fieldnames}, expected "
                             f"{COLUMNS}; use a new file or fix its header")
        return list(reader)


def _money(value: Any) -> str:
    if value in (None, ""):
        return ""
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invoice: amount {value!r} is not a number") from exc
