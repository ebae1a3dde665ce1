"""Report analysis: pdf-to-text, extract-metrics, summarize-text, markdown-table."""

from __future__ import annotations

import re
from pathlib import Path

from tests.library.conftest import run_skill


def report_text(samples: Path) -> str:
    return run_skill("pdf-to-text", path=str(samples / "quarterly_report.pdf"))["text"]


def test_pdf_to_text_reads_both_pages_and_the_title(samples: Path) -> None:
    result = run_skill("pdf-to-text", path=str(samples / "quarterly_report.pdf"))
    assert result["pages"] == 2
    assert result["title"] == "Larkspur Outfitters - Q3 2024 business review"
    assert result["empty_pages"] == 0
    assert "Executive summary" in result["page_texts"][0]
    assert "Regional performance and outlook" in result["page_texts"][1]
    assert result["text"].count("Page 1 of 2") == 1


def test_pdf_to_text_max_pages_reads_only_the_first(samples: Path) -> None:
    result = run_skill("pdf-to-text", path=str(samples / "quarterly_report.pdf"), max_pages=1)
    assert result["pages"] == 2 and len(result["page_texts"]) == 1
    assert "Regional performance" not in result["text"]


def test_extract_metrics_finds_the_printed_figures_with_units(samples: Path) -> None:
    result = run_skill("extract-metrics", text=report_text(samples), limit=10)
    by_label = {m["label"]: m for m in result["metrics"]}
    assert by_label["Revenue"]["value"] == 4_820_000
    assert by_label["Revenue"]["unit"] == "USD"
    assert by_label["Revenue"]["display"] == "$4.82 million"
    assert by_label["Revenue"]["change"] == "up 12.4%"
    assert (by_label["Gross margin"]["value"], by_label["Gross margin"]["unit"]) == (61.3, "%")
    assert by_label["Operating expenses"]["value"] == 2_950_000
    assert by_label["Active customers"]["value"] == 18_240
    assert by_label["Net promoter score"]["value"] == 47
    assert not any(m["value"] == 2024 for m in result["metrics"]), "a year is not a metric"
    assert result["count"] == len(result["metrics"])


def test_extract_metrics_respects_the_limit_and_keeps_document_order(samples: Path) -> None:
    result = run_skill("extract-metrics", text=report_text(samples), limit=2)
    assert [m["label"] for m in result["metrics"]] == ["Revenue", "Gross margin"]


def test_summarize_text_picks_sentences_from_the_report_in_order(samples: Path) -> None:
    text = report_text(samples)
    metrics = run_skill("extract-metrics", text=text)["metrics"]
    result = run_skill("summarize-text", text=text, max_sentences=3, metrics=metrics)
    assert len(result["sentences"]) == 3
    flat = " ".join(text.split())
    positions = [flat.find(s) for s in result["sentences"]]
    assert all(p >= 0 for p in positions), "every summary sentence comes from the source"
    assert positions == sorted(positions)
    assert "$4.82 million" in result["summary"]
    assert result["total_sentences"] > 3


def test_summarize_text_handles_chinese(samples: Path) -> None:
    body = (samples / "complaint_zh.txt").read_text(encoding="utf-8").split("\n\n", 1)[1]
    result = run_skill("summarize-text", text=body, max_sentences=2)
    assert len(result["sentences"]) == 2
    assert all(s.endswith(("。", "！", "？")) for s in result["sentences"])
    assert " " not in result["summary"]


def test_markdown_table_formats_numbers_and_escapes_pipes() -> None:
    rows = [{"label": "Revenue", "value": 4820000, "note": "a|b"},
            {"label": "Margin", "value": 61.3456, "note": "line\nbreak"}]
    result = run_skill("markdown-table", rows=rows, headers={"value": "Value"})
    lines = result["markdown"].splitlines()
    assert lines[0] == "| label | Value | note |"
    assert lines[1] == "| --- | ---: | --- |"
    assert lines[2] == "| Revenue | 4,820,000 | a\\|b |"
    assert lines[3] == "| Margin | 61.35 | line<br>break |"
    assert result["row_count"] == 2


def test_markdown_table_of_report_metrics(samples: Path) -> None:
    metrics = run_skill("extract-metrics", text=report_text(samples))["metrics"]
    result = run_skill("markdown-table", rows=metrics, columns=["label", "display"])
    assert re.search(r"^\| Revenue \| \$4\.82 million \|$", result["markdown"], re.MULTILINE)
    assert result["columns"] == ["label", "display"]


def test_extract_metrics_reads_a_change_in_brackets_and_currency_codes() -> None:
    result = run_skill("extract-metrics", text="Key figures\nHeadcount: 42 (up 5%)\n"
                                               "Revenue: EUR 3.2m\n")
    assert result["metrics"] == [
        {"label": "Headcount", "value": 42, "unit": "", "display": "42", "change": "up 5%"},
        {"label": "Revenue", "value": 3_200_000, "unit": "EUR", "display": "EUR 3.2m",
         "change": ""},
    ]
