"""Regenerate the sample PDFs next to this script, byte for byte the same on every run.

Usage: ``python library/samples/make_samples.py [output_dir]`` (default: this folder).
Needs fpdf2 (``import fpdf``). The other samples are plain text files kept as they are.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF

HERE = Path(__file__).resolve().parent
FIXED_DATE = datetime(2024, 10, 1, 9, 0, tzinfo=UTC)

REPORT_PAGES = [
    ("Executive summary", [
        "Larkspur Outfitters closed the third quarter of 2024 ahead of plan. Demand for the new "
        "trail range held up through the summer, and the shift towards direct online sales kept "
        "improving our margin mix.",
        "Revenue reached $4.82 million, up 12.4% year over year, while the gross margin held at "
        "61.3% despite higher freight costs. Operating expenses rose to $2.95 million as we "
        "opened the second fulfilment site.",
        "Our customer base kept growing: we ended the quarter with 18,240 active customers, and "
        "monthly churn fell to 2.1% from 2.6% a year ago. The net promoter score climbed to 47.",
    ], [
        ("Revenue", "$4.82 million"),
        ("Gross margin", "61.3%"),
        ("Operating expenses", "$2.95 million"),
        ("Active customers", "18,240"),
        ("Customer churn", "2.1%"),
        ("Net promoter score", "47"),
    ]),
    ("Regional performance and outlook", [
        "The northern region contributed 44% of sales and grew fastest. Wholesale orders in the "
        "south slowed after two retail partners reduced their stock levels, and we expect that "
        "channel to stay flat until the spring catalogue ships.",
        "Average order value rose to $86.40. Returns stayed low at 3.8% of orders, helped by the "
        "improved sizing guide that went live in July.",
        "For the fourth quarter we plan revenue of $5.30 million and will hold operating expenses "
        "flat. The main risks are freight prices and the timing of the holiday campaign; the main "
        "opportunity is the corporate gifting programme, which already has 35 signed accounts.",
    ], []),
]

INVOICE_ITEMS = [
    ("Ergonomic office chair", 4, "189.00", "756.00"),
    ("Standing desk frame", 2, "145.50", "291.00"),
    ("Printer paper, A4, box of 5 reams", 6, "22.25", "133.50"),
]


class _SamplePDF(FPDF):
    def footer(self) -> None:
        self.set_y(-15)
        self.set_font("Helvetica", "I", 8)
        self.cell(0, 8, f"Page {self.page_no()} of {{nb}}", align="C")


def _new_pdf(title: str, author: str) -> FPDF:
    pdf = _SamplePDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.set_auto_page_break(auto=True, margin=18)
    return pdf


def make_report(path: Path) -> None:
    pdf = _new_pdf("Larkspur Outfitters - Q3 2024 business review", "Larkspur Finance")
    for number, (heading, paragraphs, figures) in enumerate(REPORT_PAGES, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 18)
        if number == 1:
            pdf.cell(0, 12, "Larkspur Outfitters - Q3 2024 business review",
                     new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
        if figures:
            pdf.set_font("Helvetica", "B", 12)
            pdf.cell(0, 9, "Key figures", new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=11)
            for label, value in figures:
                pdf.cell(0, 7, f"{label}: {value}", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))


def make_invoice(path: Path) -> None:
    pdf = _new_pdf("Invoice BW-2024-0193", "Brightwater Office Supply Ltd.")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 8, "Brightwater Office Supply Ltd.", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    for line in ("12 Harbour Row, Bristol BS1 4QA", "accounts@brightwater.example"):
        pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.set_font("Helvetica", "B", 20)
    pdf.cell(0, 12, "INVOICE", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    for line in ("Invoice number: BW-2024-0193", "Invoice date: 14 September 2024",
                 "Due date: 14 October 2024", "Bill to: Larkspur Outfitters, 3 Mill Lane, Leeds"):
        pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    widths = (95, 20, 35, 35)
    pdf.set_font("Helvetica", "B", 11)
    for width, title in zip(widths, ("Description", "Qty", "Unit price", "Amount"), strict=True):
        pdf.cell(width, 8, title, border="B", align="L" if title == "Description" else "R")
    pdf.ln()
    pdf.set_font("Helvetica", size=11)
    for description, quantity, unit_price, amount in INVOICE_ITEMS:
        pdf.cell(widths[0], 7, description)
        pdf.cell(widths[1], 7, str(quantity), align="R")
        pdf.cell(widths[2], 7, unit_price, align="R")
        pdf.cell(widths[3], 7, amount, align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    for label, value, style in (("Subtotal", "1,180.50", ""), ("Tax (8%)", "94.44", ""),
                                ("Total due", "USD 1,274.94", "B")):
        pdf.set_font("Helvetica", style, 11)
        pdf.cell(150, 7, f"{label}:", align="R")
        pdf.cell(35, 7, value, align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(8)
    pdf.set_font("Helvetica", size=9)
    pdf.multi_cell(0, 5, "Payment terms: 30 days. Please quote the invoice number with your "
                         "payment. Bank transfer to Brightwater Office Supply Ltd., sort code "
                         "00-00-00, account 00000000.")
    pdf.output(str(path))


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE
    out.mkdir(parents=True, exist_ok=True)
    make_report(out / "quarterly_report.pdf")
    make_invoice(out / "invoice.pdf")
    print(f"wrote {out / 'quarterly_report.pdf'} and {out / 'invoice.pdf'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
