"""Invoice to ledger: field extraction, validation, ledger rows, checksums."""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
from pypdf import PdfReader

from tests.library.conftest import call_skill, run_skill


def invoice_text(samples: Path) -> str:
    return run_skill("pdf-to-text", path=str(samples / "invoice.pdf"))["text"]


def invoice(samples: Path) -> dict[str, Any]:
    return run_skill("extract-invoice-fields", text=invoice_text(samples))["invoice"]


def test_extracted_total_is_the_number_printed_in_the_pdf(samples: Path) -> None:
    printed = PdfReader(samples / "invoice.pdf").pages[0].extract_text()
    match = re.search(r"Total due: USD ([\d,]+\.\d{2})", printed)
    assert match, "the sample invoice prints its total"
    result = run_skill("extract-invoice-fields", text=invoice_text(samples))
    assert result["total"] == float(match.group(1).replace(",", ""))
    assert result["invoice_number"] == "BW-2024-0193"
    assert result["vendor"] == "Brightwater Office Supply Ltd."
    assert result["currency"] == "USD"
    assert result["missing"] == []
    fields = result["invoice"]
    assert (fields["invoice_date"], fields["due_date"]) == ("2024-09-14", "2024-10-14")
    assert (fields["subtotal"], fields["tax"]) == (1180.5, 94.44)
    assert [i["description"] for i in fields["line_items"]] == [
        "Ergonomic office chair", "Standing desk frame", "Printer paper, A4, box of 5 reams"]
    assert sum(i["amount"] for i in fields["line_items"]) == pytest.approx(fields["subtotal"])


def test_extract_invoice_fields_other_layouts() -> None:
    text = ("ACME GmbH\nRechnung / Invoice\nInvoice #: A-77/2024\nDate: 03.05.2024\n"
            "Payment terms: 14 days\nNet amount: 1.000,00 EUR\nVAT (19%): 190,00 EUR\n"
            "Grand total: 1.190,00 EUR\n")
    result = run_skill("extract-invoice-fields", text=text)
    fields = result["invoice"]
    assert result["invoice_number"] == "A-77/2024"
    assert result["vendor"] == "ACME GmbH"
    assert (fields["invoice_date"], fields["due_date"]) == ("2024-05-03", "2024-05-17")
    assert (fields["subtotal"], fields["tax"], result["total"]) == (1000.0, 190.0, 1190.0)
    assert result["currency"] == "EUR"


def test_extract_invoice_fields_lists_what_is_missing() -> None:
    result = run_skill("extract-invoice-fields", text="Thank you for your order.")
    assert result["missing"] == ["invoice_number", "invoice_date", "vendor", "total"]
    assert result["total"] == 0 and result["invoice"]["total"] is None


def test_validate_invoice_accepts_the_sample(samples: Path) -> None:
    result = run_skill("validate-invoice", invoice=invoice(samples), as_of="2024-09-20")
    assert result == {"valid": True, "errors": [], "warnings": [], "duplicate": False,
                      "report": "Invoice is valid."}


def test_validate_invoice_catches_arithmetic_dates_and_limits(samples: Path) -> None:
    broken = {**invoice(samples), "total": 1300.0, "due_date": "2024-09-01"}
    result = run_skill("validate-invoice", invoice=broken, approval_limit=1000,
                       as_of="2024-09-20")
    assert result["valid"] is False
    assert result["errors"] == [
        "subtotal 1180.50 + tax 94.44 = 1274.94, but the total is 1300.00",
        "due date 2024-09-01 is before the invoice date 2024-09-14",
    ]
    assert "payment was due on 2024-09-01" in result["warnings"]
    assert any("above the approval limit" in w for w in result["warnings"])
    assert result["report"].startswith("ERROR: subtotal")


def test_ledger_appends_once_and_validation_then_sees_the_duplicate(samples: Path,
                                                                    tmp_path: Path) -> None:
    ledger = tmp_path / "books" / "ledger.csv"
    digest = run_skill("file-checksum", paths=str(samples / "invoice.pdf"))["digest"]
    first = run_skill("append-ledger-row", invoice=invoice(samples), ledger_path=str(ledger),
                      source_file="invoice.pdf", source_sha256=digest)
    assert (first["appended"], first["row_number"], first["row_count"]) == (True, 1, 1)
    assert first["currency_total"] == 1274.94
    again = run_skill("append-ledger-row", invoice=invoice(samples), ledger_path=str(ledger))
    assert (again["appended"], again["row_number"], again["row_count"]) == (False, 1, 1)
    other = {**invoice(samples), "invoice_number": "BW-2024-0200", "total": 25.06}
    third = run_skill("append-ledger-row", invoice=other, ledger_path=str(ledger))
    assert (third["row_number"], third["currency_total"]) == (2, 1300.0)
    with ledger.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["invoice_number"] for r in rows] == ["BW-2024-0193", "BW-2024-0200"]
    assert rows[0]["total"] == "1274.94" and rows[0]["source_sha256"] == digest
    check = run_skill("validate-invoice", invoice=invoice(samples), ledger_path=str(ledger),
                      as_of="2024-09-20")
    assert check["duplicate"] is True and check["valid"] is False


def test_ledger_with_a_different_header_is_refused(samples: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("number,amount\n1,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^ledger_path: .* has columns"):
        call_skill("append-ledger-row", invoice=invoice(samples), ledger_path=str(ledger))
    assert ledger.read_text(encoding="utf-8") == "number,amount\n1,2\n"


def test_file_checksum_matches_hashlib_and_groups_duplicates(samples: Path,
                                                             tmp_path: Path) -> None:
    copy = tmp_path / "copy.pdf"
    copy.write_bytes((samples / "invoice.pdf").read_bytes())
    paths = [str(samples / "invoice.pdf"), str(samples / "quarterly_report.pdf"), str(copy)]
    result = run_skill("file-checksum", paths=paths)
    assert result["digest"] == hashlib.sha256((samples / "invoice.pdf").read_bytes()).hexdigest()
    assert result["files"][1]["bytes"] == (samples / "quarterly_report.pdf").stat().st_size
    assert result["duplicates"] == [[paths[0], paths[2]]]
    md5 = run_skill("file-checksum", paths=str(copy), algorithm="md5")
    assert md5["digest"] == hashlib.md5(copy.read_bytes()).hexdigest()
